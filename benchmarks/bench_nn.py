#!/usr/bin/env python3
"""NN operator benchmark: what fusing Yolov3DetectionOutput buys, and what an RPC costs a quantize.

(a) Yolov3 post-processing of a 416x416, 80-class, 3-map (13/26/52), batch-4 input:
    * fused, the batch split over vdsp0 + vdsp1 (two RPCs at once, the SDK's way);
    * fused on one core (one RPC): fusion alone, without the second core;
    * the chain decode -> filter -> NMS -> top-k, one RPC each, on one core.
    Target: chain / fused (two cores) >= 3.
(b) Quantize of a 1x64x56x56 float32 feature map into int8 NCHW with W padded to 64 (the BPU
    guide's example) by RPC, against the same work done by numpy in this process (the operator
    function itself on local buffers), and against the no-op task (PING).
    Target: (RPC p50 - numpy p50) <= 1.3 x PING p50.

All results are checked (chain == fused, quantize == reference) before timing. Wall-clock
medians over the rounds; ``exec_us`` is the firmware's own time for the task.

Usage::

    .venv/bin/python benchmarks/bench_nn.py [--rounds N] [--quick] [--json FILE]

Exit status 0 when the run completes (PASS or MISS), 1 on error, 3 with --fail-on-miss on a miss.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from awake import cpus_kept_awake  # benchmarks/ is the script's directory

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402


def yolo_params():
    from arm_side import nn
    return nn.YoloParams(class_num=80, anchor_num=3, map_w=(13, 26, 52), map_h=(13, 26, 52), net_w=416, net_h=416,
                         biases=[116, 90, 156, 198, 373, 326, 30, 61, 62, 45, 59, 119, 10, 13, 16, 30, 33, 23],
                         max_box_num=100, confidence_thresh=0.5, nms_thresh=0.45)


def timed(fn, rounds: int) -> list[float]:
    fn()  # warm-up (and the first allocation of numpy temporaries)
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def bench_yolo(soc, rounds: int, batch: int) -> dict:
    from arm_side import CORE_0, CORE_1, nn
    p = yolo_params()
    rng = np.random.default_rng(0)
    mems = []
    for m, (w, h) in enumerate(zip(p.map_w, p.map_h)):
        x = rng.standard_normal((batch, 3, 85, w * h)).astype(np.float32)
        x[:, :, 4] -= 3.0   # a realistic objectness: most cells empty
        mem = soc.mem.alloc(p.map_bytes(m, batch))
        mem.write(x.tobytes())
        mems.append(mem)
    out_f, out_c = soc.mem.alloc(p.output_bytes(batch)), soc.mem.alloc(p.output_bytes(batch))
    chain = nn.Chain(soc, p, batch, capacity=16384)
    try:
        det = nn.detection_output(soc, mems, out_f, p, batch)
        res = chain.run(mems, out_c, core=CORE_0)
        if res.counts != det.counts or not np.array_equal(out_f.array(np.float32), out_c.array(np.float32)):
            raise SystemExit("chain and fused disagree")
        fused2 = timed(lambda: nn.detection_output(soc, mems, out_f, p, batch), rounds)
        fused1 = timed(lambda: nn.detection_output(soc, mems, out_f, p, batch, cores=(CORE_1,)), rounds)
        steps = []
        chained = timed(lambda: steps.append(chain.run(mems, out_c, core=CORE_0).exec_us), rounds)
        ex = np.median(np.array(steps[1:]), axis=0) / 1e3
        return {"boxes": det.counts, "fused_2core_ms": fused2, "fused_1core_ms": fused1, "chain_ms": chained,
                "chain_step_exec_ms": dict(zip(["decode", "filter", "nms", "topk"], ex.round(3).tolist()))}
    finally:
        chain.close()
        for mem in (*mems, out_f, out_c):
            mem.free()


def bench_quantize(soc, rounds: int) -> dict:
    from arm_side import nn, opids
    from arm_side.nn import reference as ref
    from dsp_side.operators.nn import quant as dsp_quant
    shape = (1, 64, 56, 56)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    q = nn.Quantization.scale_(0.02)
    src_p = nn.dense(shape, nn.DataType.F32, nn.Layout.NCHW)
    dst_p = nn.aligned(shape, nn.DataType.S8, nn.Layout.NCHW, quant=q)
    src, dst = soc.mem.alloc(src_p.aligned_byte_size), soc.mem.alloc(dst_p.aligned_byte_size)
    local = np.zeros(dst_p.aligned_byte_size, np.uint8)
    try:
        nn.write(src, src_p, x)
        execs = []

        def rpc():
            task = nn.quantize(soc, nn.Tensor(src, src_p), nn.Tensor(dst, dst_p))
            task.wait(10000)
            execs.append(task.exec_us / 1e3)

        host_src = np.frombuffer(x.tobytes(), np.uint8)
        params = {"input": src_p.to_wire(), "output": dst_p.to_wire()}

        def in_process():  # the very operator function, called here on process-local numpy buffers
            dsp_quant.quantize(None, [host_src], [local], **params)

        rpc()
        in_process()
        expect = ref.quantize(x, q, np.int8)
        if not (np.array_equal(nn.read(dst, dst_p), expect) and np.array_equal(dst_p.view(local), expect)):
            raise SystemExit("quantize disagrees with the reference")
        ping = timed(lambda: soc.rpc(opids.PING).wait(5000), rounds * 4)
        return {"rpc_ms": timed(rpc, rounds * 2), "numpy_ms": timed(in_process, rounds * 2), "ping_ms": ping,
                "exec_ms": statistics.median(execs)}
    finally:
        src.free()
        dst.free()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    ap.add_argument("--json", help="write every figure to this file")
    ap.add_argument("--fail-on-miss", action="store_true")
    ap.add_argument("--keep-cpus-awake", action="store_true",
                    help="one SCHED_IDLE spinner per CPU while measuring (see benchmarks/awake.py)")
    args = ap.parse_args(argv)
    rounds = 3 if args.quick else args.rounds
    rt = Path(tempfile.mkdtemp(prefix="vbn", dir="/tmp"))
    shm = tempfile.mkdtemp(prefix="vb-shm-", dir="/dev/shm")
    os.environ.update(VDSP_RUNTIME_DIR=str(rt), VDSP_SHM_DIR=shm)
    for key in ("VDSP_RELAY_ENDPOINT", "VDSP_CORE_ENDPOINTS", "VDSP_STRICT_CACHE"):
        os.environ.pop(key, None)
    from soc.supervisor import Supervisor
    from arm_side import Soc
    sup = Supervisor(rt, log_dir=rt / "log")
    try:
        sup.start()
        sup.wait_ready(60)
        with Soc() as soc, cpus_kept_awake(args.keep_cpus_awake):
            print(f"yolo: {rounds} rounds, batch {args.batch} ...", file=sys.stderr)
            y = bench_yolo(soc, rounds, args.batch)
            print("quantize ...", file=sys.stderr)
            qz = bench_quantize(soc, rounds)
    finally:
        sup.stop()
        shutil.rmtree(rt, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)
    med = statistics.median
    f2, f1, ch = med(y["fused_2core_ms"]), med(y["fused_1core_ms"]), med(y["chain_ms"])
    speedup = ch / f2
    overhead = med(qz["rpc_ms"]) - med(qz["numpy_ms"])
    ratio = overhead / med(qz["ping_ms"])
    rows = [
        ("yolo boxes per batch", str(y["boxes"])),
        ("fused, 2 cores (p50 ms)", f"{f2:.2f}"),
        ("fused, 1 core (p50 ms)", f"{f1:.2f}"),
        ("chain, 4 RPCs, 1 core (p50 ms)", f"{ch:.2f}"),
        ("chain step exec ms", str(y["chain_step_exec_ms"])),
        ("chain / fused 2 cores (>= 3)", f"{speedup:.2f} {'PASS' if speedup >= 3 else 'MISS'}"),
        ("(info) chain / fused 1 core", f"{ch / f1:.2f}"),
        ("quantize 1x64x56x56 RPC (p50 ms)", f"{med(qz['rpc_ms']):.3f} (dsp exec {qz['exec_ms']:.3f})"),
        ("quantize numpy in-process (p50 ms)", f"{med(qz['numpy_ms']):.3f}"),
        ("PING (p50 ms)", f"{med(qz['ping_ms']):.3f}"),
        ("(RPC - numpy) / PING (<= 1.3)", f"{ratio:.2f} {'PASS' if ratio <= 1.3 else 'MISS'}"),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    if args.json:
        Path(args.json).write_text(json.dumps({"yolo": y, "quantize": qz}, indent=1))
    missed = speedup < 3 or ratio > 1.3
    return 3 if (missed and args.fail_on_miss) else 0


if __name__ == "__main__":
    sys.exit(main())

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
    Target: (RPC p50 - numpy p50) <= 1.3 x PING p50, PING measured back to back (the no-op at its
    best; the PING interleaved with the quantize calls is shown too). The three are interleaved.
(c) The floor (floor.py): the same quantize function called through raw pyzmq over the same
    process topology, with nothing of vdsp-sim in between: what any implementation gets here.

All results are checked (chain == fused, quantize == reference) before timing. Wall-clock
medians over the rounds; ``exec_us`` is the firmware's own time for the task.

Usage::

    .venv/bin/vdsp bench nn [--rounds N] [--quick] [--json FILE]

Exit status 0 when the run completes (PASS or MISS), 1 on error, 3 with --fail-on-miss on a miss.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time

from vdsp_sim.benchmarks.awake import cpus_kept_awake
from vdsp_sim.benchmarks.floor import Floor
from vdsp_sim.benchmarks.report import Report
from vdsp_board.config import clihelp, settings
from vdsp_sim.soc.private_soc import private_soc

from dsp_side.heap import keep_heap  # noqa: E402

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


def _ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


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


def quantize_case():
    """The quantize benchmark's input and its in-process form: the very operator function,
    called on process-local numpy buffers. Returns (x, quantization, src props, dst props,
    the local output buffer, in_process())."""
    from arm_side import nn
    from dsp_side.operators.nn import quant as dsp_quant
    shape = (1, 64, 56, 56)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    q = nn.Quantization.scale_(0.02)
    src_p = nn.dense(shape, nn.DataType.F32, nn.Layout.NCHW)
    dst_p = nn.aligned(shape, nn.DataType.S8, nn.Layout.NCHW, quant=q)
    local = np.zeros(dst_p.aligned_byte_size, np.uint8)
    host_src = np.frombuffer(x.tobytes(), np.uint8)
    params = {"input": src_p.to_wire(), "output": dst_p.to_wire()}

    def in_process():
        dsp_quant.quantize(None, [host_src], [local], **params)
    return x, q, src_p, dst_p, local, in_process


def floor_kernels() -> dict:
    """For the floor's worker process (floor.py)."""
    return {"quantize": quantize_case()[-1]}


def bench_quantize(soc, rounds: int, floor=None) -> dict:
    from arm_side import nn, opids
    from arm_side.nn import reference as ref
    x, q, src_p, dst_p, local, in_process = quantize_case()
    src, dst = soc.mem.alloc(src_p.aligned_byte_size), soc.mem.alloc(dst_p.aligned_byte_size)
    try:
        nn.write(src, src_p, x)
        execs = []

        def rpc():
            task = nn.quantize(soc, nn.Tensor(src, src_p), nn.Tensor(dst, dst_p))
            task.wait(10000)
            execs.append(task.exec_us / 1e3)

        rpc()
        in_process()
        expect = ref.quantize(x, q, np.int8)
        if not (np.array_equal(nn.read(dst, dst_p), expect) and np.array_equal(dst_p.view(local), expect)):
            raise SystemExit("quantize disagrees with the reference")
        keys = ("ping_ms", "rpc_ms", "numpy_ms") + (("floor_ping_ms", "floor_rpc_ms", "floor_exec_ms") if floor else ())
        out: dict = {k: [] for k in keys}
        ping = lambda: soc.rpc(opids.PING).wait(5000)   # noqa: E731
        out["ping_b2b_ms"] = timed(ping, rounds * 20)     # back to back: the no-op at its best
        for _ in range(rounds * 4):      # interleaved, so background load hits all alike
            out["ping_ms"] += [_ms(ping), _ms(ping)]
            out["rpc_ms"].append(_ms(rpc))
            out["numpy_ms"].append(_ms(in_process))
            if floor:
                out["floor_ping_ms"] += [floor.call("") / 1e3 for _ in range(2)]
                out["floor_rpc_ms"].append(floor.call("quantize") / 1e3)
                out["floor_exec_ms"].append(floor.last_exec_us / 1e3)
        out["ping_b2b_ms"] += timed(ping, rounds * 20)
        if floor:
            out["floor_ping_b2b_ms"] = [floor.call("") / 1e3 for _ in range(rounds * 40)]
        out["exec_ms"] = statistics.median(execs)
        return out
    finally:
        src.free()
        dst.free()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    ap.add_argument("--batch", type=int, default=4, help="Yolov3 batch (split over the two cores)")
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    ap.add_argument("--json", metavar="FILE", help="write every figure to FILE (schema vdsp-bench/1)")
    ap.add_argument("--fail-on-miss", action="store_true",
                    help="the CI mode: exit 3 when a target is missed (else 0 once the run completes)")
    ap.add_argument("--no-floor", action="store_true", help="skip the raw-pyzmq floor (see floor.py)")
    ap.add_argument("--keep-cpus-awake", action="store_true",
                    help="one SCHED_IDLE spinner per CPU while measuring (see vdsp_sim/benchmarks/awake.py)")
    args = clihelp.finish(ap).parse_args(argv)
    keep_heap()     # the in-process figures at their best, as the firmware's (dsp_side/heap.py)
    rounds = 3 if args.quick else args.rounds
    from arm_side import Soc
    with private_soc(mode=settings.current().raw("VDSP_RPC_MODE")), Soc() as soc, contextlib.ExitStack() as stack:
        floor = None if args.no_floor else stack.enter_context(Floor("vdsp_sim.benchmarks.bench_nn:floor_kernels"))
        stack.enter_context(cpus_kept_awake(args.keep_cpus_awake))
        print(f"yolo: {rounds} rounds, batch {args.batch} ...", file=sys.stderr)
        y = bench_yolo(soc, rounds, args.batch)
        print("quantize ...", file=sys.stderr)
        qz = bench_quantize(soc, rounds, floor)
    med = statistics.median
    f2, f1, ch = med(y["fused_2core_ms"]), med(y["fused_1core_ms"]), med(y["chain_ms"])
    speedup = ch / f2
    overhead = med(qz["rpc_ms"]) - med(qz["numpy_ms"])
    ratio = overhead / med(qz["ping_b2b_ms"])           # the target, against the no-op at its best
    ratio_inter = overhead / med(qz["ping_ms"])
    rep = Report("nn", args)
    rep.note(f"{rounds} interleaved rounds; Yolov3DetectionOutput on a 416x416, 80-class, 3-map input, batch "
             f"{args.batch}: {y['boxes']} boxes; quantize of a 1x64x56x56 float32 map to int8 (W padded to 64)")
    rep.note(f"chain step DSP exec ms: {y['chain_step_exec_ms']}")
    rep.table("Yolov3 post-processing (p50 ms)", ["configuration", "p50 ms"], [
        ["fused, the batch split over vdsp0 + vdsp1 (2 RPCs)", f2],
        ["fused, 1 core (1 RPC)", f1],
        ["chain decode -> filter -> NMS -> top-k, 4 RPCs, 1 core", ch]])
    qrows = [["quantize by RPC", med(qz["rpc_ms"])], ["  of which DSP exec", qz["exec_ms"]],
             ["quantize by numpy in this process", med(qz["numpy_ms"])],
             ["PING back to back", med(qz["ping_b2b_ms"])], ["PING interleaved with the above", med(qz["ping_ms"])]]
    info = [["chain / fused 1 core", ch / f1], ["(RPC - numpy) / PING interleaved", ratio_inter]]
    if "floor_rpc_ms" in qz:   # the same topology in raw pyzmq, the same function in the worker (floor.py)
        fover = med(qz["floor_rpc_ms"]) - med(qz["numpy_ms"])
        qrows += [["floor: quantize RPC", med(qz["floor_rpc_ms"])],
                  ["  of which worker exec", med(qz["floor_exec_ms"])],
                  ["floor: no-op back to back", med(qz["floor_ping_b2b_ms"])],
                  ["floor: no-op interleaved", med(qz["floor_ping_ms"])]]
        info += [["floor: (RPC - numpy) / no-op back to back", fover / med(qz["floor_ping_b2b_ms"])],
                 ["floor: (RPC - numpy) / no-op interleaved", fover / med(qz["floor_ping_ms"])]]
    rep.table("quantize 1x64x56x56 (p50 ms)", ["measure", "p50 ms"], qrows)
    rep.table("(info) ratios without a target", ["ratio", "value"], info)
    rep.target("Yolov3 chain / fused on 2 cores", speedup, ">=", 3)
    rep.target("quantize (RPC - numpy) / PING back to back", ratio, "<=", 1.3)
    return rep.finish(args.json, args.fail_on_miss, details={"yolo": y, "quantize": qz})


if __name__ == "__main__":
    from vdsp_board.processes import proc
    proc.exit_on_sigterm()      # a SIGTERM (timeout, kill) still stops the SoCs it started
    sys.exit(main())

#!/usr/bin/env python3
"""Model runtime benchmark: one inference of ``mobilenetv1_224x224_nv12`` with its non-BPU
layers (Dequantize, the plugin's Softmax) dispatched to vdsp0/vdsp1 by RPC vs run on the ARM
side, and the share of the DSP-dispatched inference spent in RPC — from one run.

Each round runs one inference on each runtime (HB_DNN_ENABLE_DSP=1 and =0), interleaved, on the
same NV12 input; the outputs are checked to agree before timing. Per inference: latency (infer
to done, as the task handle measures it), per layer wall time, and for the DSP layers the RPC
time (submit to reply) and the DSP's own compute time (``exec_us``). Medians over the rounds.

Usage::

    .venv/bin/vdsp bench dnn [--rounds N] [--quick] [--json FILE]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

from vdsp_sim.benchmarks.report import Report
from vdsp_board.config import clihelp


def p50(values) -> float:
    return statistics.median(values) if values else 0.0


def run(soc, rounds: int, model_dir: Path) -> dict:
    from arm_side import CLEAN, INVALIDATE, dnn, nn
    from vdsp_sim import dnn_models
    path, _ = dnn_models.ensure(dnn_models.MOBILENET, model_dir)
    img = np.random.default_rng(0).integers(0, 256, (336, 224), dtype=np.uint8)
    sides = {}
    for dsp in (True, False):
        rt = dnn.Runtime(soc, enable_dsp=dsp, log_level=0, plugin_path=dnn.STOCK_PLUGIN_DIR, environ={})
        rt.register_layer_creator("Softmax", rt.plugin_creators()["Softmax"])
        pack = rt.initialize_from_files([path])
        model = rt.model_handle(pack, dnn_models.MOBILENET)
        ip, op = rt.input_tensor_properties(model, 0), rt.output_tensor_properties(model, 0)
        src, dst = soc.mem.alloc_cached(ip.aligned_byte_size), soc.mem.alloc_cached(op.aligned_byte_size)
        ip.planes(src.array())[...] = img
        src.flush(CLEAN)
        sides["dsp" if dsp else "arm"] = (rt, pack, model, [nn.Tensor(src, ip)], [nn.Tensor(dst, op)])

    def once(side: str):
        rt, _, model, ins, outs = sides[side]
        task = rt.infer(outs, ins, model)
        rt.wait_task_done(task, 0)
        result = (task.latency_us, list(task.layers))
        rt.release_task(task)
        outs[0].mem.flush(INVALIDATE)
        return result

    for _ in range(3):                      # warm-up (sessions, first allocations)
        once("dsp"), once("arm")
    a, b = (nn.read(sides[s][4][0].mem, sides[s][4][0].props, invalidate=False) for s in ("dsp", "arm"))
    if not np.allclose(a, b, rtol=1e-6, atol=1e-9):
        raise SystemExit("bench dnn: DSP dispatch and the ARM side disagree")
    samples: dict[str, list] = {"dsp": [], "arm": []}
    for _ in range(rounds):
        for side in ("dsp", "arm"):
            samples[side].append(once(side))
    out = {}
    for side, runs in samples.items():
        lat = [r[0] for r in runs]
        layers: dict[str, dict] = {}
        for _, lrs in runs:
            for lr in lrs:
                e = layers.setdefault(lr.name, {"type": lr.type, "wall": [], "rpc": [], "exec": [], "where": set()})
                e["wall"].append(lr.wall_us)
                e["rpc"].append(lr.rpc_us)
                e["exec"].append(lr.exec_us)
                e["where"].add(lr.where)
        rpc_share = [sum(lr.rpc_us for lr in lrs) / lat_us for lat_us, lrs in runs]
        exec_share = [sum(lr.exec_us for lr in lrs) / lat_us for lat_us, lrs in runs]
        out[side] = {"latency_p50_us": p50(lat), "latency_p90_us": float(np.percentile(lat, 90)),
                     "rpc_share_p50": p50(rpc_share), "dsp_exec_share_p50": p50(exec_share),
                     "layers": {n: {"type": e["type"], "where": sorted(e["where"]), "wall_p50_us": p50(e["wall"]),
                                    "rpc_p50_us": p50(e["rpc"]), "dsp_exec_p50_us": p50(e["exec"])}
                                for n, e in layers.items()}}
    for rt, pack, _, ins, outs in sides.values():
        rt.release(pack)
        rt.close()
        ins[0].mem.free()
        outs[0].mem.free()
    return out


def to_report(res: dict, rounds: int, args: argparse.Namespace) -> Report:
    d, a = res["dsp"], res["arm"]
    rep = Report("dnn", args)
    rep.note(f"mobilenetv1_224x224_nv12, {rounds} rounds interleaved; p50 per inference; DSP dispatch = "
             "HB_DNN_ENABLE_DSP=1, ARM side = 0")
    rows = [["latency (infer -> done)", d["latency_p50_us"] / 1e3, a["latency_p50_us"] / 1e3]]
    for name in d["layers"]:
        ld, la = d["layers"][name], a["layers"][name]
        rows.append([f"{name} ({ld['type']}) on {'/'.join(ld['where'])} | {'/'.join(la['where'])}",
                     ld["wall_p50_us"] / 1e3, la["wall_p50_us"] / 1e3])
    rep.table("one inference and its layers (p50 ms)", ["measure", "DSP dispatch ms", "ARM side ms"], rows)
    rep.table("layers dispatched to the DSP (p50 ms)", ["layer", "RPC ms", "of which DSP compute ms"],
              [[name, ld["rpc_p50_us"] / 1e3, ld["dsp_exec_p50_us"] / 1e3]
               for name, ld in d["layers"].items() if ld["rpc_p50_us"]])
    rep.table("(info) shares and ratios", ["measure", "value"], [
        ["DSP dispatch / ARM side latency", d["latency_p50_us"] / a["latency_p50_us"]],
        ["DSP dispatch - ARM side latency, ms", (d["latency_p50_us"] - a["latency_p50_us"]) / 1e3],
        ["share of the DSP-dispatched inference spent in RPC, %", d["rpc_share_p50"] * 100],
        ["  of which DSP compute, % (transport and wake-ups the rest)", d["dsp_exec_share_p50"] * 100]])
    return rep


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="vdsp bench dnn", description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=50, help="interleaved rounds (one inference each way)")
    ap.add_argument("--quick", action="store_true", help="10 rounds")
    ap.add_argument("--json", metavar="FILE", help="write every figure to FILE (schema vdsp-bench/1)")
    args = clihelp.finish(ap).parse_args(argv)
    rounds = 10 if args.quick else args.rounds
    if not 1 <= rounds <= 100000:
        ap.error("--rounds must be in 1..100000")
    from arm_side import Soc
    from vdsp_sim.soc.private_soc import private_soc
    with private_soc() as private:
        print(f"dnn: {rounds} rounds ...", file=sys.stderr)
        with Soc() as soc:
            assert private.rt is not None       # a started SoC has its runtime dir
            res = run(soc, rounds, private.rt / "models")
    return to_report(res, rounds, args).finish(args.json, details={"rounds": rounds, **res})


if __name__ == "__main__":
    from vdsp_board.processes import proc
    proc.exit_on_sigterm()      # a SIGTERM (timeout, kill) still stops the SoCs it started
    raise SystemExit(main())

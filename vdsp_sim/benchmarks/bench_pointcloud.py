"""Point-cloud preprocessing benchmark: the DSP path (stage 1 on both DSP cores, ARM
voxelization, stage 2 on the DSP) vs the J5 board's published figures and vs the CPU
reference, in one run.

    vdsp bench pointcloud [--rounds 20] [--mode relay|direct] [--json FILE] [--fail-on-miss]

Starts its own SoC in a temporary runtime dir (private DDR directory), generates the
deterministic synthetic clouds (CenterPoint 300 000 x 5, PointPillars 100 000 x 4), runs the
DSP path ``--rounds`` times after a warm-up and reports the medians; runs the CPU reference
(per-point loops) ``--ref-rounds`` times and checks it equals the DSP output. Beside the
board's published figures it prints the firmware's board-time estimate of one frame's DSP
stages (docs/dsp_kernels.md, "Board time") and the ratio estimate / board.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np  # noqa: E402

from vdsp_sim.benchmarks.report import Report
from vdsp_board.config import clihelp

# J5 board figures (vendor sample log and AI Benchmark table), milliseconds
J5 = {
    "centerpoint": {"stage1": 5.604, "voxel": 8.88, "stage2": 1.982, "total": 16.467, "cpu_ref": 119.374},
    "pointpillars": {"stage1": 2.364, "voxel": 2.47, "stage2": 2.207, "total": 7.042},
}
TARGET_MS = {"centerpoint": 10.0, "pointpillars": 5.0}
# the sample's per-frame CenterPoint table (§10.4.5.6, AI Benchmark, averages): plan 2 is the one its
# DSP stages implement (features quantised before voxelization), plan 1 quantises after it
J5_FRAME_MS = {"cpu_ref": 119.374, "plan1": 23.251, "plan2": 16.126}


def bench_one(soc, name: str, rounds: int, ref_rounds: int) -> dict:
    from arm_side.pointcloud import reference, synthetic
    from arm_side.pointcloud.params import TYPICAL_POINTS, preset
    from arm_side.pointcloud.pipeline import DspPreprocessor
    p = preset(name)
    pts = synthetic.generate(TYPICAL_POINTS[name], p.dim)
    runs = []
    with DspPreprocessor(soc, p, len(pts)) as pre:
        pre.load(pts)
        for _ in range(3):
            pre.run(copy=False)                               # warm-up
        for _ in range(rounds):
            runs.append(pre.run(copy=False))
        last = pre.run()
    ref_ms = []
    for _ in range(ref_rounds):
        t0 = time.perf_counter()
        coords, feats = reference.preprocess(pts, p)
        ref_ms.append((time.perf_counter() - t0) * 1e3)
    same = bool(np.array_equal(coords, last.coords) and np.array_equal(feats, last.features))
    med = {k: statistics.median(getattr(r, f"{k}_ms") for r in runs)
           for k in ("stage1", "voxel", "stage2", "total")}
    return {"points": len(pts), "valid": last.valid_points, "pillars": last.num_pillars, "dsp_ms": med,
            "dsp_total_min_ms": min(r.total_ms for r in runs), "ref_ms": statistics.median(ref_ms),
            "bit_exact": same, "target_ms": TARGET_MS[name], "board": board_estimate(name, last)}


def board_estimate(name: str, last) -> dict:
    """The firmware's board-time estimates of the DSP stages of one frame (ms; None: a stage's
    task had none) beside the board's published figures, with their ratios (estimate / board)."""
    est = {k: (us / 1e3 if us is not None else None) for k, us in last.board_us.items()}
    j5 = J5[name]
    out: dict = {"stages_ms": est, "models": last.board_models, "vs": {}}
    known = [v for v in est.values() if v is not None]
    dsp = sum(known) if est and len(known) == len(est) else None
    pairs = [("stage1", est.get("stage1"), j5["stage1"]), ("stage2", est.get("stage2"), j5["stage2"]),
             ("dsp_stages", dsp, j5["stage1"] + j5["stage2"])]
    if name == "centerpoint" and dsp is not None:
        # a frame: the estimated DSP stages plus the board's own ARM voxelization time (not estimated)
        frame = dsp + j5["voxel"]
        pairs += [("frame_vs_plan2", frame, J5_FRAME_MS["plan2"]), ("frame_vs_plan1", frame, J5_FRAME_MS["plan1"]),
                  ("frame_vs_cpu_ref", frame, J5_FRAME_MS["cpu_ref"])]
    for key, ours, board in pairs:
        out["vs"][key] = {"estimate_ms": ours, "board_ms": board,
                          "ratio": ours / board if ours is not None and board else None}
    return out


def add_board_to_report(rep: Report, name: str, r: dict) -> None:
    """The board-time table: estimate, published figure, ratio."""
    b = r["board"]
    labels = {"stage1": "DSP stage 1 (its tasks summed)", "stage2": "DSP stage 2",
              "dsp_stages": "DSP stages 1 + 2", "frame_vs_plan2": "frame (DSP stages + board's voxel 8.88) vs plan 2",
              "frame_vs_plan1": "the same frame vs plan 1", "frame_vs_cpu_ref": "the same frame vs the CPU reference"}
    rows = [[labels[k], v["estimate_ms"], v["board_ms"], v["ratio"]] for k, v in b["vs"].items()]
    models = ", ".join(f"{k}: {m}" for k, m in b["models"].items())
    rep.table(f"{name}: board-time estimate of one frame ({models}; docs/dsp_kernels.md, Board time) beside the "
              "J5 board's published figures (ms)", ["what", "estimate ms", "J5 ms", "estimate / J5"], rows)


def add_to_report(rep: Report, name: str, r: dict) -> None:
    j5 = J5[name]
    total = r["dsp_ms"]["total"]
    rows = [[label, r["dsp_ms"][k], j5[k], j5[k] / r["dsp_ms"][k]]
            for k, label in (("stage1", "DSP stage 1"), ("voxel", "ARM voxelization"), ("stage2", "DSP stage 2"),
                             ("total", "total (median)"))]
    rows += [["total (best round)", r["dsp_total_min_ms"], None, None],
             ["CPU reference (per-point loops)", r["ref_ms"], j5.get("cpu_ref"), None]]
    rep.table(f"{name}: {r['points']} points, {r['valid']} in range, {r['pillars']} pillars; bit-exact with the CPU "
              f"reference: {'yes' if r['bit_exact'] else 'NO'} (ms)", ["stage", "ours ms", "J5 ms", "J5 / ours"], rows)
    rep.target(f"{name} total ms", total, "<=", r["target_ms"],
               f"DSP path {r['ref_ms'] / total:.1f}x the CPU reference" + ("" if r["bit_exact"] else "; NOT bit-exact"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vdsp bench pointcloud", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20, help="rounds of the DSP path (after a warm-up)")
    ap.add_argument("--ref-rounds", type=int, default=1, help="rounds of the CPU reference (slow per-point loops)")
    ap.add_argument("--mode", choices=["relay", "direct"], default="relay", help="how the SDK reaches the cores")
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE (schema vdsp-bench/1)")
    ap.add_argument("--fail-on-miss", action="store_true",
                    help="the CI mode: exit 3 when a total misses its target (else 0 once the run completes; "
                         "1 if the DSP output is not bit-exact)")
    args = clihelp.finish(ap).parse_args(argv)
    from arm_side import Soc
    from vdsp_sim.soc.private_soc import private_soc
    results = {}
    with private_soc(ready_timeout_s=30), Soc(mode=args.mode, autostart_relay=False) as soc:
        for name in ("centerpoint", "pointpillars"):
            print(f"benchmarking {name} ...", file=sys.stderr)
            results[name] = bench_one(soc, name, args.rounds, args.ref_rounds)
    rep = Report("pointcloud", args)
    rep.note(f"{args.rounds} rounds after a warm-up, {args.mode} mode; CPU reference {args.ref_rounds} round(s); "
             "medians; J5 = the board's published figures")
    for name, r in results.items():
        add_to_report(rep, name, r)
        add_board_to_report(rep, name, r)
    status = rep.finish(args.json, args.fail_on_miss, details=results)
    return status if all(r["bit_exact"] for r in results.values()) else 1    # not bit-exact: an error


if __name__ == "__main__":
    from vdsp_board.processes import proc
    proc.exit_on_sigterm()      # a SIGTERM (timeout, kill) still stops the SoCs it started
    sys.exit(main())

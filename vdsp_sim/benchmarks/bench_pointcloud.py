"""Point-cloud preprocessing benchmark: the DSP path (stage 1 on both DSP cores, ARM
voxelization, stage 2 on the DSP) vs the J5 board's published figures and vs the CPU
reference, in one run.

    .venv/bin/python benchmarks/bench_pointcloud.py [--rounds 20] [--mode relay|direct] [--json FILE]

Starts its own SoC in a temporary runtime dir (private DDR directory), generates the
deterministic synthetic clouds (CenterPoint 300 000 x 5, PointPillars 100 000 x 4), runs the
DSP path ``--rounds`` times after a warm-up and reports the medians; runs the CPU reference
(per-point loops) ``--ref-rounds`` times and checks it equals the DSP output.
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

import numpy as np  # noqa: E402

# J5 board figures (vendor sample log and AI Benchmark table), milliseconds
J5 = {
    "centerpoint": {"stage1": 5.604, "voxel": 8.88, "stage2": 1.982, "total": 16.467, "cpu_ref": 119.374},
    "pointpillars": {"stage1": 2.364, "voxel": 2.47, "stage2": 2.207, "total": 7.042},
}
TARGET_MS = {"centerpoint": 10.0, "pointpillars": 5.0}


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
            "bit_exact": same, "target_ms": TARGET_MS[name]}


def report(name: str, r: dict) -> None:
    j5 = J5[name]
    print(f"\n{name}: {r['points']} points, {r['valid']} in range, {r['pillars']} pillars; bit-exact: {r['bit_exact']}")
    print(f"  {'stage':10s} {'ours ms':>9s} {'J5 ms':>8s} {'J5/ours':>8s}")
    for k, label in (("stage1", "dsp 1"), ("voxel", "cpu"), ("stage2", "dsp 2"), ("total", "total")):
        print(f"  {label:10s} {r['dsp_ms'][k]:9.3f} {j5[k]:8.3f} {j5[k] / r['dsp_ms'][k]:8.2f}")
    total = r["dsp_ms"]["total"]
    print(f"  target total <= {r['target_ms']} ms: {'PASS' if total <= r['target_ms'] else 'MISS'} "
          f"(median {total:.3f} ms, best {r['dsp_total_min_ms']:.3f} ms)")
    print(f"  CPU reference (per-point loops): {r['ref_ms']:.1f} ms; DSP path speed-up {r['ref_ms'] / total:.1f}x"
          + (f"; J5 CPU reference {j5['cpu_ref']} ms" if "cpu_ref" in j5 else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--ref-rounds", type=int, default=1)
    ap.add_argument("--mode", choices=["relay", "direct"], default="relay")
    ap.add_argument("--json", help="write the figures as JSON")
    args = ap.parse_args(argv)
    from vdsp_sim.supervisor import Supervisor
    rt = Path(tempfile.mkdtemp(prefix="vpb", dir="/tmp"))
    shm = tempfile.mkdtemp(prefix="vpb-shm-", dir="/dev/shm")
    os.environ.update(VDSP_RUNTIME_DIR=str(rt), VDSP_SHM_DIR=shm)
    for key in ("VDSP_RELAY_ENDPOINT", "VDSP_CORE_ENDPOINTS", "VDSP_STRICT_CACHE"):
        os.environ.pop(key, None)
    sup = Supervisor(rt, log_dir=rt / "log")
    results = {}
    try:
        sup.start()
        sup.wait_ready(30)
        from arm_side import Soc
        with Soc(mode=args.mode, autostart_relay=False) as soc:
            for name in ("centerpoint", "pointpillars"):
                print(f"benchmarking {name} ...", file=sys.stderr)
                results[name] = bench_one(soc, name, args.rounds, args.ref_rounds)
                report(name, results[name])
    finally:
        sup.stop()
        shutil.rmtree(rt, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if all(r["bit_exact"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

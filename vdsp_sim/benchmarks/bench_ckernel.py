"""C kernels on the host: the stock point-cloud stages as C kernels vs their Python references
(stage 1: the numba kernel; stage 2: OpenCV's transpose and numpy's zeros), side by side in one
run, and the emulation's cost per IVP intrinsic.

    vdsp bench ckernel [--rounds 15] [--calls 2000000] [--json FILE] [--fail-on-miss]

In this process, no SoC: the stock image's C kernels (compiled once, as ``vdsp firmware build``
does) and the Python references run each stage of the pillar preprocessing on the stock
synthetic clouds (CenterPoint 300 000 x 5, PointPillars 100 000 x 4) on the same input buffers,
``--rounds`` times after a warm-up, their rounds interleaved (each timed on its second call in
a row), medians of the thread's CPU time, and their outputs are compared byte for byte. The
target (issue 41, "How fast"): a C stage no slower than its reference (C / reference <= 1).
Then ``ivp_bench.c``, compiled as the kernels are (for the same x86-64 level), calls each
intrinsic the kernels use ``--calls`` times and prints ns per call (the loop itself, measured
alone, subtracted).

The C kernels run as a core runs them: built for the widest x86-64 level this CPU runs
(``dsp_side.ckernel.LEVELS``), or for the one ``VDSP_KERNEL_LEVEL`` names
(``VDSP_KERNEL_LEVEL=x86-64-v3 NUMBA_CPU_NAME=haswell vdsp bench ckernel``: the figures of an
AVX2 host, numba's reference compiled for such a CPU too; without NUMBA_CPU_NAME it is compiled
for this one, and the run says so).
"""
from __future__ import annotations

import argparse
import functools
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from vdsp_board.config import clihelp
from vdsp_sim.benchmarks.report import Report

C_SOURCE = Path(__file__).with_name("ivp_bench.c")
REFERENCE = {1: "numba", 2: "OpenCV"}      # what each stage's Python reference runs (dsp_side/operators/pointcloud.py)


def _medians_ms(fns: dict, rounds: int) -> dict:
    """Median CPU time of this thread per function of ``fns`` (name -> fn), their rounds
    interleaved (reference, C, reference, C, ...: a change of the host's load meanwhile falls on
    both alike), each after a warm-up (numba's first call, page faults). In a round each function
    is called twice and its second call timed: as a core runs its kernel, task after task (timed
    right after the other implementation, a call pays for the cache that one left: numba's and
    OpenCV's outputs dirty in it, which the C kernels' non-temporal drains do not leave; the
    benchmarks README has both figures). Thread CPU time: both kernels run in this thread,
    single-threaded, and a host whose CPUs other work shares does not inflate it as it does
    wall-clock time."""
    for fn in fns.values():
        fn()
    times: dict = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()
            t0 = time.thread_time()
            fn()
            times[name].append((time.thread_time() - t0) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def bench_stages(name: str, rounds: int) -> dict:
    """Stage 1 and stage 2 of preset ``name``, reference and C, on the same inputs: ms and bit-exactness."""
    from arm_side.pointcloud import synthetic
    from arm_side.pointcloud.params import TYPICAL_POINTS, preset
    from arm_side.pointcloud.voxelize import Voxelizer
    from vdsp_sim import pointcloud_inprocess as inprocess
    p = preset(name)
    pts = synthetic.generate(TYPICAL_POINTS[name], p.dim)
    n, dim = len(pts), p.dim
    src = np.ascontiguousarray(pts, np.float32).view(np.uint8).reshape(-1)
    src.flags.writeable = False                            # as the firmware passes its inputs
    out: dict = {"points": n}
    stage1: dict = {}
    runs = {}
    for impl in ("python", "c"):
        encode, _ = inprocess.stages(impl)
        bufs = [np.zeros(n * 4, np.uint8), np.zeros(n * 4, np.uint8)] + ([np.zeros(n, np.uint8)] if dim == 5 else [])
        runs[impl] = functools.partial(encode, [src], bufs, num_points=n, **p.encode_params())
        stage1[impl] = bufs
    out.update({f"stage1_{impl}_ms": ms for impl, ms in _medians_ms(runs, rounds).items()})
    cells, xyzr = stage1["python"][0].view(np.int32), stage1["python"][1].view(np.int32)
    t = stage1["python"][2].view(np.int8) if dim == 5 else None
    cap = p.max_pillars * p.max_points
    coords, vx, vt = np.zeros((p.max_pillars, 4), np.int32), np.zeros(cap, np.int32), np.zeros(cap, np.int8)
    used = Voxelizer(p).run(cells, xyzr, t, coords, vx, vt if dim == 5 else None)
    ins = [vx.view(np.uint8)] + ([vt.view(np.uint8)] if dim == 5 else [])
    stage2, runs = {}, {}
    for impl in ("python", "c"):
        _, transpose = inprocess.stages(impl)
        feats = np.zeros(int(np.prod(p.feature_shape)), np.uint8)
        runs[impl] = functools.partial(transpose, ins, [feats], **p.transpose_params(used))
        stage2[impl] = feats
    out.update({f"stage2_{impl}_ms": ms for impl, ms in _medians_ms(runs, rounds).items()})
    out["pillars"] = used
    out["bit_exact"] = bool(all(a.tobytes() == b.tobytes() for a, b in zip(stage1["python"], stage1["c"]))
                            and stage2["python"].tobytes() == stage2["c"].tobytes())
    return out


def intrinsic_costs(calls: int, level: str | None = None) -> list[tuple[str, float]]:
    """(intrinsic, ns per call) from ivp_bench.c, compiled as the kernels are for the x86-64
    ``level`` (None: the compiler's own target; the loop's own cost subtracted). Raises
    RuntimeError when it does not compile or run."""
    from dsp_side import ckernel
    from dsp_side.ckernel import build
    cc = shlex.split(os.environ.get("CC") or "cc") + list(ckernel.LEVELS[level][0] if level else ())
    with tempfile.TemporaryDirectory(prefix="vdsp-ivp-bench-") as tmp:
        exe = Path(tmp) / "ivp_bench"
        res = subprocess.run([*cc, "-std=c11", "-O2", *build.WARNINGS, ckernel.cflags(), str(C_SOURCE),
                              str(ckernel.RUNTIME), "-o", str(exe)], capture_output=True, text=True, timeout=300)
        if res.returncode:
            raise RuntimeError(f"cannot compile {C_SOURCE.name}: {res.stderr.strip()}")
        run = subprocess.run([str(exe), str(calls)], capture_output=True, text=True, timeout=600)
        if run.returncode:
            raise RuntimeError(f"{C_SOURCE.name} failed: {run.stderr.strip()}")
    rows = [(name, float(ns)) for name, ns in (line.rsplit(" ", 1) for line in run.stdout.splitlines())]
    loop = dict(rows).get("(loop)", 0.0)
    return [(name, max(ns - loop, 0.0)) for name, ns in rows if name != "(loop)"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vdsp bench ckernel", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15, help="rounds of each stage (after a warm-up)")
    ap.add_argument("--calls", type=int, default=2_000_000, help="calls of each intrinsic")
    ap.add_argument("--json", metavar="FILE", help="write the figures to FILE (schema vdsp-bench/1)")
    ap.add_argument("--fail-on-miss", action="store_true",
                    help="the CI mode: exit 3 when a C stage is slower than its reference")
    args = clihelp.finish(ap).parse_args(argv)
    if args.rounds < 1 or args.calls < 1:
        ap.error("--rounds and --calls must be >= 1")
    from dsp_side import ckernel
    try:
        level = ckernel.host_level() if ckernel.x86_64() else None
    except ValueError as exc:
        ap.error(str(exc))
    results = {}
    for name in ("centerpoint", "pointpillars"):
        print(f"benchmarking {name} ...", file=sys.stderr)
        results[name] = bench_stages(name, args.rounds)
    costs = intrinsic_costs(args.calls, level)
    rep = Report("ckernel", args)
    rep.note(f"in-process, {args.rounds} rounds after a warm-up, reference and C interleaved, each timed on its "
             "second call in a row (as a core runs task after task), medians of the thread's CPU time; the same "
             "inputs for both kernels")
    if level is not None:
        rep.note(f"the C kernels built for {level} (this CPU runs {', '.join(ckernel.cpu_levels())}; "
                 "VDSP_KERNEL_LEVEL names a narrower one)")
        if level != ckernel.cpu_levels()[-1]:
            target = os.environ.get("NUMBA_CPU_NAME")
            rep.note(f"numba compiles stage 1's reference for {target!r}" if target else
                     "numba compiles stage 1's reference for this CPU, not for that level: as on a CPU of that "
                     "level, NUMBA_CPU_NAME names one (x86-64-v3: NUMBA_CPU_NAME=haswell)")
    for name, r in results.items():
        rows = [[f"stage {s}", REFERENCE[s], r[f"stage{s}_python_ms"], r[f"stage{s}_c_ms"],
                 r[f"stage{s}_c_ms"] / r[f"stage{s}_python_ms"]] for s in (1, 2)]
        rep.table(f"{name}: {r['points']} points, {r['pillars']} pillars; C bit-exact with the references: "
                  f"{'yes' if r['bit_exact'] else 'NO'}", ["stage", "reference", "ref ms", "C ms", "C / ref"], rows)
        for s in (1, 2):
            rep.target(f"{name} stage {s} C / {REFERENCE[s]}", r[f"stage{s}_c_ms"] / r[f"stage{s}_python_ms"], "<=", 1.0,
                       "" if r["bit_exact"] else "NOT bit-exact")
    rep.table(f"the emulation's cost per IVP intrinsic ({args.calls} calls each, -O2, loop subtracted)",
              ["intrinsic", "ns per call"], [[name, ns] for name, ns in costs])
    status = rep.finish(args.json, args.fail_on_miss,
                        details={"stages": results, "ns_per_call": dict(costs), "level": level})
    return status if all(r["bit_exact"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

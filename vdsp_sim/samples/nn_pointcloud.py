"""``vdsp sample nn centerpoint|pointpillar [--points FILE.bin] [--impl dsp|cpu]``: pillar
preprocessing of a LiDAR cloud, like the J5 centerpoint/pointpillar preprocess samples.

``--impl dsp`` (default) runs the DSP path (stage 1 on both DSP cores, voxelization on the
ARM, stage 2 on the DSP) with its stage times, then the CPU reference, dumps both to
``OUTPUT/<name>_preprocess_{coords,features}_{dsp,ref}.txt`` and checks they are identical.
``--impl cpu`` runs only the CPU reference (and checks it against earlier DSP dumps if any).
Without ``--points`` a deterministic synthetic cloud of the preset's typical size is used.
"""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from arm_side import Soc
from arm_side.pointcloud import binfile, dump, reference, synthetic
from arm_side.pointcloud.params import TYPICAL_POINTS, preset
from arm_side.pointcloud.pipeline import DspPreprocessor
from vdsp_sim.samples.common import local_soc, setup_logging
from protocol.errors import VdspError
from vdsp_sim.board import proc

log = logging.getLogger("vdsp.sample.pointcloud")


def _load(args, params, key):
    if args.points:
        log.info("fetch binary from %s", args.points)
        return binfile.read_bin(args.points, params.dim)
    log.info("synthetic %d-dim cloud (seed %d)", params.dim, args.seed)
    return synthetic.generate(args.num_points or TYPICAL_POINTS[key], params.dim, seed=args.seed)


def _dump(out: Path, stem: str, tag: str, coords, features) -> None:
    for kind, values in (("coords", coords), ("features", features)):
        path = out / f"{stem}_{kind}_{tag}.txt"
        log.info("dump %s to %s", kind, path)
        dump.dump_values(values, path)


def _run_dsp(points, params) -> tuple:
    with local_soc(), Soc() as soc, DspPreprocessor(soc, params, len(points)) as pre:
        pre.load(points)
        pre.run(copy=False)                       # warm-up: first-call costs of both processes
        log.info("stage 1 rpc begin")
        r = pre.run()
        log.info("dsp 1 time %.3fms", r.stage1_ms)
        log.info("gen voxel data begin")
        log.info("gen voxel data finish: %d valid points, %d pillars", r.valid_points, r.num_pillars)
        log.info("cpu time %.2f ms", r.voxel_ms)
        log.info("stage 2 rpc begin")
        log.info("stage 2 rpc finish")
        log.info("dsp 2 time %.3f ms", r.stage2_ms)
        log.info("total time %.3f ms", r.total_ms)
        return r.coords, r.features


def _check(out: Path, stem: str) -> bool | None:
    pairs = [(out / f"{stem}_{k}_dsp.txt", out / f"{stem}_{k}_ref.txt") for k in ("coords", "features")]
    if not all(a.exists() and b.exists() for a, b in pairs):
        return None
    same = all(dump.same_dump(a, b) for a, b in pairs)
    log.info("consistency check %s: dsp and ref dumps are %s", "passed" if same else "FAILED",
             "identical" if same else "different")
    return same


def main(argv: list[str] | None = None) -> int:
    argv = list(argv or ["centerpoint"])
    ap = argparse.ArgumentParser(prog=f"vdsp sample nn {argv[0]}", description=__doc__)
    ap.add_argument("--points", help=".bin file of float32 points (N x 4 KITTI, N x 5 nuScenes)")
    ap.add_argument("--impl", choices=["dsp", "cpu"], default="dsp")
    ap.add_argument("--output", default="output", help="dump directory (default: output)")
    ap.add_argument("--num-points", type=int, default=0, help="synthetic cloud size (default: preset's)")
    ap.add_argument("--seed", type=int, default=0, help="synthetic cloud seed")
    args = ap.parse_args(argv[1:])
    setup_logging()
    proc.exit_on_sigterm()
    key = "pointpillars" if argv[0] in ("pointpillar", "pointpillars") else "centerpoint"
    stem = f"{argv[0]}_preprocess"
    out = Path(args.output)
    log.info("%s preprocess begin", argv[0])
    try:
        params = preset(key)
        points = _load(args, params, key)
        log.info("point count: %d", len(points))
        if args.impl == "dsp":
            log.info("run %s preprocess dsp begin", argv[0])
            coords, features = _run_dsp(points, params)
            _dump(out, stem, "dsp", coords, features)
            log.info("run %s preprocess dsp end", argv[0])
        log.info("run %s preprocess ref begin", argv[0])
        t0 = time.perf_counter()
        coords, features = reference.preprocess(points, params)
        log.info("ref time %.1f ms", (time.perf_counter() - t0) * 1e3)
        _dump(out, stem, "ref", coords, features)
        log.info("run %s preprocess ref end", argv[0])
    except (VdspError, OSError) as exc:
        log.error("%s preprocess failed: %s", argv[0], exc)
        return 1
    same = _check(out, stem)
    log.info("%s preprocess finish", argv[0])
    return 0 if same is not False else 1

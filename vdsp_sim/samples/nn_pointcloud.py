"""``vdsp sample nn centerpoint|pointpillar [--points FILE.bin] [--impl dsp|cpu]``: pillar
preprocessing of a LiDAR cloud, like the J5 centerpoint/pointpillar preprocess samples.

``--impl dsp`` (default) runs the DSP path (stage 1 on both DSP cores, voxelization on the
ARM, stage 2 on the DSP) with its stage times, then the CPU reference, dumps both to
``OUTPUT/<name>_preprocess_{coords,features}_{dsp,ref}.txt`` and checks they are identical.
``--impl cpu`` runs only the CPU reference; it compares with the DSP dumps in OUTPUT only when
they were made from the same cloud and preset (``<name>_preprocess_source.txt`` records the
SHA-256 of the cloud behind the DSP dumps), and otherwise says there is nothing to compare with.
Without ``--points`` a deterministic synthetic cloud of the preset's typical size is used;
``--write-points FILE`` saves the cloud used as a ``.bin`` for a later ``--points FILE``.
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import time
from pathlib import Path

from arm_side.pointcloud import binfile, dump, reference, synthetic
from arm_side.pointcloud.params import TYPICAL_POINTS, preset
from arm_side.pointcloud.pipeline import DspPreprocessor
from vdsp_sim.samples.common import sample_soc, setup_logging
from protocol.errors import VdspError
from vdsp_board.config import clihelp
from vdsp_board.processes import proc

log = logging.getLogger("vdsp.sample.pointcloud")


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    pass


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


#: the J5 sample's lines, logged as each step of the DSP path happens (DspPreprocessor.run's on_stage);
#: a line with a %-field gets the step's ms
STAGE_LINES = {
    "stage1_begin": ("stage 1 rpc begin",),
    "stage1_end": ("dsp 1 time %.3fms", "gen voxel data begin"),
    "voxel_end": ("gen voxel data finish", "cpu time %.2f ms"),
    "stage2_begin": ("stage 2 rpc begin",),
    "stage2_end": ("stage 2 rpc finish", "dsp 2 time %.3f ms"),
    "end": ("total time %.3f ms",),
}


def _log_stage(event: str, ms: float) -> None:
    for line in STAGE_LINES[event]:
        if "%" in line:
            log.info(line, ms)
        else:
            log.info(line)


def _run_dsp(points, params) -> tuple:
    with sample_soc() as soc, DspPreprocessor(soc, params, len(points)) as pre:
        pre.load(points)
        pre.run(copy=False)                       # warm-up: first-call costs of both processes
        r = pre.run(on_stage=_log_stage)
        log.info("%d valid points, %d pillars", r.valid_points, r.num_pillars)
        return r.coords, r.features


def fingerprint(points, params) -> str:
    """What the dumps were made from: the cloud's bytes and the preset."""
    h = hashlib.sha256(points.astype("<f4", copy=False).tobytes())
    h.update(repr(params).encode())
    return h.hexdigest()


def _check(out: Path, stem: str, source: str) -> bool | None:
    """Compare the DSP and reference dumps; None (and say why) when the DSP dumps in ``out``
    are missing or were made from another cloud."""
    pairs = [(out / f"{stem}_{k}_dsp.txt", out / f"{stem}_{k}_ref.txt") for k in ("coords", "features")]
    recorded = out / f"{stem}_source.txt"
    if not all(a.exists() for a, _ in pairs):
        log.info("consistency check skipped: no DSP dumps in %s (run with --impl dsp)", out)
        return None
    if not recorded.exists() or recorded.read_text().strip() != source:
        log.warning("consistency check skipped: the DSP dumps in %s are of another cloud or preset "
                    "(run with --impl dsp on this cloud first)", out)
        return None
    same = all(dump.same_dump(a, b) for a, b in pairs)
    if same:
        log.info("consistency check passed: dsp and ref dumps are identical")
    else:
        log.error("consistency check FAILED: dsp and ref dumps are different")
    return same


def main(argv: list[str] | None = None) -> int:
    argv = list(argv or ["centerpoint"])
    ap = argparse.ArgumentParser(prog=f"vdsp sample nn {argv[0]}", description=__doc__.replace("``", "'"),
                                 formatter_class=_Formatter)
    ap.add_argument("--points", metavar="FILE.bin",
                    help=".bin file of float32 points (N x 4 KITTI velodyne, N x 5 nuScenes); default: synthetic")
    ap.add_argument("--impl", choices=["dsp", "cpu"], default="dsp",
                    help="dsp: the DSP path and the CPU reference, compared; cpu: the CPU reference alone")
    ap.add_argument("--output", default="output", help="dump directory")
    ap.add_argument("--num-points", type=int, default=0, help="synthetic cloud size (0: the preset's typical size)")
    ap.add_argument("--seed", type=int, default=0, help="synthetic cloud seed")
    ap.add_argument("--write-points", metavar="FILE.bin", help="also save the cloud used as a .bin file")
    args = clihelp.finish(ap).parse_args(argv[1:])
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
        if args.write_points:
            Path(args.write_points).parent.mkdir(parents=True, exist_ok=True)   # e.g. output/cloud.bin in a fresh clone
            binfile.write_bin(args.write_points, points)
            log.info("wrote the cloud to %s", args.write_points)
        source = fingerprint(points, params)
        if args.impl == "dsp":
            log.info("run %s preprocess dsp begin", argv[0])
            coords, features = _run_dsp(points, params)
            (out / f"{stem}_source.txt").unlink(missing_ok=True)    # dumps of no known cloud until rewritten
            _dump(out, stem, "dsp", coords, features)
            (out / f"{stem}_source.txt").write_text(source + "\n")
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
    same = _check(out, stem, source)
    log.info("%s preprocess finish", argv[0])
    return 0 if same is not False else 1

"""The point-cloud preprocessing operators (0x0600-0x06ff of the NN range), declared once.

The firmware binds its kernels to these entries (``dsp_side.operators.pointcloud``);
``arm_side.pointcloud.pipeline`` calls them through the generated stubs.
"""
from __future__ import annotations

from protocol.contract.operator import OperatorEntry, catalog

_FLOAT = {"type": "float"}

ENCODE = OperatorEntry.declare(0x0600, "pointcloud_encode", {
    "dim": {"type": "int", "choices": [4, 5], "doc": "values per point"},
    "num_points": {"type": "int", "min": 0, "doc": "points in input 0"},
    **{k: dict(_FLOAT, doc=d) for k, d in (
        ("back", "x lower bound (open)"), ("front", "x upper bound (open)"),
        ("right", "y lower bound (open)"), ("left", "y upper bound (open)"),
        ("bottom", "z lower bound (open)"), ("top", "z upper bound (open)"),
        ("lower", "intensity lower bound"), ("upper", "intensity upper bound"),
        ("x_scale", "cell size along x"), ("y_scale", "cell size along y"),
        ("scale", "input quantisation scale"))},
}, inputs=1, outputs=(2, 3), doc="pillar preprocessing stage 1: packed cell index and quantised features per point",
    j5="PointPillarPreProcess")     # the J5 sample's kernel reads hbDSPPointPillarPreProcessParam

TRANSPOSE = OperatorEntry.declare(0x0601, "pointcloud_transpose", {
    "dim": {"type": "int", "choices": [4, 5]},
    "layout": {"type": "str", "choices": ["cmp", "cpm"], "doc": "cmp: [dim][M][stride]; cpm: [dim][stride][M]"},
    "max_pillars": {"type": "int", "min": 1},
    "max_points": {"type": "int", "min": 1},
    "pillar_stride": {"type": "int", "min": 1, "doc": "allocated pillar axis length (>= max_pillars)"},
    "num_pillars": {"type": "int", "min": 0, "doc": "pillars in use (<= max_pillars)"},
}, inputs=(1, 2), outputs=1, doc="pillar preprocessing stage 2: pillar-major voxels -> model layout")

ENTRIES = catalog(ENCODE, TRANSPOSE)

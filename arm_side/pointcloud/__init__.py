"""Point-cloud pillar preprocessing for CenterPoint (5-dim) and PointPillars (4-dim).

* :mod:`params` — presets and parameters (``preset("centerpoint")``);
* :mod:`reference` — the CPU reference, per-point loops (``reference.preprocess``);
* :mod:`pipeline` — the DSP path: stage 1 on the DSP, voxelization on the ARM, stage 2 on the DSP;
* :mod:`voxelize` — the ARM-side voxelization with a 2-D lookup table;
* :mod:`binfile`, :mod:`dump`, :mod:`synthetic` — ``.bin`` files, J5-style dumps, synthetic clouds.
"""
from arm_side.pointcloud.params import PRESETS, TYPICAL_POINTS, PillarParams, preset

__all__ = ["PRESETS", "TYPICAL_POINTS", "PillarParams", "preset"]

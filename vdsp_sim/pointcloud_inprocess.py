"""The DSP path's three steps called directly in one process (no SoC): for kernel tests
and for compiling the numba kernels ahead of time (``python -m vdsp_sim.pointcloud_inprocess``)."""
from __future__ import annotations

import sys

import numpy as np

from arm_side.pointcloud.params import preset
from arm_side.pointcloud.voxelize import Voxelizer
from dsp_side.operators import pointcloud as ops


def run(points: np.ndarray, p) -> tuple[np.ndarray, np.ndarray]:
    """(coords, features) of ``points`` with preset/parameters ``p``, the operators run on byte buffers."""
    n, dim = len(points), p.dim
    src = np.ascontiguousarray(points, np.float32).view(np.uint8).reshape(-1)
    cells, xyzr, t = np.zeros(n * 4, np.uint8), np.zeros(n * 4, np.uint8), np.zeros(n, np.uint8)
    ops.encode(None, [src], [cells, xyzr] + ([t] if dim == 5 else []), num_points=n, **p.encode_params())
    cap = p.max_pillars * p.max_points
    coords = np.zeros((p.max_pillars, 4), np.int32)
    vx, vt = np.full(cap, 0x55555555, np.int32), np.full(cap, 0x55, np.int8)     # garbage must not leak
    used = Voxelizer(p).run(cells.view(np.int32), xyzr.view(np.int32), t.view(np.int8) if dim == 5 else None,
                            coords, vx, vt if dim == 5 else None)
    feats = np.full(int(np.prod(p.feature_shape)), 0x77, np.uint8)
    ops.transpose(None, [vx.view(np.uint8)] + ([vt.view(np.uint8)] if dim == 5 else []), [feats],
                  **p.transpose_params(used))
    return coords.reshape(p.coords_shape), feats.view(np.int8).reshape(p.feature_shape)


def main() -> int:
    """Compile (and cache) the point-cloud kernels: run both presets once on a tiny cloud."""
    from arm_side.pointcloud import synthetic
    for name in ("centerpoint", "pointpillar"):
        p = preset(name)
        run(synthetic.generate(20000, p.dim, seed=0), p)
    print("point-cloud kernels ready", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""numba-compiled ARM voxelization: the reference's per-point rules in one pass over the points.

``AVAILABLE`` is False when numba cannot be imported or the environment sets
``VDSP_NO_NUMBA=1``; :class:`arm_side.pointcloud.voxelize.Voxelizer` then uses its numpy
code, which gives the same bytes. Machine code is cached in ``__pycache__`` next to this
file (``cache=True``).
"""
from __future__ import annotations

import numpy as np

from vdsp_sim.board.jit import AVAILABLE, njit  # noqa: F401  (AVAILABLE is read by callers)


@njit(cache=True, nogil=True, error_model="numpy")
def voxelize(cells, xyzr, t, has_t, lut, gx, gy, max_pillars, m, coords, voxel_xyzr, voxel_t, fill):
    """One pass in file order over stage 1's ``cells`` (int32, ``idy << 16 | idx``, -1 = skipped).

    ``lut`` (int32, gy*gx, scratch) maps a cell to its pillar id; a new cell takes the next id
    while fewer than ``max_pillars`` exist, afterwards pillar ``max_pillars - 1`` whose coords
    row it overwrites. A point goes to the next free slot of its pillar (the first ``m`` are
    kept). Writes ``coords`` (int32 max_pillars*4; unused rows ``fill``), the first used*m
    entries of ``voxel_xyzr`` (and ``voxel_t`` when ``has_t``; empty slots 0). Returns the
    number of pillars in use, or -1 (outputs partly written) when a cell lies outside the
    gx x gy grid.
    """
    lut[:] = -1
    count = np.zeros(max_pillars, np.int32)
    cells_seen = 0
    for i in range(cells.shape[0]):
        c = cells[i]
        if c < 0:
            continue
        idy, idx = c >> 16, c & 0xFFFF
        if idy >= gy or idx >= gx:                    # not from stage 1 with these parameters
            return -1
        lin = idy * gx + idx
        pid = lut[lin]
        if pid < 0:                                   # a new cell
            pid = min(cells_seen, max_pillars - 1)
            cells_seen += 1
            lut[lin] = pid
            coords[4 * pid] = 0
            coords[4 * pid + 1] = 0
            coords[4 * pid + 2] = idy
            coords[4 * pid + 3] = idx
        k = count[pid]
        if k < m:
            voxel_xyzr[pid * m + k] = xyzr[i]
            if has_t:
                voxel_t[pid * m + k] = t[i]
            count[pid] = k + 1
    used = min(cells_seen, max_pillars)
    coords[4 * used:] = fill
    for p in range(used):                             # empty slots of the pillars in use
        voxel_xyzr[p * m + count[p]:(p + 1) * m] = 0
        if has_t:
            voxel_t[p * m + count[p]:(p + 1) * m] = 0
    return used

"""numba-compiled ARM voxelization: the reference's per-point rules in one pass over the points
(in slices, so that a slice can be voxelized while the DSP still encodes the next).

``AVAILABLE`` is False when numba cannot be imported or the environment sets
``VDSP_NO_NUMBA=1``; :class:`arm_side.pointcloud.voxelize.Voxelizer` then uses its numpy
code, which gives the same bytes. Machine code is cached in ``__pycache__`` next to this
file (``cache=True``).
"""
from __future__ import annotations


from vdsp_board.config.jit import AVAILABLE, njit  # noqa: F401  (AVAILABLE is read by callers)


@njit(cache=True, nogil=True, error_model="numpy")
def voxelize_points(cells, xyzr, t, has_t, lut, gx, gy, max_pillars, m, coords, voxel_xyzr, voxel_t, count,
                    state):
    """One pass in file order over stage 1's ``cells`` (int32, ``idy << 16 | idx``, -1 = skipped)
    of one slice of the cloud: call it on consecutive slices, in order, then :func:`voxelize_end`,
    with the same ``lut``, ``count`` (int32[max_pillars], 0 before the first slice) and ``state``
    (int64[1], the cells seen; 0 before the first slice).

    ``lut`` (int32, gy*gx, all -1 before the first slice) maps a cell to its pillar id; a new cell
    takes the next id while fewer than ``max_pillars`` exist, afterwards pillar ``max_pillars - 1``
    whose coords row it overwrites. A point goes to the next free slot of its pillar (the first
    ``m`` are kept). Returns 0, or -1 (outputs partly written) when a cell lies outside the
    gx x gy grid.
    """
    cells_seen = state[0]
    for i in range(cells.shape[0]):
        c = cells[i]
        if c < 0:
            continue
        idy, idx = c >> 16, c & 0xFFFF
        if idy >= gy or idx >= gx:                    # not from stage 1 with these parameters
            state[0] = cells_seen
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
    state[0] = cells_seen
    return 0


@njit(cache=True, nogil=True, error_model="numpy")
def voxelize_end(lut, gx, max_pillars, m, coords, voxel_xyzr, voxel_t, has_t, count, state, fill):
    """After the last slice: unused coords rows ``fill``, empty slots of the pillars in use 0,
    and ``lut`` back to all -1 through the cells in use (the whole table when more cells
    than pillars came, their coords rows having been overwritten). Returns the pillars in use."""
    used = min(state[0], max_pillars)
    coords[4 * used:] = fill
    for p in range(used):                             # empty slots of the pillars in use
        voxel_xyzr[p * m + count[p]:(p + 1) * m] = 0
        if has_t:
            voxel_t[p * m + count[p]:(p + 1) * m] = 0
    if state[0] > max_pillars:
        lut[:] = -1
    else:
        for p in range(used):
            lut[coords[4 * p + 2] * gx + coords[4 * p + 3]] = -1
    return used


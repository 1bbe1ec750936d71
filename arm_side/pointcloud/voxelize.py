"""ARM-side voxelization of the DSP path: pillar ids through a 2-D lookup table, packed
features written straight to their final pillar-major offsets.

Input is stage 1's output (packed cell per point, -1 for a skipped point; packed int8
features per point). The rules are the reference's, in vectorised form:

* a cell's pillar id is the rank of its first valid point among the first points of all
  cells (first come first served), capped at ``max_pillars - 1``;
* the coords row of pillar ``max_pillars - 1`` is the cell that came last when there were
  more cells than pillars (each new cell overwrote it);
* within a pillar, points keep file order and only the first ``max_points`` are stored
  (a stable sort by pillar id gives each point its slot).

With numba (:mod:`arm_side.pointcloud._jit`) the same rules run as the reference's single
loop over the points, compiled; the numpy passes below are the fallback.
"""
from __future__ import annotations

import functools

import numpy as np

from arm_side.pointcloud.params import COORDS_FILL, PillarParams
from protocol.errors import InvalidArgument


@functools.cache
def _compiled():
    """The numba kernel module, or None without numba (imported at first use, ~0.2 s)."""
    from arm_side.pointcloud import _jit
    return _jit if _jit.AVAILABLE else None


class Voxelizer:
    """Reusable scratch (the 2-D lookup table) for one parameter set."""

    def __init__(self, p: PillarParams) -> None:
        self.p = p.checked()
        gx, gy = self.p.grid
        self.lut = np.empty((gy, gx), dtype=np.int32)       # cell (idy, idx) -> first point, then pillar id
        self._sort_dtype = np.uint16 if self.p.max_pillars <= 1 << 16 else np.int32   # uint16: radix sort
        self._lut_clean = False     # compiled path: lut all -1 (the last run ended and put it back)
        self._count = np.zeros(self.p.max_pillars, np.int32)

    @property
    def incremental(self) -> bool:
        """True when :meth:`run_parts` voxelizes each slice as it comes (numba), False when it
        waits for all of them (the numpy fallback)."""
        return _compiled() is not None

    def run_parts(self, parts, coords: np.ndarray, voxel_xyzr: np.ndarray, voxel_t: np.ndarray | None) -> int:
        """:meth:`run` on a cloud given as consecutive slices ``(cells, xyzr, t)`` in file order, taken
        from the iterable ``parts`` one at a time: with numba each slice is voxelized before the
        next is taken (the DSP path voxelizes the first half while the second core still encodes).
        Same bytes as :meth:`run` on the whole cloud; raises as it does."""
        jit = _compiled()
        if jit is None:
            parts = list(parts)
            cat = lambda k: np.concatenate([part[k] for part in parts])   # noqa: E731
            return self.run(cat(0), cat(1), None if parts[0][2] is None else cat(2), coords, voxel_xyzr, voxel_t)
        p, lut, none = self.p, self.lut, np.empty(0, np.int8)
        flat_lut = lut.reshape(-1)
        if not self._lut_clean:
            flat_lut.fill(-1)
        self._lut_clean = False                        # until voxelize_end has put it back
        count, state = self._count, np.zeros(1, np.int64)
        count.fill(0)
        rows = np.ascontiguousarray(coords)            # a view unless coords is strided
        flat = rows.reshape(-1)
        vt = none if voxel_t is None else voxel_t
        has_t = voxel_t is not None
        try:
            for cells, xyzr, t in parts:
                if jit.voxelize_points(cells, xyzr, none if t is None else t, has_t and t is not None, flat_lut,
                                       lut.shape[1], lut.shape[0], p.max_pillars, p.max_points, flat, voxel_xyzr,
                                       vt, count, state) < 0:
                    raise InvalidArgument(f"a cell index lies outside the {lut.shape[1]}x{lut.shape[0]} pseudo-image")
            used = jit.voxelize_end(flat_lut, lut.shape[1], p.max_pillars, p.max_points, flat, voxel_xyzr, vt,
                                    has_t, count, state, COORDS_FILL)
            self._lut_clean = True
        finally:
            if rows is not coords:
                coords[...] = rows
        return used

    def run(self, cells: np.ndarray, xyzr: np.ndarray, t: np.ndarray | None,
            coords: np.ndarray, voxel_xyzr: np.ndarray, voxel_t: np.ndarray | None) -> int:
        """Fill ``coords`` (int32 P x 4) and the first pillars of ``voxel_xyzr`` (int32 P*M) and
        ``voxel_t`` (int8 P*M, 5-dim only); returns the number of pillars in use.
        With numba, raises InvalidArgument when a cell lies outside the pseudo-image (cells
        not from stage 1 with these parameters)."""
        jit = _compiled()
        if jit is not None:
            return self._run_compiled(jit, cells, xyzr, t, coords, voxel_xyzr, voxel_t)
        p, lut = self.p, self.lut
        valid = np.flatnonzero(cells >= 0)
        packed = cells[valid]
        idy, idx = packed >> 16, packed & 0xFFFF
        lin = idy * lut.shape[1] + idx                       # flat index into the 2-D table
        flat = lut.reshape(-1)
        order = np.arange(len(lin), dtype=np.int32)
        flat.fill(len(lin))
        np.minimum.at(flat, lin, order)                       # first valid point of every cell
        new_cells = lin[flat[lin] == order]                   # cells in order of their first point
        rank = np.arange(len(new_cells), dtype=np.int32)
        np.minimum(rank, p.max_pillars - 1, out=rank)
        flat[new_cells] = rank
        pillar = flat[lin]
        used = min(len(new_cells), p.max_pillars)
        self._write_coords(coords, new_cells, used)
        self._write_voxels(pillar, valid, used, xyzr, t, voxel_xyzr, voxel_t)
        return used

    def _run_compiled(self, jit, cells, xyzr, t, coords, voxel_xyzr, voxel_t) -> int:
        """:meth:`run` through the numba kernel: the whole cloud as one slice."""
        return self.run_parts([(cells, xyzr, t)], coords, voxel_xyzr, voxel_t)

    def _write_coords(self, coords: np.ndarray, new_cells: np.ndarray, used: int) -> None:
        p, gx = self.p, self.lut.shape[1]
        owners = new_cells[:used].copy()
        if len(new_cells) > p.max_pillars:
            owners[-1] = new_cells[-1]                        # the last new cell overwrote the last row
        coords[used:] = COORDS_FILL
        rows = coords[:used]
        rows[:, :2] = 0
        np.floor_divide(owners, gx, out=rows[:, 2])
        np.remainder(owners, gx, out=rows[:, 3])

    def _write_voxels(self, pillar, valid, used, xyzr, t, voxel_xyzr, voxel_t) -> None:
        m = self.p.max_points
        by_pillar = np.argsort(pillar.astype(self._sort_dtype), kind="stable")   # file order within a pillar
        sorted_pillar = pillar[by_pillar]
        counts = np.bincount(sorted_pillar, minlength=used).astype(np.int32)
        starts = np.cumsum(counts, dtype=np.int32) - counts
        slot = np.arange(len(pillar), dtype=np.int32) - starts[sorted_pillar]
        keep = slot < m
        dest = sorted_pillar[keep] * m + slot[keep]
        src = valid[by_pillar[keep]]
        voxel_xyzr[:used * m] = 0
        voxel_xyzr[dest] = xyzr[src]
        if voxel_t is not None:
            voxel_t[:used * m] = 0
            voxel_t[dest] = t[src]

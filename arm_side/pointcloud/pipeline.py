"""The DSP path: stage 1 on the DSP (split across both cores, or on one when that has been
faster), voxelization on the ARM, stage 2 on the DSP. Buffers are allocated once per :class:`DspPreprocessor` and reused.

Usage::

    with Soc() as soc, DspPreprocessor(soc, preset("centerpoint"), max_points_in=300_000) as pre:
        pre.load(points)                  # N x dim float32 into shared memory
        result = pre.run()                # coords, features (copies) and stage times
"""
from __future__ import annotations

import collections
import dataclasses
import statistics
import time
from typing import Callable

import numpy as np

from arm_side import CLEAN, CORE_0, CORE_1, INVALIDATE, Soc
from arm_side.pointcloud.params import PillarParams
from arm_side.pointcloud.voxelize import Voxelizer
from arm_side.stubs import pointcloud as stubs
from protocol.errors import InvalidArgument

#: below this many points stage 1 runs on one core (a second RPC would cost more than it saves)
SPLIT_MIN_POINTS = 8192
#: runs of each stage-1 placement (one core / both) kept to choose between them, and how often
#: the one not chosen is tried again (the load of the machine changes)
PLACEMENT_WINDOW, PLACEMENT_RETRY = 5, 16
#: share of the cloud core 0 encodes when the ARM voxelizes its part while core 1 still encodes the
#: rest: core 0 is done early and the rest's voxelization is shorter (0.5 without that overlap)
FIRST_SHARE = 0.4


@dataclasses.dataclass
class Result:
    coords: np.ndarray       # int32 1x1xPx4
    features: np.ndarray     # int8, params.feature_shape
    num_pillars: int
    valid_points: int
    stage1_ms: float         # wall time of stage 1 (both cores): until the last half is encoded
    voxel_ms: float          # ARM voxelization after that (the first half is voxelized meanwhile)
    stage2_ms: float
    total_ms: float
    #: the firmware's board-time estimates (µs) of the DSP stages: "stage1" (its tasks summed: the
    #: stage's work on one core) and "stage2"; None where a task had none (docs/dsp_kernels.md)
    board_us: dict = dataclasses.field(default_factory=dict)
    board_models: dict = dataclasses.field(default_factory=dict)    # stage -> "cycles" / "table" / None


class DspPreprocessor:
    """Owns the shared buffers of one parameter set and cloud capacity."""

    def __init__(self, soc: Soc, params: PillarParams, max_points_in: int, *, timeout_ms: int = 10000) -> None:
        self.soc, self.p, self.capacity, self.timeout_ms = soc, params.checked(), max(1, max_points_in), timeout_ms
        p, n = self.p, self.capacity
        cap = p.max_pillars * p.max_points
        self._mems: list = []
        self._board_tasks: dict[str, list] = {}     # the last run's DSP tasks by stage (Result.board_us)
        self.points = self._alloc(n * p.dim * 4)
        self.cells = self._alloc(n * 4)
        self.xyzr = self._alloc(n * 4)
        self.t = self._alloc(n) if p.dim == 5 else None
        self.coords = self._alloc(p.max_pillars * 16)
        self.voxel_xyzr = self._alloc(cap * 4)
        self.voxel_t = self._alloc(cap) if p.dim == 5 else None
        self.features = self._alloc(int(np.prod(p.feature_shape)))
        self.voxelizer = Voxelizer(p)
        self.num_points = 0
        # stage 1 + voxelization ms of recent runs with stage 1 split over both cores (True) or on one
        self._placement_ms: dict[bool, collections.deque] = {
            True: collections.deque(maxlen=PLACEMENT_WINDOW), False: collections.deque(maxlen=PLACEMENT_WINDOW)}
        self._runs = 0
        self.split = True           # the placement of the last run's stage 1

    def _choose_split(self) -> bool:
        """Split stage 1 over both cores or run it on one, whichever made stage 1 + voxelization
        faster in recent runs (both are tried first, and the other again every PLACEMENT_RETRY
        runs). On the board two cores are two DSPs; here they are processes sharing the host's
        CPUs, and on a busy 2-CPU host the second RPC costs more than the halved encode saves
        (PointPillars 100k: 3.4 ms split, 1.9 ms on one core, load 12). The bytes are the same."""
        if self.num_points < SPLIT_MIN_POINTS:
            return False
        self._runs += 1
        ms = self._placement_ms
        for option in (True, False):
            if len(ms[option]) < 2:
                return option
        best = statistics.median(ms[True]) <= statistics.median(ms[False])
        return (not best) if self._runs % PLACEMENT_RETRY == 0 else best

    def _alloc(self, size: int):
        mem = self.soc.mem.alloc(max(size, 1))      # uncached: ARM and DSP share the bytes, no copies
        self._mems.append(mem)
        return mem

    def close(self) -> None:
        for mem in self._mems:
            if not mem.freed:
                mem.free()
        self._mems.clear()

    def __enter__(self) -> "DspPreprocessor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def load(self, points: np.ndarray) -> int:
        """Copy an N x dim float32 cloud into shared memory. Raises InvalidArgument on a bad shape."""
        pts = np.asarray(points)
        if pts.ndim != 2 or pts.shape[1] != self.p.dim:
            raise InvalidArgument(f"points must be N x {self.p.dim}, got shape {pts.shape}")
        if len(pts) > self.capacity:
            raise InvalidArgument(f"{len(pts)} points exceed the capacity of {self.capacity}")
        self.points.array(np.float32, pts.shape)[:] = pts
        self.points.flush(CLEAN)
        self.num_points = len(pts)
        return self.num_points

    def _stage1(self) -> int:
        """Encode on both cores (halves of the cloud) or one; returns the number of valid points."""
        tasks, _ = self._submit_stage1(0.5 if self.split else 1.0)
        return sum(task.wait(self.timeout_ms)["valid"] for task in tasks)

    def _submit_stage1(self, share: float = 0.5) -> tuple[list, list]:
        """The encode tasks on both cores (``share`` of the cloud on core 0, the rest on core 1)
        and their point ranges."""
        n, dim = self.num_points, self.p.dim
        cut = int(n * share)
        parts = [(0, n)] if n < SPLIT_MIN_POINTS or cut >= n else [(0, cut), (cut, n)]
        tasks = []
        for core, (lo, hi) in zip((CORE_0, CORE_1), parts):
            k = hi - lo
            outs = [self._slice(self.cells, lo * 4, k * 4), self._slice(self.xyzr, lo * 4, k * 4)]
            if self.t is not None:
                outs.append(self._slice(self.t, lo, k))
            params = dict(self.p.encode_params(), num_points=k)
            tasks.append(stubs.pointcloud_encode(self.soc, self._slice(self.points, lo * dim * 4, k * dim * 4), outs,
                                                 **params, core=core))
        self._board_tasks = {"stage1": tasks}
        return tasks, parts

    def _stage1_voxelize(self, stage1_done: Callable[[float], None]) -> tuple[int, int, float]:
        """Stage 1 with each half voxelized as soon as its core has encoded it (while the other
        core may still run): (valid points, pillars in use, time the last half arrived).
        ``stage1_done(t)`` is called when the last half has arrived."""
        n, p = self.num_points, self.p
        tasks, parts = self._submit_stage1(FIRST_SHARE if self.split else 1.0)
        cells, xyzr = self.cells.array(np.int32, n), self.xyzr.array(np.int32, n)
        t = self.t.array(np.int8, n) if self.t is not None else None
        got = {"valid": 0, "t1": 0.0}

        def halves():
            for task, (lo, hi) in zip(tasks, parts):
                got["valid"] += task.wait(self.timeout_ms)["valid"]
                got["t1"] = time.perf_counter()
                if task is tasks[-1]:
                    stage1_done(got["t1"])
                for mem in (self.cells, self.xyzr, self.t):
                    if mem is not None:
                        mem.flush(INVALIDATE)
                yield cells[lo:hi], xyzr[lo:hi], None if t is None else t[lo:hi]
        try:
            used = self.voxelizer.run_parts(
                halves(), self.coords.array(np.int32, (p.max_pillars, 4)),
                self.voxel_xyzr.array(np.int32, p.max_pillars * p.max_points),
                self.voxel_t.array(np.int8, p.max_pillars * p.max_points) if self.voxel_t is not None else None)
        finally:
            for task in tasks:          # a failed half: the other is still waited for
                if not task.done():
                    try:
                        task.wait(self.timeout_ms)
                    except Exception:
                        pass
        for mem in (self.coords, self.voxel_xyzr, self.voxel_t):
            if mem is not None:
                mem.flush(CLEAN)
        return int(got["valid"]), used, got["t1"]

    @staticmethod
    def _slice(mem, offset: int, size: int) -> tuple[int, int]:
        return (mem.phys_addr + offset, max(size, 1))     # size 0 only for an empty cloud, at offset 0

    def _voxelize(self) -> int:
        n, p = self.num_points, self.p
        for mem in (self.cells, self.xyzr, self.t):
            if mem is not None:
                mem.flush(INVALIDATE)
        used = self.voxelizer.run(
            self.cells.array(np.int32, n), self.xyzr.array(np.int32, n),
            self.t.array(np.int8, n) if self.t is not None else None,
            self.coords.array(np.int32, (p.max_pillars, 4)),
            self.voxel_xyzr.array(np.int32, p.max_pillars * p.max_points),
            self.voxel_t.array(np.int8, p.max_pillars * p.max_points) if self.voxel_t is not None else None)
        for mem in (self.coords, self.voxel_xyzr, self.voxel_t):
            if mem is not None:
                mem.flush(CLEAN)
        return used

    def _stage2(self, used: int) -> None:
        inputs = [self.voxel_xyzr] + ([self.voxel_t] if self.voxel_t is not None else [])
        task = stubs.pointcloud_transpose(self.soc, inputs, self.features, **self.p.transpose_params(used))
        task.wait(self.timeout_ms)
        self._board_tasks["stage2"] = [task]
        self.features.flush(INVALIDATE)

    def run(self, *, copy: bool = True, on_stage: Callable[[str, float], None] | None = None) -> Result:
        """Run the three steps on the loaded cloud. ``copy=False`` returns views of the shared
        buffers (valid until the next run). ``on_stage(event, ms)`` is called as each step
        happens: ``stage1_begin`` (0), ``stage1_end`` (stage 1's ms; voxelization of the
        parts already encoded has run meanwhile), ``voxel_end`` (the voxelization's ms after
        stage 1), ``stage2_begin`` (0), ``stage2_end`` (stage 2's ms), ``end`` (total ms).
        Raises what ``Task.wait`` raises."""
        stage = on_stage or (lambda event, ms: None)
        ms = lambda a, b: (b - a) * 1e3     # noqa: E731
        self.split = self._choose_split()
        stage("stage1_begin", 0.0)
        t0 = time.perf_counter()
        if self.voxelizer.incremental and self.num_points:
            # voxel_ms: the part not hidden behind stage 1
            valid, used, t1 = self._stage1_voxelize(lambda t: stage("stage1_end", ms(t0, t)))
        else:
            valid = self._stage1()
            t1 = time.perf_counter()
            stage("stage1_end", ms(t0, t1))
            used = self._voxelize()
        t2 = time.perf_counter()
        stage("voxel_end", ms(t1, t2))
        if self.num_points >= SPLIT_MIN_POINTS:
            self._placement_ms[self.split].append((t2 - t0) * 1e3)
        stage("stage2_begin", 0.0)
        t2b = time.perf_counter()
        self._stage2(used)
        t3 = time.perf_counter()
        stage("stage2_end", ms(t2b, t3))
        coords = self.coords.array(np.int32, self.p.coords_shape)
        features = self.features.array(np.int8, self.p.feature_shape)
        if copy:
            coords, features = coords.copy(), features.copy()
        result = Result(coords, features, used, valid, ms(t0, t1), ms(t1, t2), ms(t2b, t3), ms(t0, t3),
                        {k: _board_sum(tasks) for k, tasks in self._board_tasks.items()},
                        {k: tasks[0].board_model if tasks else None for k, tasks in self._board_tasks.items()})
        stage("end", result.total_ms)
        return result


def _board_sum(tasks: list) -> float | None:
    """The tasks' board-time estimates summed (None: one of them had none)."""
    board = [t.board_us for t in tasks]
    return None if not board or None in board else sum(board)


def preprocess(soc: Soc, points: np.ndarray, params: PillarParams) -> tuple[np.ndarray, np.ndarray]:
    """One-shot DSP path: (coords, features) of an N x dim float32 cloud. Raises InvalidArgument."""
    with DspPreprocessor(soc, params, len(points)) as pre:
        pre.load(points)
        result = pre.run()
    return result.coords, result.features

"""Inference tasks (hbDNNTaskHandle_t) and the BPU cores that run them.

A task holds one inference, or up to ``MAX_BATCH`` inferences submitted with ``more``
under one handle; it is done when its last inference (``more`` false) and every one before
it have ended. Two BPU cores (threads) take inferences from one queue ordered by priority
(highest first), then customId (smallest first), then arrival; an inference for
HB_BPU_CORE_0 or HB_BPU_CORE_1 waits for that core. A running inference is never
interrupted; a released task's inference stops at the next layer boundary.
"""
from __future__ import annotations

import dataclasses
import heapq
import itertools
import threading
import time
from typing import Any, Callable

from protocol import errors

MAX_TASKS = 32          # task handles alive at once (hbDNNInfer: "at most 32 model tasks")
MAX_BATCH = 255         # inferences under one handle with ``more``
BPU_CORE_ANY, BPU_CORE_0, BPU_CORE_1 = 0, 1, 2     # hbBPUCore


@dataclasses.dataclass(frozen=True)
class InferCtrlParam:
    """hbDNNInferCtrlParam, initialised as HB_DNN_INITIALIZE_INFER_CTRL_PARAM does."""
    bpu_core_id: int = BPU_CORE_ANY
    priority: int = 0               # 0 lowest .. 255 highest (pre-emptive: goes to the head of the queue)
    more: bool = False              # another inference follows under this task handle
    custom_id: int = 0              # smaller first among equal priorities

    def check(self) -> None:
        """Raises InvalidArgument naming the field."""
        for name, lo, hi in (("priority", 0, 255), ("custom_id", -(1 << 63), (1 << 63) - 1)):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise errors.InvalidArgument(f"inferCtrlParam.{name} must be an integer in {lo}..{hi}, got {v!r}")
        if self.bpu_core_id not in (BPU_CORE_ANY, BPU_CORE_0, BPU_CORE_1) or isinstance(self.bpu_core_id, bool):
            raise errors.InvalidArgument(f"inferCtrlParam.bpuCoreId must be HB_BPU_CORE_ANY (0), HB_BPU_CORE_0 (1) "
                                         f"or HB_BPU_CORE_1 (2), got {self.bpu_core_id!r}")
        if self.more not in (0, 1, False, True):
            raise errors.InvalidArgument(f"inferCtrlParam.more must be 0 or 1, got {self.more!r}")


@dataclasses.dataclass
class LayerRun:
    """Where and how long one layer of one inference ran."""
    name: str
    type: str
    where: str          # "BPU0"/"BPU1", "ARM", or the DSP core(s) its RPCs ran on ("vdsp0", "vdsp0+vdsp1")
    wall_us: float
    rpc_us: float = 0.0     # sum of its RPCs' submit-to-done times
    exec_us: int = 0        # sum of their DSP compute times


@dataclasses.dataclass
class Inference:
    task: "TaskHandle"
    model: Any
    inputs: list
    outputs: list
    ctrl: InferCtrlParam
    seq: int
    latency_us: float = 0.0
    layers: list = dataclasses.field(default_factory=list)

    def key(self) -> tuple:
        return (-self.ctrl.priority, self.ctrl.custom_id, self.seq)


class TaskHandle:
    """hbDNNTaskHandle_t. ``status`` is 0 once done, or the error code; ``layers`` tells where
    each layer of the last inference ran and for how long; ``latency_us`` is submit to done."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.inferences: list[Inference] = []
        self.open = True            # the last infer() set ``more``
        self.released = False
        self.pending = 0            # inferences not ended
        self.status: int | None = None
        self.error: errors.VdspError | None = None
        self.submitted_at = time.perf_counter()
        self.done_at = 0.0
        self.callbacks: list[tuple[Callable, Any]] = []
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def latency_us(self) -> float:
        return (self.done_at - self.submitted_at) * 1e6 if self.done_at else 0.0

    @property
    def layers(self) -> list:
        return self.inferences[-1].layers if self.inferences else []

    def __repr__(self) -> str:
        state = "released" if self.released else "done" if self.done else "open" if self.open else "running"
        return f"TaskHandle({len(self.inferences)} inference(s), {state}, status={self.status})"


class BpuScheduler:
    """The queue and the BPU core threads. ``run(inference, core)`` is the runtime's job."""

    def __init__(self, run: Callable[[Inference, int], None], cores: int = 2) -> None:
        self._run = run
        self._cv = threading.Condition()
        self._queue: list[tuple] = []
        self._seq = itertools.count()
        self._closed = False
        self._threads = [threading.Thread(target=self._core, args=(i,), name=f"hbdnn-bpu{i}", daemon=True)
                         for i in range(cores)]
        for t in self._threads:
            t.start()

    def seq(self) -> int:
        return next(self._seq)

    def put(self, inf: Inference) -> None:
        with self._cv:
            heapq.heappush(self._queue, (inf.key(), inf))
            self._cv.notify_all()

    def drop(self, task: TaskHandle) -> int:
        """Remove the queued inferences of ``task``; how many."""
        with self._cv:
            keep = [e for e in self._queue if e[1].task is not task]
            n = len(self._queue) - len(keep)
            heapq.heapify(keep)
            self._queue = keep
            return n

    def _take(self, core: int) -> Inference | None:
        mask = BPU_CORE_0 if core == 0 else BPU_CORE_1
        with self._cv:
            while True:
                if self._closed:
                    return None
                best = None
                for i, (_, inf) in enumerate(self._queue):
                    if inf.ctrl.bpu_core_id in (BPU_CORE_ANY, mask) and (best is None or inf.key() < self._queue[best][0]):
                        best = i
                if best is not None:
                    _, inf = self._queue.pop(best)
                    heapq.heapify(self._queue)
                    return inf
                self._cv.wait()

    def _core(self, core: int) -> None:
        while True:
            inf = self._take(core)
            if inf is None:
                return
            self._run(inf, core)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._queue.clear()
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout=30)

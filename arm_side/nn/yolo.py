"""ARM API of Yolov3DetectionOutput: the fused operator with the batch split over both cores,
and the same post-processing as a chain of four small operators.

Maps are dense float32 buffers [batch, anchor_num, 5 + class_num, H*W], one per feature
map (at most 7). The result holds, per batch, 64 + 7 * max_box_num float32: element 0 is
the box count, records [batch, class, score, x1, y1, x2, y2] start at element 64.
"""
from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from protocol import errors
from protocol.constants import Core
from arm_side.aio import AsyncTask, wait_task
from arm_side.memory import Mem
from arm_side.stubs import nn as stubs

HEADER, RECORD, F4 = 64, 7, 4


@dataclasses.dataclass(frozen=True)
class YoloParams:
    """The CNPlugin parameters. ``biases`` is [map][anchor][w, h] in network pixels, flattened or nested."""
    class_num: int
    anchor_num: int
    map_w: tuple
    map_h: tuple
    net_w: int
    net_h: int
    biases: tuple
    max_box_num: int = 100
    confidence_thresh: float = 0.5
    nms_thresh: float = 0.45

    def __post_init__(self) -> None:
        object.__setattr__(self, "map_w", tuple(int(v) for v in self.map_w))
        object.__setattr__(self, "map_h", tuple(int(v) for v in self.map_h))
        object.__setattr__(self, "biases", tuple(float(v) for v in np.ravel(self.biases)))

    @property
    def maps(self) -> int:
        return len(self.map_w)

    @property
    def boxes(self) -> int:
        return self.anchor_num * sum(w * h for w, h in zip(self.map_w, self.map_h))

    def map_bytes(self, m: int, batch: int = 1) -> int:
        return batch * self.anchor_num * (5 + self.class_num) * self.map_w[m] * self.map_h[m] * F4

    def output_bytes(self, batch: int = 1) -> int:
        return batch * (HEADER + RECORD * self.max_box_num) * F4

    def geometry(self) -> dict:
        return {"class_num": self.class_num, "anchor_num": self.anchor_num, "map_w": list(self.map_w),
                "map_h": list(self.map_h), "net_w": self.net_w, "net_h": self.net_h, "biases": list(self.biases)}


def _slice(mem: Mem, offset: int, size: int) -> tuple:
    return (mem.phys_addr + offset, size)


def split(batch: int, parts: int = 2) -> list[tuple[int, int]]:
    """(first, count) batch ranges, the larger ones first, empty ones dropped."""
    base, extra = divmod(batch, parts)
    out, first = [], 0
    for i in range(parts):
        count = base + (i < extra)
        if count:
            out.append((first, count))
        first += count
    return out


@dataclasses.dataclass(frozen=True)
class Detections:
    """What a run returns: box count per batch (batch order), and per task its core and DSP time."""
    counts: list
    cores: list
    exec_us: list


def detection_output(soc, maps: Sequence[Mem], out: Mem, p: YoloParams, batch: int,
                     cores: Sequence[int] = (Core.CORE_0, Core.CORE_1), timeout_ms: float = 60000) -> Detections:
    """Run the fused operator with ``batch`` split over ``cores`` (one RPC per core, each on its
    slices of the maps and of ``out``), wait for all.

    Raises InvalidArgument (bad parameters, short buffers) and the errors of ``Task.wait``.
    Given an ``AsyncSoc``, submits the same way and returns an awaitable of the Detections.
    """
    if len(maps) != p.maps:
        raise errors.InvalidArgument(f"{len(maps)} map buffers for {p.maps} maps (map_w/map_h)")
    tasks = []
    for (first, count), core in zip(split(batch, len(cores)), cores):
        ins = [_slice(mem, p.map_bytes(m, first), p.map_bytes(m, count)) for m, mem in enumerate(maps)]
        outs = [_slice(out, p.output_bytes(first), p.output_bytes(count))]
        params = {**p.geometry(), "max_box_num": p.max_box_num, "confidence_thresh": p.confidence_thresh,
                  "nms_thresh": p.nms_thresh, "batch": count, "batch_offset": first}
        tasks.append(stubs.yolov3_detection_output(soc, ins, outs[0], **params, core=core))
    if tasks and isinstance(tasks[0], AsyncTask):
        return _detections_async(tasks, timeout_ms)  # type: ignore[return-value]  # an AsyncSoc's awaitable
    counts = []
    for task in tasks:  # gathered in batch order: task i holds the batches after task i - 1
        counts += task.wait(timeout_ms)["boxes"]
    return Detections(counts, [t.core for t in tasks], [t.exec_us for t in tasks])


async def _detections_async(tasks: list, timeout_ms: float) -> Detections:
    results = await asyncio.gather(*(wait_task(t.task, timeout_ms) for t in tasks))
    counts = [n for values in results for n in values["boxes"]]
    return Detections(counts, [t.task.core for t in tasks], [t.task.exec_us for t in tasks])


class Chain:
    """decode -> filter -> NMS -> top-k, one RPC each, with intermediate buffers allocated once.

    ``capacity`` bounds the candidates per batch after the filter (yolo_filter refuses more).
    """

    def __init__(self, soc, p: YoloParams, batch: int, capacity: int = 8192) -> None:
        self.soc, self.p, self.batch, self.capacity = soc, p, batch, capacity
        self.decoded = soc.mem.alloc(batch * p.boxes * (5 + p.class_num) * F4)
        block = batch * (HEADER + RECORD * capacity) * F4
        self.candidates = soc.mem.alloc(block)
        self.kept = soc.mem.alloc(block)

    def run(self, maps: Sequence[Mem], out: Mem, core: int = Core.ANY, timeout_ms: float = 60000) -> Detections:
        """Four RPCs in sequence. Raises like ``detection_output``. With an ``AsyncSoc``, returns
        an awaitable of the Detections (each step awaited in turn)."""
        from arm_side.soc import AsyncSoc
        if isinstance(self.soc, AsyncSoc):
            return self._run_async(maps, out, core, timeout_ms)     # type: ignore[return-value]
        values, names, exec_us = {}, [], []
        for step, kw in self._steps(maps, out):
            task = step(self.soc, **kw, core=core)
            values = task.wait(timeout_ms)
            names.append(task.core)
            exec_us.append(task.exec_us)
        return Detections(values["boxes"], names, exec_us)

    async def _run_async(self, maps: Sequence[Mem], out: Mem, core: int, timeout_ms: float) -> Detections:
        values, names, exec_us = {}, [], []
        for step, kw in self._steps(maps, out):
            task = step(self.soc, **kw, core=core)
            values = await wait_task(task.task, timeout_ms)
            names.append(task.core)
            exec_us.append(task.exec_us)
        return Detections(values["boxes"], names, exec_us)

    def _steps(self, maps: Sequence[Mem], out: Mem) -> list[tuple[Callable[..., Any], dict]]:
        """(the step's stub, its buffers and parameters), in order."""
        p, n, cap = self.p, self.batch, self.capacity
        return [
            (stubs.yolo_decode, {"inputs": list(maps), "dst": self.decoded, **p.geometry(), "batch": n}),
            (stubs.yolo_filter, {"src": self.decoded, "dst": self.candidates, "class_num": p.class_num,
                                 "boxes": p.boxes, "confidence_thresh": p.confidence_thresh, "capacity": cap,
                                 "batch": n}),
            (stubs.yolo_nms, {"src": self.candidates, "dst": self.kept, "nms_thresh": p.nms_thresh, "capacity": cap,
                              "batch": n}),
            (stubs.yolo_topk, {"src": self.kept, "dst": out, "max_box_num": p.max_box_num, "capacity": cap,
                               "batch": n}),
        ]

    def close(self) -> None:
        for mem in (self.decoded, self.candidates, self.kept):
            mem.free()

    def __enter__(self) -> "Chain":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def parse_output(values: np.ndarray, batch: int, max_box_num: int) -> list[np.ndarray]:
    """Per batch, the [count, 7] records of a result buffer (float32 values)."""
    blocks = np.asarray(values, dtype=np.float32)[:batch * (HEADER + RECORD * max_box_num)].reshape(batch, -1)
    return [b[HEADER:HEADER + RECORD * int(b[0])].reshape(-1, RECORD) for b in blocks]

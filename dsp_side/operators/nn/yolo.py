"""Yolov3DetectionOutput, fused, and the same post-processing as four small operators.

Buffers are dense float32. Map m holds [batch, anchor_num, 5 + class_num, H*W]; the
result holds, per batch, 64 + 7 * max_box_num floats: element 0 = box count, records
[batch, class, score, x1, y1, x2, y2] from element 64 (see ``yolo_kernels``). The
``batch`` field is ``batch_offset`` + the batch's position in this task, so one batch
range per core writes straight into its slice of a shared result buffer.

Chain: yolo_decode (maps -> [batch, boxes, 5 + C]) -> yolo_filter (-> candidate blocks of
64 + 7 * capacity floats, records [box_index, class, score, x1, y1, x2, y2]) -> yolo_nms
(same format) -> yolo_topk (-> the fused operator's result format).
"""
from __future__ import annotations

import numpy as np

from protocol import errors
from dsp_side.operators.nn import yolo_kernels as yk

_F4 = 4


def _floats(buf: np.ndarray, count: int, what: str) -> np.ndarray:
    """The first ``count`` float32 values of a flat uint8 buffer. Raises InvalidArgument if it is too small."""
    if buf.size < count * _F4:
        raise errors.InvalidArgument(f"{what}: buffer of {buf.size} bytes is too small, needs {count * _F4} "
                                     f"({count} float32)")
    return buf[:count * _F4].view(np.float32)


def geometry(op: str, n_maps: int, class_num, anchor_num, map_w, map_h, net_w, net_h, biases) -> yk.Geometry:
    """Check the per-map parameters against ``n_maps`` inputs. Raises InvalidArgument naming the parameter."""
    for name, values in (("map_w", map_w), ("map_h", map_h)):
        if len(values) != n_maps:
            raise errors.InvalidArgument(f"{op}: parameter {name!r} has {len(values)} values for {n_maps} maps")
        if min(values) < 1:
            raise errors.InvalidArgument(f"{op}: parameter {name!r} must be >= 1, got {values}")
    want = n_maps * anchor_num * 2
    if len(biases) != want:
        raise errors.InvalidArgument(f"{op}: parameter 'biases' has {len(biases)} values; [map][anchor][w, h] "
                                     f"for {n_maps} maps x {anchor_num} anchors needs {want}")
    b = np.asarray(biases, dtype=np.float32).reshape(n_maps, anchor_num, 2)
    if not (b > 0).all():
        raise errors.InvalidArgument(f"{op}: parameter 'biases' must all be > 0")
    return yk.Geometry(class_num, anchor_num, tuple(map_w), tuple(map_h), net_w, net_h, b)


def batch_maps(g: yk.Geometry, inputs: list, batch: int, op: str) -> list:
    """Per map, a [batch, A, 5 + C, H*W] float32 view. Raises InvalidArgument for a short buffer."""
    out = []
    for m, buf in enumerate(inputs):
        n = g.map_floats(m)
        out.append(_floats(buf, batch * n, f"{op}: inputs[{m}]").reshape(
            batch, g.anchor_num, g.entries, g.cells(m)))
    return out


def _blocks(buf: np.ndarray, batch: int, capacity: int, what: str) -> np.ndarray:
    return _floats(buf, batch * (yk.HEADER + yk.RECORD * capacity), what).reshape(batch, -1)


def detection_output(ctx, inputs, outputs, class_num, anchor_num, max_box_num, net_w, net_h, confidence_thresh,
                     nms_thresh, map_w, map_h, biases, batch, batch_offset):
    """Yolov3DetectionOutput: decode, filter, per-class NMS and top-k in one task."""
    g = geometry("yolov3_detection_output", len(inputs), class_num, anchor_num, map_w, map_h, net_w, net_h, biases)
    maps = batch_maps(g, inputs, batch, "yolov3_detection_output")
    out = _blocks(outputs[0], batch, max_box_num, "yolov3_detection_output: outputs[0]")
    counts = []
    for b in range(batch):
        c = yk.decode_filter(g, [x[b] for x in maps], confidence_thresh)
        c = yk.topk(yk.nms(c, nms_thresh), max_box_num)
        yk.write_records(out[b], c, np.float32(batch_offset + b))
        counts.append(len(c))
    return {"boxes": counts}


def decode(ctx, inputs, outputs, class_num, anchor_num, map_w, map_h, net_w, net_h, biases, batch):
    """Chain step 1: every box of every map decoded to [batch, boxes, 5 + C] float32."""
    g = geometry("yolo_decode", len(inputs), class_num, anchor_num, map_w, map_h, net_w, net_h, biases)
    maps = batch_maps(g, inputs, batch, "yolo_decode")
    out = _floats(outputs[0], batch * g.boxes * g.entries, "yolo_decode: outputs[0]").reshape(
        batch, g.boxes, g.entries)
    for b in range(batch):
        out[b] = yk.decode_dense(g, [x[b] for x in maps])
    return {"boxes": g.boxes}


def filter_(ctx, inputs, outputs, class_num, boxes, confidence_thresh, capacity, batch):
    """Chain step 2: (box, class) candidates past the confidence threshold."""
    dec = _floats(inputs[0], batch * boxes * (5 + class_num), "yolo_filter: inputs[0]").reshape(
        batch, boxes, 5 + class_num)
    out = _blocks(outputs[0], batch, capacity, "yolo_filter: outputs[0]")
    counts = []
    for b in range(batch):
        c = yk.filter_dense(dec[b], confidence_thresh)
        if len(c) > capacity:
            raise errors.InvalidArgument(f"yolo_filter: batch {b} has {len(c)} candidates, more than "
                                         f"parameter 'capacity' = {capacity}")
        yk.write_records(out[b], c, c.index.astype(np.float32))
        counts.append(len(c))
    return {"candidates": counts}


def _read(block: np.ndarray, capacity: int, op: str, b: int) -> yk.Candidates:
    n = block[0]
    if not (0 <= n <= capacity and n == int(n)):
        raise errors.InvalidArgument(f"{op}: inputs[0] batch {b} has a record count of {n}, not 0..{capacity}")
    return yk.read_records(block)


def nms(ctx, inputs, outputs, nms_thresh, capacity, batch):
    """Chain step 3: greedy per-class NMS of candidate blocks."""
    src = _blocks(inputs[0], batch, capacity, "yolo_nms: inputs[0]")
    out = _blocks(outputs[0], batch, capacity, "yolo_nms: outputs[0]")
    counts = []
    for b in range(batch):
        c = yk.nms(_read(src[b], capacity, "yolo_nms", b), nms_thresh)
        yk.write_records(out[b], c, c.index.astype(np.float32))
        counts.append(len(c))
    return {"kept": counts}


def topk(ctx, inputs, outputs, max_box_num, capacity, batch, batch_offset):
    """Chain step 4: the max_box_num best boxes in the Yolov3DetectionOutput result format."""
    src = _blocks(inputs[0], batch, capacity, "yolo_topk: inputs[0]")
    out = _blocks(outputs[0], batch, max_box_num, "yolo_topk: outputs[0]")
    counts = []
    for b in range(batch):
        c = yk.topk(_read(src[b], capacity, "yolo_topk", b), max_box_num)
        yk.write_records(out[b], c, np.float32(batch_offset + b))
        counts.append(len(c))
    return {"boxes": counts}

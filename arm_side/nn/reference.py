"""Plain reference implementations of the NN operators, written independently of the firmware.

They state the semantics the operators must reproduce (docs/nn.md):

* rounding: nearest integer, ties away from zero (C ``round``), of the value computed in
  float64 from the input and the float32 scale; then clipped to the output type's range;
* softmax in float64 after subtracting the maximum;
* NC1HWC2 by explicit index arithmetic (block c // C2, lane c % C2);
* Yolov3 decode / filter / NMS / top-k by plain Python loops in float64.
"""
from __future__ import annotations

import math

import numpy as np

from arm_side.nn.tensor import Quantization
from arm_side.nn.dtypes import QuantiType


def _round_half_away(v: np.ndarray) -> np.ndarray:
    a = np.abs(v)
    r = np.floor(a)
    r = r + ((a - r) >= 0.5)
    return np.copysign(r, v)


def _per_axis(values, ndim: int, axis: int) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 1:
        return arr.reshape(())
    shape = [1] * ndim
    shape[axis] = arr.size
    return arr.reshape(shape)


def quantize(x: np.ndarray, q: Quantization, dtype) -> np.ndarray:
    """Integer values of float ``x`` under SCALE or SHIFT quantisation."""
    v = np.where(np.isnan(x), 0.0, np.asarray(x, dtype=np.float64))
    if q.type == QuantiType.SCALE:
        scale = _per_axis(np.asarray(q.scale, dtype=np.float32), v.ndim, q.axis)
        v = v / scale + _per_axis(q.zero_point, v.ndim, q.axis)
    else:
        v = v * _per_axis([2.0 ** s for s in q.shift], v.ndim, q.axis)
    info = np.iinfo(dtype)
    return np.clip(_round_half_away(v), info.min, info.max).astype(dtype)


def dequantize(qv: np.ndarray, q: Quantization, dtype=np.float32) -> np.ndarray:
    """Real values of integers ``qv``: (q - zp) * scale, or q / 2**shift."""
    v = np.asarray(qv, dtype=np.float64)
    if q.type == QuantiType.SCALE:
        v = (v - _per_axis(q.zero_point, v.ndim, q.axis)) * _per_axis(np.asarray(q.scale, dtype=np.float32), v.ndim, q.axis)
    elif q.type == QuantiType.SHIFT:
        v = v / _per_axis([2.0 ** s for s in q.shift], v.ndim, q.axis)
    return v.astype(dtype)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    v = np.asarray(x, dtype=np.float64)
    e = np.exp(v - v.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def nchw_to_nc1hwc2(x: np.ndarray, c2: int) -> np.ndarray:
    n, c, h, w = x.shape
    out = np.zeros((n, -(-c // c2), h, w, c2), dtype=x.dtype)
    for ch in range(c):
        out[:, ch // c2, :, :, ch % c2] = x[:, ch]
    return out


# --- Yolov3DetectionOutput ---------------------------------------------------------------------

def _sig(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v)) if v > -700 else 0.0


def _iou(a, b) -> float:
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def yolov3_batch(maps: list, p, b: int) -> list:
    """Records [b, class, score, x1, y1, x2, y2] of batch ``b``; ``maps[m]`` is [B, A, 5 + C, H*W]."""
    boxes = []  # (index, obj, probs, corners)
    index = 0
    for m, x in enumerate(maps):
        w_m, h_m = p.map_w[m], p.map_h[m]
        for a in range(p.anchor_num):
            bw_px, bh_px = p.biases[(m * p.anchor_num + a) * 2], p.biases[(m * p.anchor_num + a) * 2 + 1]
            for cell in range(w_m * h_m):
                e = x[b, a, :, cell].astype(np.float64)
                obj = _sig(e[4])
                if obj > p.confidence_thresh:
                    cx = (cell % w_m + _sig(e[0])) / w_m
                    cy = (cell // w_m + _sig(e[1])) / h_m
                    bw = math.exp(min(e[2], 80.0)) * bw_px / p.net_w
                    bh = math.exp(min(e[3], 80.0)) * bh_px / p.net_h
                    corners = [min(max(v, 0.0), 1.0) for v in (cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2)]
                    boxes.append((index, obj, [_sig(v) for v in e[5:]], corners))
                index += 1
    kept = []
    for c in range(p.class_num):
        cands = [(obj * probs[c], idx, corners) for idx, obj, probs, corners in boxes
                 if obj * probs[c] > p.confidence_thresh]
        cands.sort(key=lambda t: (-t[0], t[1]))
        dead = [False] * len(cands)
        for i, (score, _, box) in enumerate(cands):
            if dead[i]:
                continue
            kept.append([b, c, score, *box])
            for j in range(i + 1, len(cands)):
                if not dead[j] and _iou(box, cands[j][2]) > p.nms_thresh:
                    dead[j] = True
    if len(kept) > p.max_box_num:
        order = sorted(range(len(kept)), key=lambda i: (-kept[i][2], i))[:p.max_box_num]
        kept = [kept[i] for i in sorted(order)]
    return kept


def yolov3_detection_output(maps: list, p, batch: int) -> list[np.ndarray]:
    """Per batch, a [count, 7] array of records."""
    return [np.array(yolov3_batch(maps, p, b), dtype=np.float64).reshape(-1, 7) for b in range(batch)]

"""Yolov3 detection post-processing kernels (CNPlugin Yolov3DetectionOutput semantics).

One batch at a time. Input map m is float32 [batch, A, 5 + C, H*W]; entry 0..4 of a
box are tx, ty, tw, th, objectness, then C class scores; cell i is row i // W, col i % W.
Boxes are numbered map by map, anchor by anchor, cell by cell ("box index").

* decode (float32 arithmetic): x = (col + sig(tx)) / W, y = (row + sig(ty)) / H,
  w = exp(tw) * bias_w / net_w, h = exp(th) * bias_h / net_h, corners x -+ w/2, y -+ h/2
  clipped to [0, 1]; objectness and class probabilities are sig(); sig(v) = 1 / (1 + exp(-v)).
* filter: a (box, class) pair is a candidate when objectness > confidence_thresh and
  score = objectness * probability > confidence_thresh (both strict), ordered by class, then box index.
* NMS, per class: candidates by descending score (ties: lower box index first); the best
  remaining box is kept and every later box with IoU > nms_thresh (strict) is dropped.
  IoU has no +1 terms (coordinates are normalised): area = (x2 - x1) * (y2 - y1).
* top-k: when more than max_box_num boxes survive, the max_box_num highest scores are kept
  (ties: earlier in class order); the output stays ordered by class, then descending score.

The fused operator and the chain operators call these same functions, so they agree exactly;
the fused one decodes box geometry and class scores only for boxes that pass objectness.
"""
from __future__ import annotations

import dataclasses

import numpy as np

HEADER = 64      # floats before the first record of a batch; element 0 = record count
RECORD = 7       # floats per record


@dataclasses.dataclass(frozen=True)
class Geometry:
    """Shape facts shared by the yolo operators. Invariant: len(map_w) == len(map_h) == maps."""
    class_num: int
    anchor_num: int
    map_w: tuple
    map_h: tuple
    net_w: int
    net_h: int
    biases: np.ndarray  # float32 [maps, anchors, 2]

    @property
    def entries(self) -> int:
        return 5 + self.class_num

    def cells(self, m: int) -> int:
        return self.map_w[m] * self.map_h[m]

    def map_floats(self, m: int) -> int:
        """float32 values of one batch of map m."""
        return self.anchor_num * self.entries * self.cells(m)

    @property
    def boxes(self) -> int:
        return self.anchor_num * sum(self.cells(m) for m in range(len(self.map_w)))

    def box_offset(self, m: int) -> int:
        return self.anchor_num * sum(self.cells(k) for k in range(m))


def sigmoid(v: np.ndarray) -> np.ndarray:
    """float32 logistic function (the one both the fused and the chain operators use)."""
    v = np.asarray(v, dtype=np.float32)
    with np.errstate(over="ignore"):  # exp overflows to inf for v < -88: sig = 0, as intended
        return np.float32(1.0) / (np.float32(1.0) + np.exp(-v))


def decode_boxes(g: Geometry, m: int, x: np.ndarray, anchor: np.ndarray, cell: np.ndarray) -> np.ndarray:
    """float32 [n, 4] corners of the boxes (anchor, cell) of map m; ``x`` is [A, 5 + C, H*W] of one batch."""
    w_m, h_m = np.float32(g.map_w[m]), np.float32(g.map_h[m])
    col = (cell % g.map_w[m]).astype(np.float32)
    row = (cell // g.map_w[m]).astype(np.float32)
    cx = (col + sigmoid(x[anchor, 0, cell])) / w_m
    cy = (row + sigmoid(x[anchor, 1, cell])) / h_m
    with np.errstate(over="ignore"):  # a huge tw/th gives an infinite size, clipped below
        bw = np.exp(x[anchor, 2, cell]) * g.biases[m, anchor, 0] / np.float32(g.net_w)
        bh = np.exp(x[anchor, 3, cell]) * g.biases[m, anchor, 1] / np.float32(g.net_h)
    half_w, half_h = bw / np.float32(2), bh / np.float32(2)
    box = np.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], axis=1)
    return np.clip(box, np.float32(0), np.float32(1)).astype(np.float32)


def decode_dense(g: Geometry, maps: list) -> np.ndarray:
    """float32 [boxes, 5 + C]: x1, y1, x2, y2, objectness, class probabilities, for every box of one batch."""
    out = np.empty((g.boxes, g.entries), dtype=np.float32)
    for m, x in enumerate(maps):
        a_idx, cell = np.divmod(np.arange(g.anchor_num * g.cells(m)), g.cells(m))
        rows = slice(g.box_offset(m), g.box_offset(m) + a_idx.size)
        out[rows, :4] = decode_boxes(g, m, x, a_idx, cell)
        out[rows, 4:] = sigmoid(x[:, 4:, :].transpose(0, 2, 1).reshape(-1, g.entries - 4))
    return out


@dataclasses.dataclass
class Candidates:
    """(box, class) pairs of one batch. Invariant: all arrays have the same length."""
    index: np.ndarray   # int64 box index
    cls: np.ndarray     # int64
    score: np.ndarray   # float32
    box: np.ndarray     # float32 [n, 4]

    def take(self, sel) -> "Candidates":
        return Candidates(self.index[sel], self.cls[sel], self.score[sel], self.box[sel])

    def __len__(self) -> int:
        return self.index.size


def _pairs(obj: np.ndarray, prob: np.ndarray, index: np.ndarray, box: np.ndarray, thresh: float) -> Candidates:
    """Candidates from kept boxes: ``obj`` [k], ``prob`` [k, C], ordered by class then box index."""
    with np.errstate(over="ignore"):  # scores beyond float32's range (a caller's own floats): inf, as in C
        score = obj[:, None] * prob
    cls, k = np.nonzero((score > np.float32(thresh)).T)   # class-major: class, then box order
    return Candidates(index[k], cls.astype(np.int64), score[k, cls], box[k])


def filter_dense(decoded: np.ndarray, thresh: float) -> Candidates:
    """Candidates of one batch from ``decode_dense`` output."""
    keep = np.nonzero(decoded[:, 4] > np.float32(thresh))[0]
    return _pairs(decoded[keep, 4], decoded[keep, 5:], keep.astype(np.int64), decoded[keep, :4], thresh)


def decode_filter(g: Geometry, maps: list, thresh: float) -> Candidates:
    """Fused decode + filter of one batch: geometry and class scores only for boxes past objectness."""
    parts = []
    for m, x in enumerate(maps):
        obj = sigmoid(x[:, 4, :])                       # [A, H*W]
        a_idx, cell = np.nonzero(obj > np.float32(thresh))
        index = g.box_offset(m) + a_idx * g.cells(m) + cell
        prob = sigmoid(x[a_idx, 5:, cell]) if a_idx.size else np.empty((0, g.class_num), np.float32)
        parts.append((obj[a_idx, cell], prob, index.astype(np.int64), decode_boxes(g, m, x, a_idx, cell)))
    obj, prob, index, box = (np.concatenate([p[i] for p in parts]) for i in range(4))
    return _pairs(obj, prob.reshape(-1, g.class_num), index, box.reshape(-1, 4), thresh)


def iou_one(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU of one box with each of ``others`` (no +1 terms; 0 when the union is empty)."""
    iw = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0])
    ih = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1])
    inter = np.maximum(iw, 0) * np.maximum(ih, 0)
    area = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = (box[2] - box[0]) * (box[3] - box[1]) + area - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def nms(c: Candidates, thresh: float) -> Candidates:
    """Greedy per-class NMS; result ordered by class, then descending score."""
    kept = []
    for cls in np.unique(c.cls):
        rows = np.nonzero(c.cls == cls)[0]
        rows = rows[np.argsort(-c.score[rows], kind="stable")]   # stable: ties keep box-index order
        alive = np.ones(rows.size, dtype=bool)
        for i in range(rows.size):
            if alive[i]:
                kept.append(rows[i])
                rest = i + 1 + np.nonzero(alive[i + 1:])[0]
                alive[rest[iou_one(c.box[rows[i]], c.box[rows[rest]]) > thresh]] = False
    return c.take(np.asarray(kept, dtype=np.int64))


def topk(c: Candidates, k: int) -> Candidates:
    """At most ``k`` records with the highest scores, keeping the input order."""
    if len(c) <= k:
        return c
    best = np.argsort(-c.score, kind="stable")[:k]
    return c.take(np.sort(best))


def write_records(out: np.ndarray, c: Candidates, first: np.ndarray) -> None:
    """One batch's block ``out`` (float32 [64 + 7 * capacity]): count, then
    [first, class, score, x1, y1, x2, y2] records; the rest zeroed."""
    out[:] = 0
    out[0] = len(c)
    rec = out[HEADER:HEADER + RECORD * len(c)].reshape(-1, RECORD)
    rec[:, 0] = first
    rec[:, 1] = c.cls
    rec[:, 2] = c.score
    rec[:, 3:] = c.box


def read_records(block: np.ndarray) -> Candidates:
    """Candidates from a block written with ``first`` = box index. The caller checked the count."""
    n = int(block[0])
    rec = block[HEADER:HEADER + RECORD * n].reshape(-1, RECORD)
    return Candidates(rec[:, 0].astype(np.int64), rec[:, 1].astype(np.int64), rec[:, 2].copy(), rec[:, 3:].copy())

"""Morphology: dilate and erode with a rectangle, cross or ellipse structuring element (OpenCV)."""
from __future__ import annotations

import cv2

from protocol.contract import cv_ids as ids
from dsp_side.operators.cv.common import BORDERS, DST, FILTER_BORDERS, PACKED8, SRC, anchor_in, border_param, \
    opencv, size_param, store
from dsp_side.operators.cv.filters import unary

SHAPES = {"rect": cv2.MORPH_RECT, "cross": cv2.MORPH_CROSS, "ellipse": cv2.MORPH_ELLIPSE}


def _morph(op: str, fn, inputs, outputs, src, dst, shape, ksize, anchor, iterations, border):
    _, sv, _, dv = unary(op, inputs, outputs, src, dst, PACKED8)
    anchor = anchor_in(op, anchor, *ksize)
    kernel = cv2.getStructuringElement(SHAPES[shape], tuple(ksize), anchor)
    with opencv(op):
        # border "constant" uses OpenCV's morphology default value (max for erode, min for dilate),
        # so the image edge never spreads into the result.
        store(dv, fn(sv, kernel, dst=dv, anchor=anchor, iterations=iterations, borderType=BORDERS[border]))


def dilate(ctx, inputs, outputs, src, dst, shape, ksize, anchor, iterations, border):
    """Dilation (cv::dilate): local maximum over the structuring element."""
    _morph("dilate", cv2.dilate, inputs, outputs, src, dst, shape, ksize, anchor, iterations, border)


def erode(ctx, inputs, outputs, src, dst, shape, ksize, anchor, iterations, border):
    """Erosion (cv::erode): local minimum over the structuring element."""
    _morph("erode", cv2.erode, inputs, outputs, src, dst, shape, ksize, anchor, iterations, border)


def register(registry) -> None:
    params = {"src": SRC, "dst": DST,
              "shape": {"type": "str", "choices": list(SHAPES), "default": "rect"},
              "ksize": size_param("structuring element size", [3, 3]),
              "anchor": {"type": "int_list", "len": 2, "min": -1, "default": [-1, -1]},
              "iterations": {"type": "int", "min": 1, "max": 100, "default": 1},
              "border": border_param(FILTER_BORDERS, "constant")}
    registry.register(ids.DILATE, "cv.dilate", dilate, inputs=1, outputs=1, params=params)
    registry.register(ids.ERODE, "cv.erode", erode, inputs=1, outputs=1, params=params)

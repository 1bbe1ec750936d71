"""Morphology: dilate and erode with a rectangle, cross or ellipse structuring element (OpenCV)."""
from __future__ import annotations

import cv2

from protocol.contract import cv_ops as cv
from dsp_side.operators.cv.common import BORDERS, PACKED8, anchor_in, opencv, store
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
    registry.bind(cv.DILATE, dilate)
    registry.bind(cv.ERODE, erode)

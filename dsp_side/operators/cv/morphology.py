"""Morphology: dilate and erode with a rectangle, cross or ellipse structuring element (OpenCV)."""
from __future__ import annotations

import cv2

from protocol.contract import cv_ops as cv
from dsp_side.operators.cv.common import BORDERS, PACKED8, anchor_in, opencv, store
from dsp_side.operators.cv.filters import unary

SHAPES = {"rect": cv2.MORPH_RECT, "cross": cv2.MORPH_CROSS, "ellipse": cv2.MORPH_ELLIPSE}


#: (shape, ksize, anchor) -> the structuring element (read-only), made once
_ELEMENTS: dict = {}
ELEMENTS_MAX = 64


def _element(shape: str, ksize: tuple[int, int], anchor: tuple[int, int]):
    key = (shape, ksize, anchor)
    kernel = _ELEMENTS.get(key)
    if kernel is None:
        kernel = cv2.getStructuringElement(SHAPES[shape], ksize, anchor)
        kernel.flags.writeable = False
        if len(_ELEMENTS) >= ELEMENTS_MAX:
            del _ELEMENTS[next(iter(_ELEMENTS))]
        _ELEMENTS[key] = kernel
    return kernel


def _morph(op: str, fn, inputs, outputs, src, dst, shape, ksize, anchor, iterations, border):
    _, sv, _, dv = unary(op, inputs, outputs, src, dst, PACKED8)
    anchor = anchor_in(op, anchor, *ksize)
    kernel = _element(shape, tuple(ksize), anchor)
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

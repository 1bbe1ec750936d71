"""Feature detectors: canny edges and the Harris corner response (OpenCV)."""
from __future__ import annotations

import cv2

from protocol import errors
from protocol.contract import cv_ops as cv
from dsp_side.operators.cv.common import BORDERS, GRAY, opencv, store
from dsp_side.operators.cv.filters import unary


def canny(ctx, inputs, outputs, src, dst, threshold1, threshold2, aperture_size, l2_gradient):
    """Canny edges (cv::Canny): 255 on edges, 0 elsewhere."""
    _, sv, _, dv = unary("canny", inputs, outputs, src, dst, GRAY)
    with opencv("canny"):
        store(dv, cv2.Canny(sv, threshold1, threshold2, edges=dv, apertureSize=aperture_size,
                            L2gradient=l2_gradient))


def corner_harris(ctx, inputs, outputs, src, dst, block_size, ksize, k, border):
    """Harris corner response (cv::cornerHarris) as an F32 image."""
    _, sv, _, dv = unary("cornerHarris", inputs, outputs, src, dst, GRAY, ("F32",), same_fmt=False)
    if block_size < 2 and ksize == 1:
        raise errors.InvalidArgument(
            "cornerHarris: block_size 1 with ksize 1 has no neighbourhood; use block_size >= 2")
    with opencv("cornerHarris"):
        store(dv, cv2.cornerHarris(sv, block_size, ksize, k, dst=dv, borderType=BORDERS[border]))


def register(registry) -> None:
    registry.bind(cv.CANNY, canny)
    registry.bind(cv.CORNER_HARRIS, corner_harris)

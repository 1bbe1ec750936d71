"""Per-pixel and histogram operators: threshold, equalizeHist, integral, LUT (OpenCV)."""
from __future__ import annotations

import cv2
import numpy as np

from protocol import errors
from protocol.contract import cv_ops as cv
from dsp_side.operators.cv.common import GRAY, PACKED8, bind, opencv, store
from dsp_side.operators.cv.filters import unary

TYPES = {"binary": cv2.THRESH_BINARY, "binary_inv": cv2.THRESH_BINARY_INV, "trunc": cv2.THRESH_TRUNC,
         "tozero": cv2.THRESH_TOZERO, "tozero_inv": cv2.THRESH_TOZERO_INV}
METHODS = {"fixed": 0, "otsu": cv2.THRESH_OTSU, "triangle": cv2.THRESH_TRIANGLE}


def threshold(ctx, inputs, outputs, src, dst, thresh, maxval, type, method):
    """Fixed-level threshold (cv::threshold); method otsu/triangle picks the level. Returns it."""
    _, sv, _, dv = unary("threshold", inputs, outputs, src, dst, GRAY + ("F32",))
    if method != "fixed" and sv.dtype != "uint8":
        raise errors.InvalidArgument(f"threshold: method {method!r} needs an 8-bit image")
    with opencv("threshold"):
        level, out = cv2.threshold(sv, thresh, maxval, TYPES[type] | METHODS[method], dst=dv)
    store(dv, out)
    return {"threshold": float(level)}


def equalize_hist(ctx, inputs, outputs, src, dst):
    """Histogram equalization of an 8-bit gray image (cv::equalizeHist)."""
    _, sv, _, dv = unary("equalizeHist", inputs, outputs, src, dst, GRAY)
    with opencv("equalizeHist"):
        store(dv, cv2.equalizeHist(sv, dst=dv))


def integral(ctx, inputs, outputs, src, dst):
    """Integral image (cv::integral): dst is (w+1) x (h+1), S32 or F32, first row and column 0."""
    ((s, (sv,)),) = bind("integral", inputs, [("src", src, GRAY)])
    ((d, (dv,)),) = bind("integral", outputs, [("dst", dst, ("S32", "F32"))])
    want = (s.size[0] + 1, s.size[1] + 1)
    if d.size != want:
        raise errors.InvalidArgument(f"integral: dst region must be {want[0]}x{want[1]} (src + 1), "
                                     f"got {d.size[0]}x{d.size[1]}")
    if d.format == "S32" and s.size[0] * s.size[1] > (2**31 - 1) // 255:
        raise errors.InvalidArgument("integral: an S32 sum could overflow for this source; use an F32 dst")
    with opencv("integral"):
        store(dv, cv2.integral(sv, sum=dv, sdepth=cv2.CV_32S if d.format == "S32" else cv2.CV_32F))


def lut(ctx, inputs, outputs, src, dst, table):
    _, sv, _, dv = unary("LUT", inputs, outputs, src, dst, PACKED8)
    with opencv("LUT"):
        store(dv, cv2.LUT(sv, np.array(table, np.uint8), dst=dv))


def register(registry) -> None:
    registry.bind(cv.THRESHOLD, threshold)
    registry.bind(cv.EQUALIZE_HIST, equalize_hist)
    registry.bind(cv.INTEGRAL, integral)
    registry.bind(cv.LUT, lut)

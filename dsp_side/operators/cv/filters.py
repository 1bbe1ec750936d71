"""Smoothing and linear filters: gaussianBlur, boxFilter, medianBlur, bilateralFilter,
filter2D, sepFilter2D, sobel. Kernels are OpenCV's, computed straight into the
destination views."""
from __future__ import annotations

import cv2
import numpy as np

from protocol import errors
from protocol.contract import cv_ops as cv
from dsp_side.operators.cv.common import (BORDERS, GRAY, PACKED8, anchor_in, bind, kernel_list, opencv,
                                          same_format, same_size, store)

# dst format -> OpenCV ddepth for operators whose output depth follows the destination.
_DDEPTH = {"Y": cv2.CV_8U, "U8": cv2.CV_8U, "S16": cv2.CV_16S, "F32": cv2.CV_32F}


def unary(op: str, inputs, outputs, src, dst, accepted, dst_accepted=None, *, same_fmt=True):
    """Bind one source and one destination region of the same size: (src, view, dst, view).

    Raises InvalidArgument (descriptors, formats, sizes, buffers)."""
    ((s, (sv,)),) = bind(op, inputs, [("src", src, accepted)])
    ((d, (dv,)),) = bind(op, outputs, [("dst", dst, dst_accepted or accepted)])
    same_size(op, s, d)
    if same_fmt:
        same_format(op, s, d)
    return s, sv, d, dv


def _depth_dst(op: str, s, d) -> int:
    """ddepth from the destination: same as 8-bit source, or S16/F32 from a one-channel source."""
    if d.format in ("S16", "F32"):
        if s.channels != 1:
            raise errors.InvalidArgument(f"{op}: a {d.format} destination needs a one-channel source, got {s.format}")
    else:
        same_format(op, s, d)
    return _DDEPTH.get(d.format, -1)


def gaussian_blur(ctx, inputs, outputs, src, dst, ksize, sigma_x, sigma_y, border):
    """Gaussian smoothing (cv::GaussianBlur); ksize odd, sigma 0 = derived from ksize."""
    _, sv, _, dv = unary("gaussianBlur", inputs, outputs, src, dst, PACKED8)
    with opencv("gaussianBlur"):
        store(dv, cv2.GaussianBlur(sv, tuple(ksize), sigma_x, dst=dv, sigmaY=sigma_y, borderType=BORDERS[border]))


def box_filter(ctx, inputs, outputs, src, dst, ksize, normalize, anchor, border):
    """Box filter (cv::boxFilter), normalized by default."""
    _, sv, _, dv = unary("boxFilter", inputs, outputs, src, dst, PACKED8)
    anchor = anchor_in("boxFilter", anchor, *ksize)
    with opencv("boxFilter"):
        store(dv, cv2.boxFilter(sv, -1, tuple(ksize), dst=dv, anchor=anchor, normalize=normalize,
                                borderType=BORDERS[border]))


def median_blur(ctx, inputs, outputs, src, dst, ksize):
    """Median filter (cv::medianBlur) over a ksize x ksize square, ksize odd."""
    _, sv, _, dv = unary("medianBlur", inputs, outputs, src, dst, PACKED8)
    with opencv("medianBlur"):
        store(dv, cv2.medianBlur(sv, ksize, dst=dv))


def bilateral_filter(ctx, inputs, outputs, src, dst, d, sigma_color, sigma_space, border):
    """Edge-preserving smoothing (cv::bilateralFilter) with a d x d neighbourhood."""
    _, sv, _, dv = unary("bilateralFilter", inputs, outputs, src, dst, PACKED8)
    with opencv("bilateralFilter"):
        store(dv, cv2.bilateralFilter(sv, d, sigma_color, sigma_space, dst=dv, borderType=BORDERS[border]))


def filter2d(ctx, inputs, outputs, src, dst, kernel, ksize, anchor, delta, border):
    """Correlation with an arbitrary kernel (cv::filter2D); kernel row-major, ksize [w, h]."""
    op = "filter2D"
    s, sv, d, dv = unary(op, inputs, outputs, src, dst, PACKED8, PACKED8 + ("S16", "F32"), same_fmt=False)
    ddepth = _depth_dst(op, s, d)
    k = kernel_list(op, "kernel", kernel, ksize[0] * ksize[1]).reshape(ksize[1], ksize[0])
    anchor = anchor_in(op, anchor, *ksize)
    with opencv(op):
        store(dv, cv2.filter2D(sv, ddepth, k, dst=dv, anchor=anchor, delta=delta, borderType=BORDERS[border]))


def sep_filter2d(ctx, inputs, outputs, src, dst, kernel_x, kernel_y, anchor, delta, border):
    """Separable filter (cv::sepFilter2D): rows by kernel_x, then columns by kernel_y."""
    op = "sepFilter2D"
    s, sv, d, dv = unary(op, inputs, outputs, src, dst, PACKED8, PACKED8 + ("S16", "F32"), same_fmt=False)
    ddepth = _depth_dst(op, s, d)
    for name, k in (("kernel_x", kernel_x), ("kernel_y", kernel_y)):
        if not 1 <= len(k) <= 255:
            raise errors.InvalidArgument(f"{op}: parameter {name!r} must have 1..255 coefficients, got {len(k)}")
    kx, ky = np.asarray(kernel_x, np.float32), np.asarray(kernel_y, np.float32)
    anchor = anchor_in(op, anchor, len(kx), len(ky))
    with opencv(op):
        store(dv, cv2.sepFilter2D(sv, ddepth, kx, ky, dst=dv, anchor=anchor, delta=delta,
                                  borderType=BORDERS[border]))


def sobel(ctx, inputs, outputs, src, dst, dx, dy, ksize, scale, delta, border):
    """Image derivative (cv::Sobel; ksize -1 = Scharr 3x3) into an S16, F32 or 8-bit image."""
    op = "sobel"
    s, sv, d, dv = unary(op, inputs, outputs, src, dst, GRAY, ("Y", "U8", "S16", "F32"), same_fmt=False)
    if dx + dy == 0:
        raise errors.InvalidArgument(f"{op}: dx + dy must be at least 1, got dx {dx}, dy {dy}")
    if ksize == -1 and dx + dy != 1:
        raise errors.InvalidArgument(f"{op}: Scharr (ksize -1) takes dx + dy == 1, got dx {dx}, dy {dy}")
    with opencv(op):
        store(dv, cv2.Sobel(sv, _DDEPTH[d.format], dx, dy, dst=dv, ksize=ksize, scale=scale, delta=delta,
                            borderType=BORDERS[border]))



def register(registry) -> None:
    for entry, fn in ((cv.GAUSSIAN_BLUR, gaussian_blur), (cv.BOX_FILTER, box_filter), (cv.MEDIAN_BLUR, median_blur),
                      (cv.BILATERAL_FILTER, bilateral_filter), (cv.FILTER2D, filter2d),
                      (cv.SEP_FILTER2D, sep_filter2d), (cv.SOBEL, sobel)):
        registry.bind(entry, fn)

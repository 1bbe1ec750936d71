"""Smoothing and linear filters: gaussianBlur, boxFilter, medianBlur, bilateralFilter,
filter2D, sepFilter2D, sobel. Kernels are OpenCV's, computed straight into the
destination views."""
from __future__ import annotations

import cv2
import numpy as np

from protocol import errors
from protocol.contract import cv_ids as ids
from dsp_side.operators.cv.common import (BORDERS, DST, FILTER_BORDERS, GRAY, PACKED8, SRC, anchor_in, bind,
                                          border_param, kernel_list, opencv, same_format, same_size, size_param,
                                          store)

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


_COEFFS = {"type": "float_list", "doc": "kernel coefficients"}


def register(registry) -> None:
    fb = border_param(FILTER_BORDERS)
    anchor = {"type": "int_list", "len": 2, "min": -1, "default": [-1, -1], "doc": "[x, y]; -1,-1 = centre"}
    delta = {"type": "float", "default": 0.0, "doc": "added to every result"}
    registry.register(ids.GAUSSIAN_BLUR, "cv.gaussianBlur", gaussian_blur, inputs=1, outputs=1, params={
        "src": SRC, "dst": DST, "ksize": size_param("kernel size, odd", [5, 5], odd=True),
        "sigma_x": {"type": "float", "min": 0.0, "max": 1000.0, "default": 0.0},
        "sigma_y": {"type": "float", "min": 0.0, "max": 1000.0, "default": 0.0}, "border": fb})
    registry.register(ids.BOX_FILTER, "cv.boxFilter", box_filter, inputs=1, outputs=1, params={
        "src": SRC, "dst": DST, "ksize": size_param("kernel size", [3, 3]),
        "normalize": {"type": "bool", "default": True}, "anchor": anchor, "border": fb})
    registry.register(ids.MEDIAN_BLUR, "cv.medianBlur", median_blur, inputs=1, outputs=1, params={
        "src": SRC, "dst": DST, "ksize": {"type": "int", "min": 1, "max": 255, "odd": True, "default": 3}})
    registry.register(ids.BILATERAL_FILTER, "cv.bilateralFilter", bilateral_filter, inputs=1, outputs=1, params={
        "src": SRC, "dst": DST, "d": {"type": "int", "min": 1, "max": 31, "default": 5},
        "sigma_color": {"type": "float", "min": 0.0, "max": 1e6, "default": 50.0},
        "sigma_space": {"type": "float", "min": 0.0, "max": 1e6, "default": 50.0},
        "border": border_param(FILTER_BORDERS + ["wrap"])})
    registry.register(ids.FILTER2D, "cv.filter2D", filter2d, inputs=1, outputs=1, params={
        "src": SRC, "dst": DST, "kernel": _COEFFS, "ksize": size_param("kernel size", None),
        "anchor": anchor, "delta": delta, "border": fb})
    registry.register(ids.SEP_FILTER2D, "cv.sepFilter2D", sep_filter2d, inputs=1, outputs=1, params={
        "src": SRC, "dst": DST, "kernel_x": dict(_COEFFS, doc="row kernel (1..255 coefficients)"),
        "kernel_y": dict(_COEFFS, doc="column kernel (1..255 coefficients)"),
        "anchor": anchor, "delta": delta, "border": fb})
    registry.register(ids.SOBEL, "cv.sobel", sobel, inputs=1, outputs=1, params={
        "src": SRC, "dst": DST, "dx": {"type": "int", "min": 0, "max": 2, "default": 1},
        "dy": {"type": "int", "min": 0, "max": 2, "default": 0},
        "ksize": {"type": "int", "choices": [-1, 1, 3, 5, 7], "default": 3},
        "scale": {"type": "float", "default": 1.0}, "delta": delta, "border": fb})

"""One typed function per CV operator: ``cv.gaussian_blur(soc, src, dst, ksize=(5, 5), sigma_x=1.2)``.

Every function takes ``soc`` (an ``arm_side.Soc``), its images (``arm_side.cv.Image``)
and the operator's parameters with OpenCV's meaning, plus these keywords:

- ``core`` (CORE_ANY, CORE_0, CORE_1), ``priority`` (0..255): where and how urgently it runs;
- ``timeout_ms``: how long to wait for the result;
- ``wait=False``: return the submitted ``Task`` at once instead of its result.

They return the operator's result values (a dict, often empty). Parameters are
validated on the DSP: a bad one raises ``errors.InvalidArgument`` (-6000001)
with a message naming it; submission errors raise as ``Soc.rpc`` does.
"""
from __future__ import annotations

from typing import Any, Sequence

from protocol.constants import Core
from arm_side.cv.image import Image
from protocol.contract import cv_ids as ids


def run(soc, op_id: int, inputs: Sequence[tuple[str, Image]], outputs: Sequence[tuple[str, Image]],
        params: dict, *, core: int = Core.ANY, priority: int = 0, timeout_ms: float = 10000,
        wait: bool = True) -> Any:
    """Submit one CV operator: image descriptors go in ``params`` by name, their buffers in order."""
    params = dict(params)
    in_bufs, out_bufs = [], []
    for bufs, images in ((in_bufs, inputs), (out_bufs, outputs)):
        for name, img in images:
            params[name] = img.desc()
            bufs.extend(img.mems)
    task = soc.rpc(op_id, inputs=in_bufs, outputs=out_bufs, params=params, core=core, priority=priority)
    return task.wait(timeout_ms) if wait else task


def _pair(soc, op_id, src, dst, params, kw):
    return run(soc, op_id, [("src", src)], [("dst", dst)], params, **kw)


def _ints(v) -> list[int]:
    return [int(x) for x in v]


def _floats(v) -> list[float]:
    return [float(x) for x in (v.ravel() if hasattr(v, "ravel") else v)]


# --- filters ------------------------------------------------------------------------------

def gaussian_blur(soc, src: Image, dst: Image, ksize=(5, 5), sigma_x: float = 0.0, sigma_y: float = 0.0,
                  border: str = "reflect101", **kw) -> dict:
    """cv::GaussianBlur; ksize odd [width, height]; sigma 0 = from ksize."""
    return _pair(soc, ids.GAUSSIAN_BLUR, src, dst, {"ksize": _ints(ksize), "sigma_x": float(sigma_x),
                                                     "sigma_y": float(sigma_y), "border": border}, kw)


def box_filter(soc, src: Image, dst: Image, ksize=(3, 3), normalize: bool = True, anchor=(-1, -1),
               border: str = "reflect101", **kw) -> dict:
    """cv::boxFilter (same depth)."""
    return _pair(soc, ids.BOX_FILTER, src, dst, {"ksize": _ints(ksize), "normalize": bool(normalize),
                                                  "anchor": _ints(anchor), "border": border}, kw)


def median_blur(soc, src: Image, dst: Image, ksize: int = 3, **kw) -> dict:
    """cv::medianBlur; ksize odd."""
    return _pair(soc, ids.MEDIAN_BLUR, src, dst, {"ksize": int(ksize)}, kw)


def bilateral_filter(soc, src: Image, dst: Image, d: int = 5, sigma_color: float = 50.0,
                     sigma_space: float = 50.0, border: str = "reflect101", **kw) -> dict:
    """cv::bilateralFilter."""
    return _pair(soc, ids.BILATERAL_FILTER, src, dst, {"d": int(d), "sigma_color": float(sigma_color),
                                                        "sigma_space": float(sigma_space), "border": border}, kw)


def filter2d(soc, src: Image, dst: Image, kernel, anchor=(-1, -1), delta: float = 0.0,
             border: str = "reflect101", **kw) -> dict:
    """cv::filter2D with a 2-D kernel (rows x cols array-like); dst depth from dst's format."""
    rows = [list(r) for r in kernel]
    return _pair(soc, ids.FILTER2D, src, dst, {"kernel": _floats([v for r in rows for v in r]),
                                                "ksize": [len(rows[0]), len(rows)], "anchor": _ints(anchor),
                                                "delta": float(delta), "border": border}, kw)


def sep_filter2d(soc, src: Image, dst: Image, kernel_x, kernel_y, anchor=(-1, -1), delta: float = 0.0,
                 border: str = "reflect101", **kw) -> dict:
    """cv::sepFilter2D; dst depth from dst's format."""
    return _pair(soc, ids.SEP_FILTER2D, src, dst, {"kernel_x": _floats(kernel_x), "kernel_y": _floats(kernel_y),
                                                    "anchor": _ints(anchor), "delta": float(delta),
                                                    "border": border}, kw)


def sobel(soc, src: Image, dst: Image, dx: int = 1, dy: int = 0, ksize: int = 3, scale: float = 1.0,
          delta: float = 0.0, border: str = "reflect101", **kw) -> dict:
    """cv::Sobel (ksize -1 = Scharr); dst S16, F32 or 8-bit."""
    return _pair(soc, ids.SOBEL, src, dst, {"dx": int(dx), "dy": int(dy), "ksize": int(ksize),
                                             "scale": float(scale), "delta": float(delta), "border": border}, kw)


# --- morphology, features, intensity ------------------------------------------------------

def dilate(soc, src: Image, dst: Image, ksize=(3, 3), shape: str = "rect", anchor=(-1, -1),
           iterations: int = 1, border: str = "constant", **kw) -> dict:
    """cv::dilate with a rect/cross/ellipse element."""
    return _pair(soc, ids.DILATE, src, dst, {"ksize": _ints(ksize), "shape": shape, "anchor": _ints(anchor),
                                              "iterations": int(iterations), "border": border}, kw)


def erode(soc, src: Image, dst: Image, ksize=(3, 3), shape: str = "rect", anchor=(-1, -1),
          iterations: int = 1, border: str = "constant", **kw) -> dict:
    """cv::erode with a rect/cross/ellipse element."""
    return _pair(soc, ids.ERODE, src, dst, {"ksize": _ints(ksize), "shape": shape, "anchor": _ints(anchor),
                                             "iterations": int(iterations), "border": border}, kw)


def canny(soc, src: Image, dst: Image, threshold1: float = 100.0, threshold2: float = 200.0,
          aperture_size: int = 3, l2_gradient: bool = False, **kw) -> dict:
    """cv::Canny."""
    return _pair(soc, ids.CANNY, src, dst, {"threshold1": float(threshold1), "threshold2": float(threshold2),
                                             "aperture_size": int(aperture_size),
                                             "l2_gradient": bool(l2_gradient)}, kw)


def corner_harris(soc, src: Image, dst: Image, block_size: int = 2, ksize: int = 3, k: float = 0.04,
                  border: str = "reflect101", **kw) -> dict:
    """cv::cornerHarris into an F32 image."""
    return _pair(soc, ids.CORNER_HARRIS, src, dst, {"block_size": int(block_size), "ksize": int(ksize),
                                                     "k": float(k), "border": border}, kw)


def threshold(soc, src: Image, dst: Image, thresh: float = 127.0, maxval: float = 255.0, type: str = "binary",
              method: str = "fixed", **kw) -> dict:
    """cv::threshold; returns {"threshold": level used} (computed for otsu/triangle)."""
    return _pair(soc, ids.THRESHOLD, src, dst, {"thresh": float(thresh), "maxval": float(maxval), "type": type,
                                                 "method": method}, kw)


def equalize_hist(soc, src: Image, dst: Image, **kw) -> dict:
    """cv::equalizeHist."""
    return _pair(soc, ids.EQUALIZE_HIST, src, dst, {}, kw)


def integral(soc, src: Image, dst: Image, **kw) -> dict:
    """cv::integral; dst is (w+1) x (h+1), S32 or F32."""
    return _pair(soc, ids.INTEGRAL, src, dst, {}, kw)


def cvt_color(soc, src: Image, dst: Image, code: str, chroma: str = "top_left", **kw) -> dict:
    """RGB2GRAY, BGR2GRAY (cv::cvtColor), RGB2NV12, BGR2NV12 (BT.601 limited range)."""
    return _pair(soc, ids.CVT_COLOR, src, dst, {"code": code, "chroma": chroma}, kw)


# --- geometry ------------------------------------------------------------------------------

def flip(soc, src: Image, dst: Image, flip_code: int = 1, **kw) -> dict:
    """cv::flip: 0 vertical, 1 horizontal, -1 both."""
    return _pair(soc, ids.FLIP, src, dst, {"flip_code": int(flip_code)}, kw)


def rotate(soc, src: Image, dst: Image, rotate_code: str = "90cw", **kw) -> dict:
    """cv::rotate: "90cw", "180", "90ccw"."""
    return _pair(soc, ids.ROTATE, src, dst, {"rotate_code": rotate_code}, kw)


def transpose(soc, src: Image, dst: Image, **kw) -> dict:
    """cv::transpose."""
    return _pair(soc, ids.TRANSPOSE, src, dst, {}, kw)


def resize(soc, src: Image, dst: Image, interpolation: str = "linear", **kw) -> dict:
    """cv::resize of the src region to the dst region's size."""
    return _pair(soc, ids.RESIZE, src, dst, {"interpolation": interpolation}, kw)


def roi_resize(soc, src: Image, dst: Image, roi, keep_aspect: bool = False, interpolation: str = "linear",
               pad_value=None, **kw) -> dict:
    """Crop ``roi`` (left, top, right, bottom inclusive) and scale it into dst; returns {"rect": [x, y, w, h]}."""
    params = {"roi": _ints(roi), "keep_aspect": bool(keep_aspect), "interpolation": interpolation}
    if pad_value is not None:
        params["pad_value"] = _ints(pad_value)
    return _pair(soc, ids.ROI_RESIZE, src, dst, params, kw)


def pyr_down(soc, src: Image, dst: Image, **kw) -> dict:
    """cv::pyrDown; dst region about half the src region."""
    return _pair(soc, ids.PYR_DOWN, src, dst, {}, kw)


def pyr_up(soc, src: Image, dst: Image, **kw) -> dict:
    """cv::pyrUp; dst region twice the src region."""
    return _pair(soc, ids.PYR_UP, src, dst, {}, kw)


def warp_affine(soc, src: Image, dst: Image, matrix, interpolation: str = "linear", inverse_map: bool = False,
                border: str = "constant", border_value: float = 0.0, **kw) -> dict:
    """cv::warpAffine by a 2x3 matrix."""
    return _pair(soc, ids.WARP_AFFINE, src, dst, {"matrix": _floats(_flat(matrix)), "interpolation": interpolation,
                                                   "inverse_map": bool(inverse_map), "border": border,
                                                   "border_value": float(border_value)}, kw)


def warp_perspective(soc, src: Image, dst: Image, matrix, interpolation: str = "linear",
                     inverse_map: bool = False, border: str = "constant", border_value: float = 0.0, **kw) -> dict:
    """cv::warpPerspective by a 3x3 matrix."""
    return _pair(soc, ids.WARP_PERSPECTIVE, src, dst, {"matrix": _floats(_flat(matrix)),
                                                        "interpolation": interpolation,
                                                        "inverse_map": bool(inverse_map), "border": border,
                                                        "border_value": float(border_value)}, kw)


def remap(soc, src: Image, map_x: Image, map_y: Image, dst: Image, interpolation: str = "linear",
          border: str = "constant", border_value: float = 0.0, **kw) -> dict:
    """cv::remap with F32 coordinate maps of dst's size."""
    return run(soc, ids.REMAP, [("src", src), ("map_x", map_x), ("map_y", map_y)], [("dst", dst)],
               {"interpolation": interpolation, "border": border, "border_value": float(border_value)}, **kw)


def _flat(matrix) -> list:
    return [v for row in matrix for v in (row if hasattr(row, "__iter__") else [row])]

"""Geometric operators: flip, rotate, transpose, resize, roiResize, pyrDown, pyrUp,
warpAffine, warpPerspective, remap (OpenCV kernels).

Per-plane operators (flip, rotate, transpose, resize, roiResize, pyrDown, pyrUp)
also take NV12 / NV12_SEPARATE: the Y plane and the interleaved UV plane (half
size, two channels) are transformed alike, which is what the operator means on
a 4:2:0 image.
"""
from __future__ import annotations

import cv2
import numpy as np

from protocol import errors
from protocol.contract import cv_ops as cv, image_formats as formats
from dsp_side.operators.cv.common import (ALL_PIXELS, BORDERS, GEOMETRY, INTERPOLATIONS, bind, opencv, same_format,
                                          same_size, store)
from protocol.contract.image_formats import ImageDesc


def _pair(op: str, inputs, outputs, src, dst, accepted=GEOMETRY):
    """(src image, src planes, dst image, dst planes) of the same format family."""
    ((s, sp),) = bind(op, inputs, [("src", src, accepted)])
    ((d, dp),) = bind(op, outputs, [("dst", dst, accepted)])
    same_format(op, s, d)
    return s, sp, d, dp


def _dst_size(op: str, d: ImageDesc, want: tuple[int, int]) -> None:
    if d.size != want:
        raise errors.InvalidArgument(f"{op}: dst region must be {want[0]}x{want[1]}, got {d.size[0]}x{d.size[1]}")


def flip(ctx, inputs, outputs, src, dst, flip_code):
    """Mirror (cv::flip): 0 around the x axis, 1 around the y axis, -1 both."""
    s, sp, d, dp = _pair("flip", inputs, outputs, src, dst)
    same_size("flip", s, d)
    for sv, dv in zip(sp, dp):
        store(dv, cv2.flip(sv, flip_code, dst=dv))


ROTATIONS = {"90cw": cv2.ROTATE_90_CLOCKWISE, "180": cv2.ROTATE_180, "90ccw": cv2.ROTATE_90_COUNTERCLOCKWISE}


def rotate(ctx, inputs, outputs, src, dst, rotate_code):
    """Rotation by a multiple of 90 degrees (cv::rotate)."""
    s, sp, d, dp = _pair("rotate", inputs, outputs, src, dst)
    w, h = s.size
    _dst_size("rotate", d, (w, h) if rotate_code == "180" else (h, w))
    for sv, dv in zip(sp, dp):
        store(dv, cv2.rotate(sv, ROTATIONS[rotate_code], dst=dv))


def transpose(ctx, inputs, outputs, src, dst):
    """Swap rows and columns (cv::transpose)."""
    s, sp, d, dp = _pair("transpose", inputs, outputs, src, dst)
    _dst_size("transpose", d, (s.size[1], s.size[0]))
    for sv, dv in zip(sp, dp):
        store(dv, cv2.transpose(sv, dst=dv))


def _resize_planes(sp, dp, interpolation: str) -> None:
    for sv, dv in zip(sp, dp):
        store(dv, cv2.resize(sv, (dv.shape[1], dv.shape[0]), dst=dv, interpolation=INTERPOLATIONS[interpolation]))


def resize(ctx, inputs, outputs, src, dst, interpolation):
    """Scale the src region to the dst region's size (cv::resize)."""
    _, sp, _, dp = _pair("resize", inputs, outputs, src, dst)
    with opencv("resize"):
        _resize_planes(sp, dp, interpolation)


def letterbox(src_size: tuple[int, int], dst_size: tuple[int, int], even: bool) -> tuple[int, int, int, int]:
    """(x, y, w, h) of the largest rectangle of src's aspect ratio centred in dst
    (even coordinates and sizes when ``even``, for YUV 4:2:0)."""
    scale = min(dst_size[0] / src_size[0], dst_size[1] / src_size[1])
    w = max(1, min(dst_size[0], int(round(src_size[0] * scale))))
    h = max(1, min(dst_size[1], int(round(src_size[1] * scale))))
    if even:
        w, h = max(2, w - w % 2), max(2, h - h % 2)
    x, y = (dst_size[0] - w) // 2, (dst_size[1] - h) // 2
    if even:
        x, y = x - x % 2, y - y % 2
    return x, y, w, h


def _fill(dv: np.ndarray, value) -> None:
    """``dv[...] = value`` for one pixel value. A multi-channel pixel goes to one row first and the
    row to every row: numpy broadcasts a 2- or 3-value pixel with an inner loop of that length
    (0.95 ms for a 640x640 NV12 UV plane, 9 µs this way; the same bytes)."""
    if dv.ndim == 3 and dv.size:
        row = np.empty(dv.shape[1:], dv.dtype)
        row[...] = value
        dv[...] = row
    else:
        dv[...] = value


def roi_resize(ctx, inputs, outputs, src, dst, roi, keep_aspect, interpolation, pad_value):
    """Crop ``roi`` [left, top, right, bottom] (inclusive, within the src region) and scale it
    into the dst region; with keep_aspect, centred and padded with ``pad_value``."""
    op = "roiResize"
    s, sp, d, dp = _pair(op, inputs, outputs, src, dst)
    crop = formats.parse("roi", {"format": s.format, "width": s.size[0], "height": s.size[1], "roi": roi}).roi
    left, top, right, bottom = crop
    yuv = s.format in formats.YUV420
    channels = 3 if yuv else s.channels
    if pad_value is not None and len(pad_value) != channels:
        raise errors.InvalidArgument(f"{op}: pad_value needs {channels} values for {s.format}, got {len(pad_value)}")
    pad = pad_value if pad_value is not None else ([0, 128, 128] if yuv else [0] * channels)
    src_planes = [sp[0][top:bottom + 1, left:right + 1]]
    if yuv:
        src_planes.append(sp[1][top // 2:(bottom + 1) // 2, left // 2:(right + 1) // 2])
    if not keep_aspect:
        with opencv(op):
            _resize_planes(src_planes, dp, interpolation)
        return {"rect": [0, 0, d.size[0], d.size[1]]}
    x, y, w, h = letterbox((right - left + 1, bottom - top + 1), d.size, yuv)
    pads = [pad[0], pad[1:]] if yuv else [pad if channels > 1 else pad[0]]
    inner = []
    for i, (dv, value) in enumerate(zip(dp, pads)):
        k = 2 if (yuv and i == 1) else 1
        _fill(dv, value)                                 # padding first: the image is drawn over it
        inner.append(dv[y // k:(y + h) // k, x // k:(x + w) // k])
    with opencv(op):
        _resize_planes(src_planes, inner, interpolation)
    return {"rect": [x, y, w, h]}


def _pyr_check(op: str, sw: int, sh: int, dw: int, dh: int, up: bool) -> None:
    if up:
        ok = abs(dw - 2 * sw) <= dw % 2 and abs(dh - 2 * sh) <= dh % 2
        rule = "2 x src (or 2 x src + 1)"
    else:
        ok = abs(2 * dw - sw) <= 2 and abs(2 * dh - sh) <= 2
        rule = "(src + 1) / 2, within 1 pixel"
    if not ok:
        raise errors.InvalidArgument(f"{op}: dst region {dw}x{dh} does not fit src {sw}x{sh}; it must be {rule}")


def _pyr(op: str, fn, up: bool, inputs, outputs, src, dst):
    _, sp, _, dp = _pair(op, inputs, outputs, src, dst)
    for sv, dv in zip(sp, dp):      # checked per plane: a YUV 4:2:0 chroma plane must fit too
        _pyr_check(op, sv.shape[1], sv.shape[0], dv.shape[1], dv.shape[0], up)
    with opencv(op):
        for sv, dv in zip(sp, dp):
            store(dv, fn(sv, dst=dv, dstsize=(dv.shape[1], dv.shape[0])))


def pyr_down(ctx, inputs, outputs, src, dst):
    """Gaussian pyramid step down (cv::pyrDown, 5x5 kernel, BORDER_REFLECT_101)."""
    _pyr("pyrDown", cv2.pyrDown, False, inputs, outputs, src, dst)


def pyr_up(ctx, inputs, outputs, src, dst):
    """Gaussian pyramid step up (cv::pyrUp, BORDER_REFLECT_101)."""
    _pyr("pyrUp", cv2.pyrUp, True, inputs, outputs, src, dst)


def _loops_forever(op: str, src_w: int, src_h: int, interpolation: str, border: str) -> None:
    """OpenCV's bicubic remap with BORDER_REFLECT_101 never returns on a source 1 pixel wide or
    high (seen with opencv-python-headless 4.x: warpAffine, warpPerspective and remap alike);
    refuse it (InvalidArgument) rather than hang the core until its watchdog fires."""
    if interpolation == "cubic" and border == "reflect101" and min(src_w, src_h) < 2:
        raise errors.InvalidArgument(f"{op}: cubic interpolation with a reflect101 border needs a src of at least "
                                     f"2x2 pixels, got {src_w}x{src_h} (use another border or interpolation)")


#: (rows, matrix values) -> (the float64 matrix, read-only; whether it is singular): a task's matrix
#: is the same from task to task, and its determinant cost more than the rest of the checks
_MATRICES: dict = {}
MATRICES_MAX = 64


def _matrix(values: list, rows: int) -> tuple[np.ndarray, bool]:
    key = (rows, tuple(values))
    hit = _MATRICES.get(key)
    if hit is None:
        matrix = np.asarray(values, np.float64).reshape(rows, 3)
        matrix.flags.writeable = False
        hit = matrix, bool(abs(np.linalg.det(matrix if rows == 3 else matrix[:, :2])) < 1e-12)
        if len(_MATRICES) >= MATRICES_MAX:
            del _MATRICES[next(iter(_MATRICES))]
        _MATRICES[key] = hit
    return hit


def _warp(op: str, fn, values: list, rows: int, inputs, outputs, src, dst, interpolation, inverse_map, border,
          border_value):
    s, (sv,), d, (dv,) = _pair(op, inputs, outputs, src, dst, ALL_PIXELS)
    _loops_forever(op, s.size[0], s.size[1], interpolation, border)
    matrix, singular = _matrix(values, rows)
    if not inverse_map and singular:
        raise errors.InvalidArgument(f"{op}: matrix is singular and cannot be inverted (set inverse_map if it "
                                     "already maps dst to src)")
    flags = INTERPOLATIONS[interpolation] | (cv2.WARP_INVERSE_MAP if inverse_map else 0)
    with opencv(op):
        store(dv, fn(sv, matrix, d.size, dst=dv, flags=flags, borderMode=BORDERS[border],
                     borderValue=(border_value,) * 4))


def warp_affine(ctx, inputs, outputs, src, dst, matrix, interpolation, inverse_map, border, border_value):
    """Affine warp (cv::warpAffine) by a 2x3 matrix given row-major (6 values)."""
    _warp("warpAffine", cv2.warpAffine, matrix, 2, inputs, outputs, src, dst,
          interpolation, inverse_map, border, border_value)


def warp_perspective(ctx, inputs, outputs, src, dst, matrix, interpolation, inverse_map, border, border_value):
    """Perspective warp (cv::warpPerspective) by a 3x3 matrix given row-major (9 values)."""
    _warp("warpPerspective", cv2.warpPerspective, matrix, 3, inputs, outputs,
          src, dst, interpolation, inverse_map, border, border_value)


def remap(ctx, inputs, outputs, src, map_x, map_y, dst, interpolation, border, border_value):
    """Generic remap (cv::remap): dst(x, y) = src(map_x(x, y), map_y(x, y)); maps are F32 images."""
    op = "remap"
    (s, (sv,)), (mx, (mxv,)), (my, (myv,)) = bind(op, inputs, [
        ("src", src, ALL_PIXELS), ("map_x", map_x, ("F32",)), ("map_y", map_y, ("F32",))])
    ((d, (dv,)),) = bind(op, outputs, [("dst", dst, ALL_PIXELS)])
    same_format(op, s, d)
    same_size(op, d, mx)
    same_size(op, d, my)
    _loops_forever(op, s.size[0], s.size[1], interpolation, border)
    with opencv(op):
        store(dv, cv2.remap(sv, mxv, myv, INTERPOLATIONS[interpolation], dst=dv, borderMode=BORDERS[border],
                            borderValue=(border_value,) * 4))


def register(registry) -> None:
    for entry, fn in ((cv.FLIP, flip), (cv.ROTATE, rotate), (cv.TRANSPOSE, transpose), (cv.RESIZE, resize),
                      (cv.ROI_RESIZE, roi_resize), (cv.PYR_DOWN, pyr_down), (cv.PYR_UP, pyr_up),
                      (cv.WARP_AFFINE, warp_affine), (cv.WARP_PERSPECTIVE, warp_perspective), (cv.REMAP, remap)):
        registry.bind(entry, fn)

"""The CV parity cases: each runs one operator through the ARM API and computes the
expected result with OpenCV called in-process on a contiguous copy of the same region.

``ref`` receives the source region as read_image returns it ((H*3/2) x W for NV12)
and returns the expected destination region. ``tol`` is the allowed absolute
difference; 0 wherever the DSP runs the same OpenCV function.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import cv2
import numpy as np

from arm_side import cv
from vdsp_sim.samples import cv_inputs

W, H = 64, 48


@dataclasses.dataclass
class Case:
    id: str
    src_format: str
    dst_format: str
    call: Callable          # (soc, src, dst) -> result dict
    ref: Callable           # src region -> expected dst region
    out_size: Callable = lambda w, h: (w, h)    # noqa: E731 - dst region size from the src region size
    tol: float = 0
    check_result: Callable | None = None        # (result dict, src region) -> None


def source(fmt: str, w: int = W, h: int = H) -> np.ndarray:
    """Scene pixels in the layout of ``fmt`` (deterministic)."""
    bgr = cv_inputs.scene(w, h, seed=5)
    if fmt in ("Y", "U8"):
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    if fmt == "BGR":
        return bgr
    if fmt in ("RGB", "YUV444"):
        return bgr[..., ::-1].copy()
    if fmt in ("NV12", "NV12_SEPARATE"):
        return cv_inputs.nv12_from_bgr(bgr)
    if fmt == "F32":
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY).astype(np.float32) / 7.0
    raise ValueError(fmt)


def planes(nv12: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = nv12.shape[0] * 2 // 3
    return nv12[:h].copy(), nv12[h:].reshape(h // 2, -1, 2).copy()


def per_plane(fn):
    """A reference applying ``fn`` to the Y and UV planes of NV12 and re-packing them."""
    def ref(nv12):
        y, uv = planes(nv12)
        oy, ouv = fn(y), fn(uv)
        return np.vstack([oy, ouv.reshape(ouv.shape[0], -1)])
    return ref


def i420_to_nv12(i420: np.ndarray, w: int, h: int) -> np.ndarray:
    flat = i420.ravel()                 # U and V planes are (h/2) x (w/2) each, right after Y
    u = flat[h * w:h * w + h * w // 4].reshape(h // 2, w // 2)
    v = flat[h * w + h * w // 4:].reshape(h // 2, w // 2)
    return np.vstack([i420[:h], np.dstack([u, v]).reshape(h // 2, w)])


def remap_maps(w: int, h: int) -> tuple[np.ndarray, np.ndarray]:
    """A barrel-like distortion of a w x h destination (F32 maps), sampling a w x h source."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    cx, cy = (w - 1) / 2, (h - 1) / 2
    r2 = ((xx - cx) / w) ** 2 + ((yy - cy) / h) ** 2
    return (cx + (xx - cx) * (1 + 0.3 * r2)).astype(np.float32), (cy + (yy - cy) * (1 + 0.3 * r2)).astype(np.float32)


ROT = cv2.getRotationMatrix2D((20.0, 15.0), 17.0, 0.9)
PERSP = cv2.getPerspectiveTransform(np.float32([[0, 0], [39, 0], [39, 29], [0, 29]]),
                                    np.float32([[3, 2], [36, 0], [39, 29], [1, 26]]))
LAPLACE = [[0, 1, 0], [1, -4, 1], [0, 1, 0]]
SHARPEN = [[-0.1, -0.2, -0.1], [-0.2, 2.2, -0.2], [-0.1, -0.2, -0.1]]
SEP_X, SEP_Y = [0.25, 0.5, 0.25], [-1.0, 0.0, 1.0]
GAMMA = [round(255 * (v / 255) ** 0.5) for v in range(256)]


def _letterbox_ref(region, roi, dw, dh):
    l, t, r, b = roi
    crop = region[t:b + 1, l:r + 1]
    out = np.zeros((dh, dw), np.uint8)
    scale = min(dw / crop.shape[1], dh / crop.shape[0])
    w, h = int(round(crop.shape[1] * scale)), int(round(crop.shape[0] * scale))
    x, y = (dw - w) // 2, (dh - h) // 2
    out[y:y + h, x:x + w] = cv2.resize(crop, (w, h), interpolation=cv2.INTER_LINEAR)
    return out


def _even(n: int) -> int:
    return n - n % 2


def pack(y: np.ndarray, uv: np.ndarray) -> np.ndarray:
    return np.vstack([y, uv.reshape(uv.shape[0], -1)])


def _resize_nv12_ref(r):
    y, uv = planes(r)
    ow, oh = _even(y.shape[1] * 3 // 4), _even(y.shape[0] * 3 // 4)
    return pack(cv2.resize(y, (ow, oh)), cv2.resize(uv, (ow // 2, oh // 2)))


def _pyr_down_nv12_ref(r):
    y, uv = planes(r)
    ow, oh = _even(y.shape[1] // 2), _even(y.shape[0] // 2)
    return pack(cv2.pyrDown(y, dstsize=(ow, oh)), cv2.pyrDown(uv, dstsize=(ow // 2, oh // 2)))


def _roi_resize_nv12_ref(r):
    y, uv = planes(r)
    return pack(cv2.resize(y[2:22, 4:28].copy(), (32, 16)), cv2.resize(uv[1:11, 2:14].copy(), (16, 8)))


def _check_otsu(result, region):
    expect, _ = cv2.threshold(region, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
    assert result["threshold"] == expect


CASES = [
    Case("bilateralFilter", "Y", "Y", lambda s, a, b: cv.bilateral_filter(s, a, b, d=5, sigma_color=30, sigma_space=5),
         lambda r: cv2.bilateralFilter(r, 5, 30, 5)),
    Case("bilateralFilter-rgb", "RGB", "RGB", lambda s, a, b: cv.bilateral_filter(s, a, b, d=3, sigma_color=20,
                                                                                  sigma_space=3, border="replicate"),
         lambda r: cv2.bilateralFilter(r, 3, 20, 3, borderType=cv2.BORDER_REPLICATE)),
    Case("boxFilter", "Y", "Y", lambda s, a, b: cv.box_filter(s, a, b, ksize=(5, 3)),
         lambda r: cv2.boxFilter(r, -1, (5, 3))),
    Case("canny", "Y", "Y", lambda s, a, b: cv.canny(s, a, b, 40, 120),
         lambda r: cv2.Canny(r, 40, 120)),
    Case("cvtColor-rgb2gray", "RGB", "Y", lambda s, a, b: cv.cvt_color(s, a, b, "RGB2GRAY"),
         lambda r: cv2.cvtColor(r, cv2.COLOR_RGB2GRAY)),
    Case("cvtColor-bgr2gray", "BGR", "U8", lambda s, a, b: cv.cvt_color(s, a, b, "BGR2GRAY"),
         lambda r: cv2.cvtColor(r, cv2.COLOR_BGR2GRAY)),
    # tolerance 1: OpenCV's encoder uses 20-bit fixed-point coefficients rounded to 3 decimals
    # (0.257, 0.504, 0.098 ...) where ours are the exact BT.601 ones; rounding may differ by one.
    Case("cvtColor-bgr2nv12", "BGR", "NV12", lambda s, a, b: cv.cvt_color(s, a, b, "BGR2NV12"),
         lambda r: i420_to_nv12(cv2.cvtColor(r, cv2.COLOR_BGR2YUV_I420), r.shape[1], r.shape[0]), tol=1),
    Case("cvtColor-rgb2nv12-separate", "RGB", "NV12_SEPARATE", lambda s, a, b: cv.cvt_color(s, a, b, "RGB2NV12"),
         lambda r: i420_to_nv12(cv2.cvtColor(r, cv2.COLOR_RGB2YUV_I420), r.shape[1], r.shape[0]), tol=1),
    Case("dilate", "Y", "Y", lambda s, a, b: cv.dilate(s, a, b, ksize=(5, 5), shape="ellipse"),
         lambda r: cv2.dilate(r, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5)))),
    Case("equalizeHist", "Y", "Y", lambda s, a, b: cv.equalize_hist(s, a, b), cv2.equalizeHist),
    Case("erode", "Y", "Y", lambda s, a, b: cv.erode(s, a, b, ksize=(3, 3), shape="cross", iterations=2),
         lambda r: cv2.erode(r, cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3)), iterations=2)),
    Case("filter2D-s16", "Y", "S16", lambda s, a, b: cv.filter2d(s, a, b, LAPLACE),
         lambda r: cv2.filter2D(r, cv2.CV_16S, np.float32(LAPLACE))),
    Case("filter2D", "Y", "Y", lambda s, a, b: cv.filter2d(s, a, b, SHARPEN, delta=3),
         lambda r: cv2.filter2D(r, -1, np.float32(SHARPEN), delta=3)),
    Case("flip-nv12", "NV12", "NV12", lambda s, a, b: cv.flip(s, a, b, -1), per_plane(lambda p: cv2.flip(p, -1))),
    Case("flip-bgr", "BGR", "BGR", lambda s, a, b: cv.flip(s, a, b, 0), lambda r: cv2.flip(r, 0)),
    Case("gaussianBlur", "Y", "Y", lambda s, a, b: cv.gaussian_blur(s, a, b, ksize=(5, 5), sigma_x=1.2),
         lambda r: cv2.GaussianBlur(r, (5, 5), 1.2)),
    Case("gaussianBlur-rgb", "RGB", "RGB", lambda s, a, b: cv.gaussian_blur(s, a, b, (3, 7), 2.0, 1.0, "reflect"),
         lambda r: cv2.GaussianBlur(r, (3, 7), 2.0, sigmaY=1.0, borderType=cv2.BORDER_REFLECT)),
    Case("integral", "Y", "S32", lambda s, a, b: cv.integral(s, a, b), lambda r: cv2.integral(r),
         out_size=lambda w, h: (w + 1, h + 1)),
    Case("medianBlur", "Y", "Y", lambda s, a, b: cv.median_blur(s, a, b, 5), lambda r: cv2.medianBlur(r, 5)),
    Case("pyrDown-nv12", "NV12", "NV12", lambda s, a, b: cv.pyr_down(s, a, b), _pyr_down_nv12_ref,
         out_size=lambda w, h: (_even(w // 2), _even(h // 2))),
    Case("pyrUp", "Y", "Y", lambda s, a, b: cv.pyr_up(s, a, b), cv2.pyrUp, out_size=lambda w, h: (2 * w, 2 * h)),
    Case("resize-nv12", "NV12", "NV12", lambda s, a, b: cv.resize(s, a, b), _resize_nv12_ref,
         out_size=lambda w, h: (_even(w * 3 // 4), _even(h * 3 // 4))),
    Case("resize-cubic", "Y", "Y", lambda s, a, b: cv.resize(s, a, b, "cubic"),
         lambda r: cv2.resize(r, (50, 70), interpolation=cv2.INTER_CUBIC), out_size=lambda w, h: (50, 70)),
    Case("roiResize", "Y", "Y", lambda s, a, b: cv.roi_resize(s, a, b, (4, 2, 27, 21), keep_aspect=True),
         lambda r: _letterbox_ref(r, (4, 2, 27, 21), 40, 24), out_size=lambda w, h: (40, 24)),
    Case("roiResize-nv12", "NV12", "NV12", lambda s, a, b: cv.roi_resize(s, a, b, (4, 2, 27, 21)),
         _roi_resize_nv12_ref, out_size=lambda w, h: (32, 16)),
    Case("rotate-nv12", "NV12", "NV12", lambda s, a, b: cv.rotate(s, a, b, "90cw"),
         per_plane(lambda p: cv2.rotate(p, cv2.ROTATE_90_CLOCKWISE)), out_size=lambda w, h: (h, w)),
    Case("rotate-180", "Y", "Y", lambda s, a, b: cv.rotate(s, a, b, "180"), lambda r: cv2.rotate(r, cv2.ROTATE_180)),
    Case("sepFilter2D-f32", "Y", "F32", lambda s, a, b: cv.sep_filter2d(s, a, b, SEP_X, SEP_Y),
         lambda r: cv2.sepFilter2D(r, cv2.CV_32F, np.float32(SEP_X), np.float32(SEP_Y))),
    Case("sobel", "Y", "S16", lambda s, a, b: cv.sobel(s, a, b, 1, 1, 3), lambda r: cv2.Sobel(r, cv2.CV_16S, 1, 1)),
    Case("sobel-scharr-f32", "Y", "F32", lambda s, a, b: cv.sobel(s, a, b, 0, 1, -1, scale=0.5),
         lambda r: cv2.Sobel(r, cv2.CV_32F, 0, 1, ksize=-1, scale=0.5)),
    Case("threshold-otsu", "Y", "Y", lambda s, a, b: cv.threshold(s, a, b, 0, 255, method="otsu"),
         lambda r: cv2.threshold(r, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)[1], check_result=_check_otsu),
    Case("threshold-f32", "F32", "F32", lambda s, a, b: cv.threshold(s, a, b, 12.5, 3.0, "trunc"),
         lambda r: cv2.threshold(r, 12.5, 3.0, cv2.THRESH_TRUNC)[1]),
    Case("transpose-rgb", "RGB", "RGB", lambda s, a, b: cv.transpose(s, a, b), cv2.transpose,
         out_size=lambda w, h: (h, w)),
    Case("transpose-nv12", "NV12", "NV12", lambda s, a, b: cv.transpose(s, a, b), per_plane(cv2.transpose),
         out_size=lambda w, h: (h, w)),
    Case("warpAffine", "Y", "Y", lambda s, a, b: cv.warp_affine(s, a, b, ROT, border_value=9),
         lambda r: cv2.warpAffine(r, ROT, (36, 28), borderValue=9), out_size=lambda w, h: (36, 28)),
    Case("warpPerspective", "BGR", "BGR", lambda s, a, b: cv.warp_perspective(s, a, b, PERSP, "cubic",
                                                                              border="replicate"),
         lambda r: cv2.warpPerspective(r, PERSP, (r.shape[1], r.shape[0]), flags=cv2.INTER_CUBIC,
                                       borderMode=cv2.BORDER_REPLICATE)),
    Case("cornerHarris", "Y", "F32", lambda s, a, b: cv.corner_harris(s, a, b, 2, 3, 0.04),
         lambda r: cv2.cornerHarris(r, 2, 3, 0.04)),
    Case("LUT-gamma", "Y", "Y", lambda s, a, b: cv.lut(s, a, b, GAMMA), lambda r: cv2.LUT(r, np.uint8(GAMMA))),
    Case("LUT-bgr", "BGR", "BGR", lambda s, a, b: cv.lut(s, a, b, GAMMA[::-1]),
         lambda r: cv2.LUT(r, np.uint8(GAMMA[::-1]))),
]

"""Colour conversion (cvtColor): RGB/BGR to gray (OpenCV) and to NV12 (our encoder).

The NV12 encoder is BT.601 limited range ("studio swing")::

    Y  = 16  + 219/255 * ( 0.299    R + 0.587    G + 0.114    B)
    Cb = 128 + 224/255 * (-0.168736 R - 0.331264 G + 0.5      B)
    Cr = 128 + 224/255 * ( 0.5      R - 0.418688 G - 0.081312 B)

rounded to nearest. Chroma is one (Cb, Cr) pair per 2x2 block, interleaved after
the Y plane; its ``chroma`` siting is ``top_left`` (the block's top-left pixel,
as OpenCV's RGB->I420 encoder samples it) or ``average`` (the mean of the 4 pixels).
"""
from __future__ import annotations

import cv2
import numpy as np

from protocol.contract import cv_ops as cv, image_formats as formats
from dsp_side.operators.cv.common import bind, opencv, same_size, store

_Y = np.array([0.299, 0.587, 0.114]) * 219 / 255
_CB = np.array([-0.168736, -0.331264, 0.5]) * 224 / 255
_CR = np.array([0.5, -0.418688, -0.081312]) * 224 / 255
# cv2.transform matrices on RGB pixels: [coefficients | offset]
_M_Y = np.hstack([_Y, [16.0]]).reshape(1, 4)
_M_UV = np.vstack([np.hstack([_CB, [128.0]]), np.hstack([_CR, [128.0]])])
_RGB_ORDER = {"RGB": slice(None), "BGR": slice(None, None, -1)}

CODES = {"RGB2GRAY": ("RGB", "gray"), "BGR2GRAY": ("BGR", "gray"),
         "RGB2NV12": ("RGB", "nv12"), "BGR2NV12": ("BGR", "nv12")}


def encode_nv12(rgb: np.ndarray, y_out: np.ndarray, uv_out: np.ndarray, order: str = "RGB",
                chroma: str = "top_left") -> None:
    """Write the NV12 planes of an H x W x 3 image (H, W even) into ``y_out`` (H x W)
    and ``uv_out`` (H/2 x W/2 x 2), any strides. ``order`` is RGB or BGR."""
    perm = [0, 1, 2] if order == "RGB" else [2, 1, 0]
    m_y = np.hstack([_M_Y[:, :3][:, perm], _M_Y[:, 3:]])
    m_uv = np.hstack([_M_UV[:, :3][:, perm], _M_UV[:, 3:]])
    # u8 -> u8 transform rounds to nearest and saturates; the Y plane is computed straight into place.
    store(y_out, cv2.transform(rgb, m_y, dst=y_out))
    if chroma == "top_left":
        store(uv_out, cv2.transform(np.ascontiguousarray(rgb[::2, ::2]), m_uv, dst=uv_out))
        return
    h, w = rgb.shape[0] // 2, rgb.shape[1] // 2
    mean = rgb.reshape(h, 2, w, 2, 3).mean(axis=(1, 3), dtype=np.float32)   # exact block means
    uv = cv2.transform(mean, m_uv.astype(np.float32))
    uv_out[...] = np.clip(np.floor(uv + 0.5), 0, 255)


def cvt_color(ctx, inputs, outputs, src, dst, code, chroma):
    """RGB/BGR -> gray (cv::cvtColor) or -> NV12 / NV12_SEPARATE (BT.601 limited range)."""
    op = "cvtColor"
    fmt, kind = CODES[code]
    ((s, (sv,)),) = bind(op, inputs, [("src", src, (fmt,))])
    out_formats = ("Y", "U8") if kind == "gray" else formats.YUV420
    ((d, dviews),) = bind(op, outputs, [("dst", dst, out_formats)])
    same_size(op, s, d)
    if kind == "gray":
        with opencv(op):
            store(dviews[0], cv2.cvtColor(sv, cv2.COLOR_RGB2GRAY if fmt == "RGB" else cv2.COLOR_BGR2GRAY,
                                          dst=dviews[0]))
        return
    # same_size with a YUV 4:2:0 dst (even-sized by formats.parse) makes the src region even too.
    with opencv(op):
        encode_nv12(sv, dviews[0], dviews[1], fmt, chroma)


def register(registry) -> None:
    registry.bind(cv.CVT_COLOR, cvt_color)

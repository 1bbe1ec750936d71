"""Pure tests (no SoC): image descriptors, strided views and the NV12 encoder."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from protocol.contract import image_formats as formats
from dsp_side.operators.cv.color import encode_nv12
from dsp_side.operators.cv.geometry import letterbox
from protocol import errors


def test_defaults_and_sizes():
    img = formats.parse("src", {"format": "RGB", "width": 10, "height": 4})
    assert (img.stride, img.row_bytes, img.size, img.has_roi) == (30, 30, (10, 4), False)
    nv12 = formats.parse("src", {"format": "NV12", "width": 8, "height": 4, "stride": 16})
    assert nv12.plane_bytes() == [4 * 16 + 16 + 8]
    sep = formats.parse("src", {"format": "NV12_SEPARATE", "width": 8, "height": 4, "stride": 16})
    assert sep.plane_bytes() == [3 * 16 + 8, 16 + 8] and sep.buffers == 2
    f32 = formats.parse("src", {"format": "F32", "width": 5, "height": 3, "stride": 24, "roi": [1, 1, 3, 2]})
    assert f32.plane_bytes() == [2 * 24 + 20] and f32.size == (3, 2)


def test_views_honour_stride_and_roi_and_leave_padding_alone():
    buf = np.full(3 * 16 + 12, 0xA5, np.uint8)          # 3 rows of 4 S16 pixels... stride 16
    img = formats.parse("x", {"format": "S16", "width": 6, "height": 3, "stride": 16, "roi": [1, 0, 4, 1]})
    (view,) = formats.planes(img, [buf])
    assert view.shape == (2, 4) and view.dtype == np.int16
    view[...] = 7
    rows = buf[:32].reshape(2, 16)
    assert (rows[:, 2:10].view(np.int16) == 7).all()
    assert (rows[:, :2] == 0xA5).all() and (rows[:, 10:] == 0xA5).all() and (buf[32:] == 0xA5).all()


def test_nv12_planes():
    buf = np.arange(6 * 10 + 2 * 10 + 4, dtype=np.uint8)
    img = formats.parse("x", {"format": "NV12", "width": 4, "height": 6, "stride": 10})
    y, uv = formats.planes(img, [buf])
    assert y.shape == (6, 4) and uv.shape == (3, 2, 2)
    assert y[1, 0] == 10 and uv[0, 0, 0] == 60 and uv[1, 1, 1] == 73


@pytest.mark.parametrize("desc, words", [
    ({"format": "Y", "width": 4, "height": 4, "stride": 3}, "stride must be in 4.."),
    ({"format": "U16", "width": 4, "height": 4, "stride": 9}, "multiple of the 2-byte"),
    ({"format": "NV12", "width": 4, "height": 3}, "even width and height"),
    ({"format": "Y", "width": 4, "height": 4, "roi": [0, 0, 4, 3]}, "not inside"),
    ({"format": "NV12", "width": 4, "height": 4, "roi": [0, 0, 2, 3]}, "even and end on odd"),
    ({"format": "Y", "width": True, "height": 4}, "width must be an integer"),
    ({"format": "Q", "width": 4, "height": 4}, "format 'Q'"),
])
def test_bad_descriptors(desc, words):
    with pytest.raises(errors.InvalidArgument, match=None) as exc:
        formats.parse("src", desc)
    assert words in exc.value.message and exc.value.message.startswith("src:")


def test_small_and_misaligned_buffers():
    img = formats.parse("dst", {"format": "F32", "width": 4, "height": 2})
    with pytest.raises(errors.InvalidArgument, match="too small"):
        formats.planes(img, [np.zeros(31, np.uint8)])
    with pytest.raises(errors.InvalidArgument, match="not aligned"):
        formats.planes(img, [np.zeros(40, np.uint8)[1:]])


def _opencv_nv12(rgb):
    h, w = rgb.shape[:2]
    flat = cv2.cvtColor(rgb, cv2.COLOR_RGB2YUV_I420).ravel()
    u = flat[h * w:h * w + h * w // 4].reshape(h // 2, w // 2)
    v = flat[h * w + h * w // 4:].reshape(h // 2, w // 2)
    return flat[:h * w].reshape(h, w), np.dstack([u, v])


@pytest.mark.parametrize("h, w", [(2, 2), (48, 64), (30, 40), (480, 500)])
def test_nv12_encoder_matches_opencv_i420_within_one(h, w):
    """Tolerance 1: OpenCV's 20-bit fixed-point coefficients are BT.601's rounded to 3 decimals."""
    rgb = np.random.default_rng(h * w).integers(0, 256, (h, w, 3), dtype=np.uint8)
    y, uv = np.zeros((h, w), np.uint8), np.zeros((h // 2, w // 2, 2), np.uint8)
    encode_nv12(rgb, y, uv, "RGB")
    ey, euv = _opencv_nv12(rgb)
    assert np.abs(y.astype(int) - ey).max() <= 1 and np.abs(uv.astype(int) - euv).max() <= 1
    assert (y == ey).mean() > 0.9                     # off by one only where rounding ties break differently
    y2, uv2 = np.zeros_like(y), np.zeros_like(uv)
    encode_nv12(rgb[..., ::-1].copy(), y2, uv2, "BGR")
    assert np.array_equal(y, y2) and np.array_equal(uv, uv2)


def test_nv12_known_colours():
    """Studio-swing reference values: black 16/128/128, white 235/128/128, pure red 81/90/240."""
    rgb = np.array([[[0, 0, 0], [0, 0, 0]], [[0, 0, 0], [0, 0, 0]]], np.uint8)
    for colour, expect in (((0, 0, 0), (16, 128, 128)), ((255, 255, 255), (235, 128, 128)),
                           ((255, 0, 0), (81, 90, 240))):
        rgb[...] = colour
        y, uv = np.zeros((2, 2), np.uint8), np.zeros((1, 1, 2), np.uint8)
        encode_nv12(rgb, y, uv)
        assert (y == expect[0]).all() and tuple(uv[0, 0]) == expect[1:]


def test_nv12_average_chroma_is_the_block_mean():
    """On images constant over each 2x2 block both sitings agree with OpenCV; on others,
    average equals the encoding of the block means."""
    rng = np.random.default_rng(3)
    small = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
    blocky = cv2.resize(small, (32, 24), interpolation=cv2.INTER_NEAREST)
    y, uv = np.zeros((24, 32), np.uint8), np.zeros((12, 16, 2), np.uint8)
    encode_nv12(blocky, y, uv, "RGB", "average")
    assert np.abs(uv.astype(int) - _opencv_nv12(blocky)[1]).max() <= 1
    rgb = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    encode_nv12(rgb, np.zeros((4, 4), np.uint8), uv := np.zeros((2, 2, 2), np.uint8), "RGB", "average")
    mean = rgb.astype(float).reshape(2, 2, 2, 2, 3).mean(axis=(1, 3))
    cb = 128 + 224 / 255 * (mean @ [-0.168736, -0.331264, 0.5])
    cr = 128 + 224 / 255 * (mean @ [0.5, -0.418688, -0.081312])
    assert np.array_equal(uv[..., 0], np.floor(cb + 0.5)) and np.array_equal(uv[..., 1], np.floor(cr + 0.5))


def test_letterbox():
    assert letterbox((160, 220), (320, 320), True) == (44, 0, 232, 320)
    assert letterbox((100, 50), (40, 40), False) == (0, 10, 40, 20)

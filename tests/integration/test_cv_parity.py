"""Every CV operator against OpenCV called in-process, on the live SoC, with padded and
unpadded strides, with and without a region of interest on both images.

Also checks that padding bytes, pixels outside the destination ROI and the source
are left untouched (all filled with a sentinel before the call)."""
from __future__ import annotations

import numpy as np
import pytest

from arm_side import Soc, cv
from tests.cv_cases import CASES, Case, remap_maps, source

pytestmark = pytest.mark.live

SENTINEL = 0xA5
PAD = 24                      # extra bytes per row in the padded layouts (a multiple of every element size)
SRC_ROI = (6, 4, 45, 33)      # 40 x 30 region of the 64 x 48 source, even/odd as YUV 4:2:0 needs
LAYOUTS = [(False, False), (True, False), (False, True), (True, True)]   # (padded stride, roi)


@pytest.fixture(scope="module")
def soc(shared_soc):
    with Soc() as s:
        yield s


def _stride(fmt: str, width: int, padded: bool) -> int:
    return cv.min_stride(fmt, width) + (PAD if padded else 0)


def _crop(pixels: np.ndarray, fmt: str, roi) -> np.ndarray:
    if roi is None:
        return pixels
    l, t, r, b = roi
    if fmt in ("NV12", "NV12_SEPARATE"):
        h = pixels.shape[0] * 2 // 3
        return np.vstack([pixels[:h][t:b + 1, l:r + 1], pixels[h:][t // 2:(b + 1) // 2, l:r + 1]])
    return pixels[t:b + 1, l:r + 1]


def _dst(soc, fmt: str, size: tuple[int, int], padded: bool, roi: bool) -> cv.Image:
    """A destination whose region is ``size``; with roi, inside a larger sentinel-filled image."""
    w, h = size
    if not roi:
        return cv.alloc_image(soc, fmt, w, h, _stride(fmt, w, padded), fill=SENTINEL)
    full_w, full_h = w + 8, h + 6
    return cv.alloc_image(soc, fmt, full_w, full_h, _stride(fmt, full_w, padded),
                          roi=(4, 2, 4 + w - 1, 2 + h - 1), fill=SENTINEL)


def _assert_close(got: np.ndarray, expected: np.ndarray, tol: float, what: str) -> None:
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
    if tol == 0:
        np.testing.assert_array_equal(got, expected, err_msg=what)
    else:
        diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
        assert diff.max() <= tol, f"{what}: max difference {diff.max()} > {tol}"


def _outside_roi_untouched(img: cv.Image) -> None:
    full = cv.read_image(img)
    mask = np.ones(full.shape[:2], bool)
    l, t, r, b = img.roi
    if img.format in ("NV12", "NV12_SEPARATE"):
        mask[:img.height][t:b + 1, l:r + 1] = False
        mask[img.height:][t // 2:(b + 1) // 2, l:r + 1] = False
    else:
        mask[t:b + 1, l:r + 1] = False
    assert _sentinel_bytes(full[mask]), f"{img.format}: a pixel outside the dst roi changed"


def _sentinel_bytes(values: np.ndarray) -> bool:
    return bool((np.ascontiguousarray(values).view(np.uint8) == SENTINEL).all())


def run_case(soc, case: Case, padded: bool, roi: bool) -> None:
    pixels = source(case.src_format)
    src_roi = SRC_ROI if roi else None
    src = cv.write_image(soc, pixels, case.src_format, _stride(case.src_format, pixels.shape[1], padded),
                         roi=src_roi, fill=SENTINEL)
    region = _crop(pixels, case.src_format, src_roi)
    w, h = (SRC_ROI[2] - SRC_ROI[0] + 1, SRC_ROI[3] - SRC_ROI[1] + 1) if roi else (src.width, src.height)
    dst = _dst(soc, case.dst_format, case.out_size(w, h), padded, roi)
    result = case.call(soc, src, dst)
    what = f"{case.id} padded={padded} roi={roi}"
    _assert_close(cv.read_image(dst, region=True), case.ref(region.copy()), case.tol, what)
    if case.check_result:
        case.check_result(result, region.copy())
    assert _sentinel_bytes(cv.read_padding(dst)), f"{what}: dst padding changed"
    assert _sentinel_bytes(cv.read_padding(src)), f"{what}: src padding changed"
    np.testing.assert_array_equal(cv.read_image(src), pixels, err_msg=f"{what}: src changed")
    if roi:
        _outside_roi_untouched(dst)
    cv.free_image(src)
    cv.free_image(dst)


@pytest.mark.parametrize("padded, roi", LAYOUTS, ids=["packed", "stride", "roi", "stride+roi"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parity(soc, case, padded, roi):
    run_case(soc, case, padded, roi)


@pytest.mark.parametrize("padded, roi", LAYOUTS, ids=["packed", "stride", "roi", "stride+roi"])
def test_remap_parity(soc, padded, roi):
    import cv2
    pixels = source("Y")
    src_roi = SRC_ROI if roi else None
    src = cv.write_image(soc, pixels, "Y", _stride("Y", 64, padded), roi=src_roi, fill=SENTINEL)
    region = _crop(pixels, "Y", src_roi).copy()
    h, w = region.shape
    mx, my = remap_maps(w, h)
    map_x = cv.write_image(soc, mx, "F32", _stride("F32", w, padded), fill=SENTINEL)
    map_y = cv.write_image(soc, my, "F32", _stride("F32", w, padded), fill=SENTINEL)
    dst = _dst(soc, "Y", (w, h), padded, roi)
    cv.remap(soc, src, map_x, map_y, dst, border="reflect101")
    expected = cv2.remap(region, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT_101)
    _assert_close(cv.read_image(dst, region=True), expected, 0, f"remap padded={padded} roi={roi}")
    for img in (src, map_x, map_y, dst):
        assert _sentinel_bytes(cv.read_padding(img))
    if roi:
        _outside_roi_untouched(dst)

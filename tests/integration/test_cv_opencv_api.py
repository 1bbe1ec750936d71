"""arm_side.cv for OpenCV users (live SoC): OpenCV's own constants and keyword names, an int
ksize, numpy in / numpy out through pooled shared buffers, and misuse reported as
InvalidArgument naming the parameter. Every expected image comes from cv2 run in this process."""
from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

from arm_side import Soc, cv, errors
from tests.cv_cases import SEP_X, SEP_Y, remap_maps, source, per_plane
from vdsp_board.memory import ddr

pytestmark = pytest.mark.live

W, H = 64, 48
GRAY = source("Y")
BGR = source("BGR")
RGB = np.ascontiguousarray(BGR[..., ::-1])
F32 = source("F32")
NV12 = source("NV12")
ROT = cv2.getRotationMatrix2D((20.0, 15.0), 17.0, 0.9)
PERSP = cv2.getPerspectiveTransform(np.float32([[0, 0], [39, 0], [39, 29], [0, 29]]),
                                    np.float32([[3, 2], [36, 0], [39, 29], [1, 26]]))
K3 = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], np.float32)
MAP_X, MAP_Y = remap_maps(W, H)


@pytest.fixture(scope="module")
def soc(shared_soc):
    with Soc() as s:
        yield s


# (id, our call on numpy input with OpenCV's constants, the same with cv2 in-process)
NUMPY_CASES = [
    ("gaussian-int-ksize-reflect101", lambda s: cv.gaussian_blur(s, GRAY, ksize=5, sigma_x=1.5,
                                                                 border=cv2.BORDER_REFLECT_101),
     lambda: cv2.GaussianBlur(GRAY, (5, 5), 1.5, borderType=cv2.BORDER_REFLECT_101)),
    ("gaussian-opencv-keywords", lambda s: cv.gaussian_blur(s, BGR, ksize=(3, 7), sigmaX=2.0, sigmaY=1.0,
                                                            borderType=cv2.BORDER_REPLICATE | cv2.BORDER_ISOLATED),
     lambda: cv2.GaussianBlur(BGR, (3, 7), 2.0, sigmaY=1.0, borderType=cv2.BORDER_REPLICATE)),
    ("gaussian-border-name", lambda s: cv.gaussian_blur(s, GRAY, ksize=3, border="BORDER_REFLECT"),
     lambda: cv2.GaussianBlur(GRAY, (3, 3), 0, borderType=cv2.BORDER_REFLECT)),
    ("box-constant", lambda s: cv.box_filter(s, GRAY, ksize=5, borderType=cv2.BORDER_CONSTANT),
     lambda: cv2.boxFilter(GRAY, -1, (5, 5), borderType=cv2.BORDER_CONSTANT)),
    ("median", lambda s: cv.median_blur(s, GRAY, ksize=5), lambda: cv2.medianBlur(GRAY, 5)),
    ("bilateral", lambda s: cv.bilateral_filter(s, BGR, d=5, sigmaColor=30, sigmaSpace=5),
     lambda: cv2.bilateralFilter(BGR, 5, 30, 5)),
    ("filter2d-cv32f", lambda s: cv.filter2d(s, GRAY, kernel=K3, ddepth=cv2.CV_32F),
     lambda: cv2.filter2D(GRAY, cv2.CV_32F, K3)),
    ("filter2d-same", lambda s: cv.filter2d(s, GRAY, kernel=K3 * 0.5 + 0.1, delta=3, ddepth=-1),
     lambda: cv2.filter2D(GRAY, -1, K3 * 0.5 + 0.1, delta=3)),
    ("sep-filter-cv16s", lambda s: cv.sep_filter2d(s, GRAY, kernelX=SEP_X, kernelY=SEP_Y, ddepth=cv2.CV_16S),
     lambda: cv2.sepFilter2D(GRAY, cv2.CV_16S, np.float32(SEP_X), np.float32(SEP_Y))),
    ("sobel-cv16s-reflect", lambda s: cv.sobel(s, GRAY, ddepth=cv2.CV_16S, dx=1, dy=0, ksize=3,
                                               borderType=cv2.BORDER_REFLECT),
     lambda: cv2.Sobel(GRAY, cv2.CV_16S, 1, 0, ksize=3, borderType=cv2.BORDER_REFLECT)),
    ("canny-l2", lambda s: cv.canny(s, GRAY, threshold1=50, threshold2=150, L2gradient=True),
     lambda: cv2.Canny(GRAY, 50, 150, L2gradient=True)),
    ("harris", lambda s: cv.corner_harris(s, GRAY, blockSize=2, ksize=3, k=0.04),
     lambda: cv2.cornerHarris(GRAY, 2, 3, 0.04)),
    ("dilate-ellipse", lambda s: cv.dilate(s, GRAY, ksize=5, shape=cv2.MORPH_ELLIPSE),
     lambda: cv2.dilate(GRAY, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5)))),
    ("erode-cross-2", lambda s: cv.erode(s, GRAY, ksize=3, shape=cv2.MORPH_CROSS, iterations=2),
     lambda: cv2.erode(GRAY, cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3)), iterations=2)),
    ("dilate-cv2-positional-kernel", lambda s: cv.dilate(s, BGR, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (7, 5)),
                                                         None, 2),
     lambda: cv2.dilate(BGR, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (7, 5)), None, None, 2)),
    ("erode-cv2-kernel-rect", lambda s: cv.erode(s, GRAY, np.ones((3, 5), np.uint8), borderType=cv2.BORDER_REPLICATE),
     lambda: cv2.erode(GRAY, np.ones((3, 5), np.uint8), borderType=cv2.BORDER_REPLICATE)),
    ("sobel-cv2-positional", lambda s: cv.sobel(s, GRAY, cv2.CV_32F, 0, 1, 5),
     lambda: cv2.Sobel(GRAY, cv2.CV_32F, 0, 1, ksize=5)),
    ("box-cv2-positional", lambda s: cv.box_filter(s, GRAY, -1, (3, 5)), lambda: cv2.boxFilter(GRAY, -1, (3, 5))),
    ("equalize", lambda s: cv.equalize_hist(s, GRAY), lambda: cv2.equalizeHist(GRAY)),
    ("integral", lambda s: cv.integral(s, GRAY), lambda: cv2.integral(GRAY)),
    ("integral-cv32f", lambda s: cv.integral(s, GRAY, sdepth=cv2.CV_32F),
     lambda: cv2.integral(GRAY, sdepth=cv2.CV_32F)),
    ("cvt-bgr2gray", lambda s: cv.cvt_color(s, BGR, code=cv2.COLOR_BGR2GRAY),
     lambda: cv2.cvtColor(BGR, cv2.COLOR_BGR2GRAY)),
    ("cvt-rgb2gray-name", lambda s: cv.cvt_color(s, RGB, code="COLOR_RGB2GRAY"),
     lambda: cv2.cvtColor(RGB, cv2.COLOR_RGB2GRAY)),
    ("flip-both", lambda s: cv.flip(s, BGR, flipCode=-1), lambda: cv2.flip(BGR, -1)),
    ("flip-nv12", lambda s: cv.flip(s, NV12, flip_code=1, format="NV12"),
     lambda: per_plane(lambda p: cv2.flip(p, 1))(NV12)),
    ("rotate-ccw", lambda s: cv.rotate(s, GRAY, rotate_code=cv2.ROTATE_90_COUNTERCLOCKWISE),
     lambda: cv2.rotate(GRAY, cv2.ROTATE_90_COUNTERCLOCKWISE)),
    ("rotate-180-keyword", lambda s: cv.rotate(s, BGR, rotateCode=cv2.ROTATE_180),
     lambda: cv2.rotate(BGR, cv2.ROTATE_180)),
    ("transpose", lambda s: cv.transpose(s, F32), lambda: cv2.transpose(F32)),
    ("resize-cv2-positional", lambda s: cv.resize(s, BGR, (40, 30), interpolation=cv2.INTER_AREA),
     lambda: cv2.resize(BGR, (40, 30), interpolation=cv2.INTER_AREA)),
    ("resize-fx-nearest", lambda s: cv.resize(s, GRAY, fx=0.75, fy=1.5, interpolation=cv2.INTER_NEAREST),
     lambda: cv2.resize(GRAY, None, fx=0.75, fy=1.5, interpolation=cv2.INTER_NEAREST)),
    ("resize-cubic-name", lambda s: cv.resize(s, GRAY, dsize=(80, 50), interpolation="INTER_CUBIC"),
     lambda: cv2.resize(GRAY, (80, 50), interpolation=cv2.INTER_CUBIC)),
    ("pyr-down", lambda s: cv.pyr_down(s, GRAY), lambda: cv2.pyrDown(GRAY)),
    ("pyr-up", lambda s: cv.pyr_up(s, BGR), lambda: cv2.pyrUp(BGR)),
    ("warp-affine-inverse-flag", lambda s: cv.warp_affine(s, GRAY, matrix=ROT,
                                                          flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                                          borderMode=cv2.BORDER_REPLICATE),
     lambda: cv2.warpAffine(GRAY, ROT, (W, H), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                            borderMode=cv2.BORDER_REPLICATE)),
    ("warp-perspective-dsize", lambda s: cv.warp_perspective(s, BGR, PERSP, (50, 40),
                                                             interpolation=cv2.INTER_NEAREST, borderValue=7),
     lambda: cv2.warpPerspective(BGR, PERSP, (50, 40), flags=cv2.INTER_NEAREST, borderValue=(7, 7, 7, 7))),
    ("remap", lambda s: cv.remap(s, GRAY, MAP_X, MAP_Y, interpolation=cv2.INTER_CUBIC, borderMode=cv2.BORDER_REFLECT),
     lambda: cv2.remap(GRAY, MAP_X, MAP_Y, cv2.INTER_CUBIC, borderMode=cv2.BORDER_REFLECT)),
]


@pytest.mark.parametrize("call, expect", [c[1:] for c in NUMPY_CASES], ids=[c[0] for c in NUMPY_CASES])
def test_numpy_in_numpy_out_with_opencv_constants(soc, call, expect):
    want = expect()
    got = call(soc)
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("flags", [cv2.THRESH_BINARY | cv2.THRESH_OTSU, cv2.THRESH_BINARY_INV | cv2.THRESH_TRIANGLE,
                                   cv2.THRESH_TOZERO, cv2.THRESH_TRUNC | cv2.THRESH_OTSU])
def test_threshold_takes_combined_flags_and_returns_the_level_like_cv2(soc, flags):
    level, out = cv.threshold(soc, GRAY, 100, 255, flags)
    want_level, want = cv2.threshold(GRAY, 100, 255, flags)
    assert level == want_level
    np.testing.assert_array_equal(out, want)


def test_threshold_on_f32_and_the_method_keyword(soc):
    level, out = cv.threshold(soc, F32, 12.5, 3.0, cv2.THRESH_TRUNC)
    assert (level, out.dtype) == (12.5, np.float32)
    np.testing.assert_array_equal(out, cv2.threshold(F32, 12.5, 3.0, cv2.THRESH_TRUNC)[1])
    level, out = cv.threshold(soc, GRAY, 0, 255, cv2.THRESH_BINARY, method=cv2.THRESH_OTSU)
    want_level, want = cv2.threshold(GRAY, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
    assert level == want_level
    np.testing.assert_array_equal(out, want)


def test_roi_resize_returns_rect_and_pixels(soc):
    rect, out = cv.roi_resize(soc, GRAY, roi=(4, 2, 27, 21), dsize=(32, 16), interpolation=cv2.INTER_LINEAR)
    assert rect == [0, 0, 32, 16]
    np.testing.assert_array_equal(out, cv2.resize(GRAY[2:22, 4:28], (32, 16), interpolation=cv2.INTER_LINEAR))


def test_cvt_color_to_nv12_from_numpy(soc):
    out = cv.cvt_color(soc, BGR, code="BGR2NV12")
    assert out.shape == (H * 3 // 2, W) and out.dtype == np.uint8
    i420 = cv2.cvtColor(BGR, cv2.COLOR_BGR2YUV_I420)     # OpenCV rounds its coefficients: within 1
    y = i420[:H]
    u = i420[H:H + H // 4].reshape(H // 2, W // 2)
    v = i420[H + H // 4:].reshape(H // 2, W // 2)
    want = np.vstack([y, np.dstack([u, v]).reshape(H // 2, W)])
    assert np.abs(out.astype(int) - want.astype(int)).max() <= 1


def test_dst_array_is_filled_in_place(soc):
    dst = np.zeros_like(GRAY)
    out = cv.gaussian_blur(soc, GRAY, 5, dst=dst)
    assert out is dst
    np.testing.assert_array_equal(dst, cv2.GaussianBlur(GRAY, (5, 5), 0))


def test_buffer_api_takes_opencv_constants_and_int_ksize(soc):
    src = cv.write_image(soc, GRAY, "Y", stride=80)
    dst = cv.alloc_image(soc, "Y", W, H, stride=72)
    try:
        assert cv.gaussian_blur(soc, src, dst, 5, 1.2, 0.0, cv2.BORDER_REPLICATE) == {}
        np.testing.assert_array_equal(cv.read_image(dst), cv2.GaussianBlur(GRAY, (5, 5), 1.2,
                                                                           borderType=cv2.BORDER_REPLICATE))
        assert cv.threshold(soc, src, dst, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU) == \
            {"threshold": cv2.threshold(GRAY, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)[0]}
        small = cv.alloc_image(soc, "Y", 40, 30)
        cv.resize(soc, src, small, cv2.INTER_AREA)
        np.testing.assert_array_equal(cv.read_image(small), cv2.resize(GRAY, (40, 30), interpolation=cv2.INTER_AREA))
        cv.free_image(small)
    finally:
        cv.free_image(src)
        cv.free_image(dst)


def test_pool_reuses_buffers_and_close_leaves_nothing(shared_soc):
    with Soc() as s:
        pool = s.mem.pool
        for _ in range(4):
            out = cv.gaussian_blur(s, GRAY, ksize=3)
        assert pool.allocated == 2 and pool.idle() == 2       # src and dst, reused each time
        np.testing.assert_array_equal(out, cv2.GaussianBlur(GRAY, (3, 3), 0))
        cv.resize(s, BGR, (32, 24))     # a 12 KiB source is new; its 4 KiB result reuses one
        assert pool.allocated == 3 and pool.idle() == 3
        names = [ddr.segment_name(*ddr.parse_phys(m.phys_addr)) for m in s.mem.live()]
        assert len(names) == 3
        assert all(os.path.exists(os.path.join(ddr.shm_dir(), n)) for n in names)
    assert pool.idle() == 0
    assert not [n for n in names if os.path.exists(os.path.join(ddr.shm_dir(), n))]


def _invalid(fn, *words):
    with pytest.raises(errors.InvalidArgument) as info:
        fn()
    for word in words:
        assert word in str(info.value), str(info.value)
    return info.value


MISUSE = [
    ("ksize-string", lambda s: cv.gaussian_blur(s, GRAY, ksize="five"), "gaussian_blur", "'ksize'"),
    ("ksize-one-value", lambda s: cv.gaussian_blur(s, GRAY, ksize=(3,)), "'ksize'"),
    ("ksize-none", lambda s: cv.box_filter(s, GRAY, ksize=None), "'ksize'"),
    ("ksize-even-on-dsp", lambda s: cv.gaussian_blur(s, GRAY, ksize=4), "'ksize'", "odd"),
    ("sigma-string", lambda s: cv.gaussian_blur(s, GRAY, sigma_x="wide"), "'sigma_x'"),
    ("border-unknown-int", lambda s: cv.gaussian_blur(s, GRAY, border=99), "'border'"),
    ("border-none", lambda s: cv.gaussian_blur(s, GRAY, borderType=None), "'border'"),
    ("border-unknown-name", lambda s: cv.gaussian_blur(s, GRAY, border="mirror"), "'border'"),
    ("border-wrap-on-filter", lambda s: cv.gaussian_blur(s, GRAY, border=cv2.BORDER_WRAP), "'border'"),
    ("border-twice", lambda s: cv.gaussian_blur(s, GRAY, border="reflect", borderType=cv2.BORDER_REFLECT),
     "'border'", "twice"),
    ("interpolation-unknown", lambda s: cv.resize(s, GRAY, dsize=(8, 8), interpolation=42), "'interpolation'"),
    ("thresh-flags-disagree", lambda s: cv.threshold(s, GRAY, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU,
                                                     method="triangle"), "'type'", "'method'"),
    ("thresh-both-methods", lambda s: cv.threshold(s, GRAY, 0, 255, cv2.THRESH_OTSU | cv2.THRESH_TRIANGLE), "'type'"),
    ("thresh-type-none", lambda s: cv.threshold(s, GRAY, type=None), "'type'"),
    ("shape-unknown", lambda s: cv.dilate(s, GRAY, shape=7), "'shape'"),
    ("rotate-code", lambda s: cv.rotate(s, GRAY, rotate_code=5), "'rotate_code'"),
    ("color-code", lambda s: cv.cvt_color(s, BGR, code=cv2.COLOR_BGR2HSV), "'code'"),
    ("code-missing", lambda s: cv.cvt_color(s, BGR), "'code'", "required"),
    ("kernel-missing", lambda s: cv.filter2d(s, GRAY), "'kernel'", "required"),
    ("kernel-strings", lambda s: cv.filter2d(s, GRAY, kernel=[["a", "b"]]), "'kernel'"),
    ("matrix-size", lambda s: cv.warp_affine(s, GRAY, matrix=np.eye(3)), "'matrix'"),
    ("unknown-keyword", lambda s: cv.gaussian_blur(s, GRAY, sigma=2), "gaussian_blur", "'sigma'"),
    ("too-many-positional", lambda s: cv.equalize_hist(s, GRAY, None, 1), "equalize_hist", "positional"),
    ("src-list", lambda s: cv.gaussian_blur(s, [[1, 2], [3, 4]]), "'src'"),
    ("src-float64", lambda s: cv.gaussian_blur(s, GRAY.astype(np.float64)), "'src'", "float64"),
    ("src-wrong-format", lambda s: cv.gaussian_blur(s, GRAY, format="RGB"), "'src'"),
    ("format-unknown", lambda s: cv.gaussian_blur(s, GRAY, format="YUYV"), "'format'"),
    ("ksize-positional-array", lambda s: cv.gaussian_blur(s, GRAY, np.zeros((3, 3), np.uint8)), "'ksize'"),
    ("dst-wrong-shape", lambda s: cv.gaussian_blur(s, GRAY, dst=np.zeros((3, 3), np.uint8)), "dst", "(3, 3)"),
    ("dst-not-array", lambda s: cv.gaussian_blur(s, GRAY, dst=[1]), "'dst'"),
    ("kernel-not-an-element", lambda s: cv.dilate(s, GRAY, np.array([[1, 0], [0, 1]], np.uint8)), "'kernel'"),
    ("kernel-and-ksize-disagree", lambda s: cv.erode(s, GRAY, np.ones((3, 3), np.uint8), ksize=5),
     "'ksize'", "'kernel'", "disagree"),
    ("box-ddepth", lambda s: cv.box_filter(s, GRAY, cv2.CV_16S, 3), "'ddepth'"),
    ("soc-none", lambda s: cv.gaussian_blur(None, GRAY), "'soc'"),
    ("numpy-no-wait", lambda s: cv.gaussian_blur(s, GRAY, wait=False), "wait=False"),
    ("timeout-string", lambda s: cv.gaussian_blur(s, GRAY, timeout_ms="soon"), "'timeout_ms'"),
    ("resize-no-size", lambda s: cv.resize(s, GRAY), "dsize"),
    ("roi-resize-no-dsize", lambda s: cv.roi_resize(s, GRAY, roi=(0, 0, 9, 9)), "dsize"),
    ("ddepth-unknown", lambda s: cv.sobel(s, GRAY, ddepth=cv2.CV_64F), "'ddepth'"),
    ("remap-map-shapes", lambda s: cv.remap(s, GRAY, MAP_X, MAP_Y[:10]), "map_x", "map_y"),
]


@pytest.mark.parametrize("call, words", [(c[1], c[2:]) for c in MISUSE], ids=[c[0] for c in MISUSE])
def test_misuse_is_invalid_argument_naming_the_parameter(soc, call, words):
    _invalid(lambda: call(soc), *words)


def test_buffer_mode_misuse(soc):
    src = cv.write_image(soc, GRAY, "Y")
    try:
        _invalid(lambda: cv.gaussian_blur(soc, src), "'dst'")
        _invalid(lambda: cv.gaussian_blur(soc, src, GRAY), "'dst'")
        _invalid(lambda: cv.sobel(soc, src, src, ddepth=cv2.CV_16S), "ddepth", "numpy input only")
        _invalid(lambda: cv.remap(soc, src, MAP_X, MAP_Y, src), "'map_x'")
    finally:
        cv.free_image(src)
    # nothing leaked by the refusals: the pool's buffers are all back
    assert soc.mem.pool.idle() == soc.mem.pool.allocated


def test_image_helpers_misuse_is_invalid_argument_and_leaks_nothing(soc):
    before = len(soc.mem.live())
    _invalid(lambda: cv.write_image(soc, np.zeros(10, np.uint8), "Y"), "H x W")
    _invalid(lambda: cv.write_image(soc, GRAY.astype(np.float64), "Y"), "float64")   # allocated, then freed
    _invalid(lambda: cv.read_image(GRAY), "cv.Image")
    _invalid(lambda: cv.free_image(None), "cv.Image")
    _invalid(lambda: cv.alloc_image(soc, "Y", W, H, roi="all"), "roi")
    assert len(soc.mem.live()) == before
    img = cv.alloc_image(soc, "Y", W, H)
    try:
        _invalid(lambda: img.with_roi((1, 2, 3)), "roi")
        _invalid(lambda: img.with_roi((0, 0, W, H)), "roi", "inside")
    finally:
        cv.free_image(img)

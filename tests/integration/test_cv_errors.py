"""Every parameter check of the CV operators: the error code comes back with a message
naming the problem, and the cores keep serving afterwards (live SoC)."""
from __future__ import annotations

import pytest

from arm_side import CORE_0, CORE_1, Soc, errors, opids
from protocol.contract import cv_ids as ids

pytestmark = pytest.mark.live

INVALID = -6000001


@pytest.fixture(scope="module")
def soc(shared_soc):
    with Soc() as s:
        yield s


@pytest.fixture(scope="module")
def bufs(soc):
    """Shared buffers by size name; big enough for the 64x48 images used below."""
    return {"small": soc.mem.alloc(64), "img": soc.mem.alloc(64 * 48 * 4 + 4096), "img2": soc.mem.alloc(64 * 48 * 4),
            "img3": soc.mem.alloc(64 * 48 * 4)}


def Y(w=64, h=48, **kw):
    return {"format": "Y", "width": w, "height": h, **kw}


def IMG(fmt, w=64, h=48, **kw):
    return {"format": fmt, "width": w, "height": h, **kw}


SINGULAR = [1.0, 2.0, 0.0, 2.0, 4.0, 0.0]
# (id, op, params, n_inputs, n_outputs, words expected in the message)
CHECKS = [
    ("desc-not-map", ids.GAUSSIAN_BLUR, {"src": "Y", "dst": Y()}, 1, 1, "src: image descriptor must be a map"),
    ("desc-unknown-key", ids.GAUSSIAN_BLUR, {"src": Y(depth=8), "dst": Y()}, 1, 1, "unknown descriptor key"),
    ("desc-missing-width", ids.GAUSSIAN_BLUR, {"src": {"format": "Y", "height": 4}, "dst": Y()}, 1, 1,
     "src: descriptor lacks width"),
    ("desc-unknown-format", ids.GAUSSIAN_BLUR, {"src": IMG("YUYV"), "dst": Y()}, 1, 1, "format 'YUYV' is not accepted"),
    ("format-not-accepted", ids.CANNY, {"src": IMG("RGB"), "dst": Y()}, 1, 1, "src: format 'RGB' is not accepted"),
    ("width-zero", ids.GAUSSIAN_BLUR, {"src": Y(w=0), "dst": Y()}, 1, 1, "src: width must be in 1.."),
    ("height-not-int", ids.GAUSSIAN_BLUR, {"src": Y(h=4.5), "dst": Y()}, 1, 1, "height must be an integer"),
    ("nv12-odd-width", ids.FLIP, {"src": IMG("NV12", w=63), "dst": IMG("NV12")}, 1, 1, "even width and height"),
    ("stride-too-small", ids.GAUSSIAN_BLUR, {"src": Y(stride=60), "dst": Y()}, 1, 1, "src: stride must be in 64.."),
    ("stride-not-element-multiple", ids.THRESHOLD, {"src": IMG("F32", stride=258), "dst": IMG("F32")}, 1, 1,
     "multiple of the 4-byte element"),
    ("roi-outside", ids.GAUSSIAN_BLUR, {"src": Y(roi=[0, 0, 64, 10]), "dst": Y()}, 1, 1, "is not inside the 64x48"),
    ("roi-reversed", ids.GAUSSIAN_BLUR, {"src": Y(roi=[10, 0, 5, 10]), "dst": Y()}, 1, 1, "left <= right"),
    ("roi-length", ids.GAUSSIAN_BLUR, {"src": Y(roi=[0, 0, 5]), "dst": Y()}, 1, 1, "roi must be [left, top"),
    ("roi-nv12-odd", ids.FLIP, {"src": IMG("NV12", roi=[1, 0, 10, 9]), "dst": IMG("NV12", w=10, h=10)}, 1, 1,
     "even and end on odd"),
    ("buffer-too-small", ids.GAUSSIAN_BLUR, {"src": Y(), "dst": Y(w=640, h=480)}, 1, 1, "dst: buffer of"),
    ("buffer-count", ids.FLIP, {"src": IMG("NV12_SEPARATE"), "dst": IMG("NV12")}, 1, 1, "the images need 2 buffers"),
    ("ksize-even", ids.GAUSSIAN_BLUR, {"src": Y(), "dst": Y(), "ksize": [4, 5]}, 1, 1, "'ksize' must be odd"),
    ("sigma-negative", ids.GAUSSIAN_BLUR, {"src": Y(), "dst": Y(), "sigma_x": -1.0}, 1, 1, "'sigma_x' must be >= 0"),
    ("border-not-for-filters", ids.GAUSSIAN_BLUR, {"src": Y(), "dst": Y(), "border": "wrap"}, 1, 1,
     "'border' must be one of"),
    ("unknown-parameter", ids.GAUSSIAN_BLUR, {"src": Y(), "dst": Y(), "sigma": 1.0}, 1, 1, "unknown parameter"),
    ("missing-descriptor", ids.GAUSSIAN_BLUR, {"src": Y()}, 1, 1, "missing required parameter 'dst'"),
    ("dst-size-mismatch", ids.GAUSSIAN_BLUR, {"src": Y(), "dst": Y(w=32)}, 1, 1, "dst region 32x48 must equal"),
    ("dst-format-mismatch", ids.GAUSSIAN_BLUR, {"src": Y(), "dst": IMG("RGB")}, 1, 1,
     "dst format RGB must match src format Y"),
    ("median-even", ids.MEDIAN_BLUR, {"src": Y(), "dst": Y(), "ksize": 4}, 1, 1, "'ksize' must be odd"),
    ("anchor-outside", ids.BOX_FILTER, {"src": Y(), "dst": Y(), "ksize": [3, 3], "anchor": [3, 0]}, 1, 1,
     "'anchor' [3, 0] must be"),
    ("bilateral-d", ids.BILATERAL_FILTER, {"src": Y(), "dst": Y(), "d": 0}, 1, 1, "'d' must be >= 1"),
    ("filter2d-kernel-count", ids.FILTER2D, {"src": Y(), "dst": Y(), "kernel": [1.0] * 8, "ksize": [3, 3]}, 1, 1,
     "'kernel' must have 9 coefficients"),
    ("filter2d-deep-dst-from-rgb", ids.FILTER2D, {"src": IMG("RGB"), "dst": IMG("S16"), "kernel": [1.0],
                                                  "ksize": [1, 1]}, 1, 1, "needs a one-channel source"),
    ("sepfilter-empty-kernel", ids.SEP_FILTER2D, {"src": Y(), "dst": Y(), "kernel_x": [], "kernel_y": [1.0]}, 1, 1,
     "'kernel_x' must have 1..255"),
    ("sobel-no-derivative", ids.SOBEL, {"src": Y(), "dst": IMG("S16"), "dx": 0, "dy": 0}, 1, 1,
     "dx + dy must be at least 1"),
    ("sobel-scharr-order", ids.SOBEL, {"src": Y(), "dst": IMG("S16"), "dx": 1, "dy": 1, "ksize": -1}, 1, 1,
     "Scharr (ksize -1) takes dx + dy == 1"),
    ("sobel-ksize", ids.SOBEL, {"src": Y(), "dst": IMG("S16"), "ksize": 4}, 1, 1, "'ksize' must be one of"),
    ("canny-aperture", ids.CANNY, {"src": Y(), "dst": Y(), "aperture_size": 4}, 1, 1, "'aperture_size' must be one"),
    ("harris-dst-format", ids.CORNER_HARRIS, {"src": Y(), "dst": Y()}, 1, 1, "dst: format 'Y' is not accepted"),
    ("harris-no-neighbourhood", ids.CORNER_HARRIS, {"src": Y(), "dst": IMG("F32"), "block_size": 1, "ksize": 1},
     1, 1, "block_size 1 with ksize 1"),
    ("dilate-iterations", ids.DILATE, {"src": Y(), "dst": Y(), "iterations": 0}, 1, 1, "'iterations' must be >= 1"),
    ("erode-shape", ids.ERODE, {"src": Y(), "dst": Y(), "shape": "disk"}, 1, 1, "'shape' must be one of"),
    ("threshold-otsu-float", ids.THRESHOLD, {"src": IMG("F32"), "dst": IMG("F32"), "method": "otsu"}, 1, 1,
     "needs an 8-bit image"),
    ("threshold-type", ids.THRESHOLD, {"src": Y(), "dst": Y(), "type": "mask"}, 1, 1, "'type' must be one of"),
    ("equalize-format", ids.EQUALIZE_HIST, {"src": IMG("S16"), "dst": IMG("S16")}, 1, 1, "format 'S16' is not"),
    ("integral-dst-size", ids.INTEGRAL, {"src": Y(w=16, h=8), "dst": IMG("S32", w=16, h=8)}, 1, 1,
     "dst region must be 17x9"),
    ("cvtcolor-code", ids.CVT_COLOR, {"src": IMG("RGB"), "dst": Y(), "code": "RGB2HSV"}, 1, 1, "'code' must be one"),
    ("cvtcolor-src-format", ids.CVT_COLOR, {"src": IMG("BGR"), "dst": Y(), "code": "RGB2GRAY"}, 1, 1,
     "src: format 'BGR' is not accepted"),
    ("cvtcolor-nv12-dst-format", ids.CVT_COLOR, {"src": IMG("RGB"), "dst": Y(), "code": "RGB2NV12"}, 1, 1,
     "dst: format 'Y' is not accepted"),
    ("flip-code", ids.FLIP, {"src": Y(), "dst": Y(), "flip_code": 2}, 1, 1, "'flip_code' must be one of"),
    ("flip-format-family", ids.FLIP, {"src": Y(), "dst": IMG("NV12")}, 1, 1, "dst format NV12 must match"),
    ("rotate-dst-size", ids.ROTATE, {"src": Y(), "dst": Y(), "rotate_code": "90cw"}, 1, 1,
     "dst region must be 48x64"),
    ("transpose-dst-size", ids.TRANSPOSE, {"src": Y(w=16, h=8), "dst": Y(w=16, h=8)}, 1, 1,
     "dst region must be 8x16"),
    ("resize-interpolation", ids.RESIZE, {"src": Y(), "dst": Y(), "interpolation": "bicubic"}, 1, 1,
     "'interpolation' must be one of"),
    ("roiresize-roi-outside", ids.ROI_RESIZE, {"src": Y(), "dst": Y(), "roi": [0, 0, 70, 10]}, 1, 1,
     "roi: roi left 0, top 0, right 70"),
    ("roiresize-pad-length", ids.ROI_RESIZE, {"src": Y(), "dst": Y(), "roi": [0, 0, 9, 9], "keep_aspect": True,
                                              "pad_value": [0, 0]}, 1, 1, "pad_value needs 1 values"),
    ("pyrdown-dst-size", ids.PYR_DOWN, {"src": Y(), "dst": Y(w=20, h=24)}, 1, 1, "does not fit src 64x48"),
    ("pyrup-dst-size", ids.PYR_UP, {"src": Y(w=16, h=8), "dst": Y(w=16, h=16)}, 1, 1, "does not fit src 16x8"),
    ("warp-singular", ids.WARP_AFFINE, {"src": Y(), "dst": Y(), "matrix": SINGULAR}, 1, 1, "matrix is singular"),
    ("warp-matrix-length", ids.WARP_PERSPECTIVE, {"src": Y(), "dst": Y(), "matrix": [1.0] * 6}, 1, 1,
     "'matrix' must have 9 elements"),
    ("warp-nv12", ids.WARP_AFFINE, {"src": IMG("NV12"), "dst": IMG("NV12"), "matrix": [1.0, 0, 0, 0, 1.0, 0]}, 1, 1,
     "format 'NV12' is not accepted"),
    ("remap-map-size", ids.REMAP, {"src": Y(w=16, h=8), "map_x": IMG("F32", w=8, h=8), "map_y": IMG("F32", w=16, h=8),
                                   "dst": Y(w=16, h=8)}, 3, 1, "map_x region 8x8 must equal"),
    ("remap-map-format", ids.REMAP, {"src": Y(w=16, h=8), "map_x": IMG("S16", w=16, h=8),
                                     "map_y": IMG("F32", w=16, h=8), "dst": Y(w=16, h=8)}, 3, 1,
     "map_x: format 'S16' is not accepted"),
    # OpenCV's bicubic + reflect101 never returns on a 1-pixel source: the core hung until its watchdog
    ("warp-affine-cubic-1px-wide", ids.WARP_AFFINE, {"src": Y(w=1), "dst": Y(), "matrix": [1.0, 0, 0, 0, 1.0, 0],
                                                     "interpolation": "cubic", "border": "reflect101"}, 1, 1,
     "src of at least 2x2 pixels, got 1x48"),
    ("warp-persp-cubic-1px-high", ids.WARP_PERSPECTIVE, {"src": Y(h=1), "dst": Y(),
                                                         "matrix": [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0],
                                                         "interpolation": "cubic", "border": "reflect101"}, 1, 1,
     "src of at least 2x2 pixels, got 64x1"),
    ("remap-cubic-1px", ids.REMAP, {"src": Y(w=1, h=1), "map_x": IMG("F32", w=16, h=8), "map_y": IMG("F32", w=16, h=8),
                                    "dst": Y(w=16, h=8), "interpolation": "cubic", "border": "reflect101"}, 3, 1,
     "src of at least 2x2 pixels, got 1x1"),
    ("buffers-wrong-count", ids.REMAP, {"src": Y(w=16, h=8), "map_x": IMG("F32", w=16, h=8),
                                        "map_y": IMG("F32", w=16, h=8), "dst": Y(w=16, h=8)}, 1, 1, "takes 3 inputs"),
]


def still_serving(soc):
    assert soc.call(opids.PING, core=CORE_0) == {"core": "vdsp0"}
    assert soc.call(opids.PING, core=CORE_1) == {"core": "vdsp1"}


@pytest.mark.parametrize("op, params, n_in, n_out, words", [c[1:] for c in CHECKS], ids=[c[0] for c in CHECKS])
def test_bad_argument_is_refused_and_cores_keep_serving(soc, bufs, op, params, n_in, n_out, words):
    ins = [bufs["img"], bufs["img2"], bufs["img3"]][:n_in]
    outs = [bufs["img3"]][:n_out]
    with pytest.raises(errors.VdspError) as exc:
        soc.call(op, inputs=ins, outputs=outs, params=params)
    assert exc.value.code == INVALID, exc.value
    assert words in exc.value.message, exc.value.message
    still_serving(soc)


def test_misaligned_float_buffer(soc, bufs):
    """An F32 image whose buffer starts at an odd address is refused, not read unaligned."""
    base = bufs["img"]
    with pytest.raises(errors.VdspError) as exc:
        soc.call(ids.THRESHOLD, inputs=[(base.phys_addr + 1, 4096)], outputs=[bufs["img2"]],
                 params={"src": IMG("F32", w=16, h=8), "dst": IMG("F32", w=16, h=8)})
    assert exc.value.code == INVALID and "not aligned" in exc.value.message
    still_serving(soc)


def test_integral_s32_overflow_guard(soc):
    """A source big enough to overflow a 32-bit sum needs an F32 integral."""
    w, h = 4096, 2100                     # 255 * w * h > 2**31 - 1
    src, dst = soc.mem.alloc(w * h), soc.mem.alloc((w + 1) * (h + 1) * 4)   # untouched pages cost nothing
    try:
        with pytest.raises(errors.VdspError) as exc:
            soc.call(ids.INTEGRAL, inputs=[src], outputs=[dst],
                     params={"src": Y(w=w, h=h), "dst": IMG("S32", w=w + 1, h=h + 1)})
        assert exc.value.code == INVALID, exc.value
        assert "S32 sum could overflow" in exc.value.message
    finally:
        src.free()
        dst.free()
    still_serving(soc)

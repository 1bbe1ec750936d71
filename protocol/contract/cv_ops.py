"""The CV operator catalog (command ids 0x0800-0x0fff), declared once: one entry per operator.

The firmware binds its OpenCV kernels to these entries (``dsp_side.operators.cv``); the ARM
API (``arm_side.cv``), the typed stubs and docs/cv.md are derived from them. The names of the
choices (borders, interpolations, ...) are the contract; what OpenCV constant each maps to
is the firmware's business.
"""
from __future__ import annotations

from protocol.contract import cv_ids as ids
from protocol.contract.operator import OperatorEntry, catalog

# Choices by role (the firmware maps each name to an OpenCV constant).
FILTER_BORDERS = ["reflect101", "constant", "replicate", "reflect"]   # what OpenCV's filter engine takes
WARP_BORDERS = ["constant", "replicate", "reflect", "wrap", "reflect101", "transparent"]
INTERPOLATIONS = ["nearest", "linear", "cubic", "area", "lanczos4", "linear_exact", "nearest_exact"]
WARP_INTERPOLATIONS = ["nearest", "linear", "cubic", "lanczos4"]
COLOR_CODES = ["RGB2GRAY", "BGR2GRAY", "RGB2NV12", "BGR2NV12"]
MORPH_SHAPES = ["rect", "cross", "ellipse"]
THRESHOLD_TYPES = ["binary", "binary_inv", "trunc", "tozero", "tozero_inv"]
THRESHOLD_METHODS = ["fixed", "otsu", "triangle"]
ROTATIONS = ["90cw", "180", "90ccw"]


def image_param(doc: str) -> dict:
    return {"type": "any", "doc": doc + " (image descriptor: format, width, height, stride, roi)"}


SRC = image_param("source image")
DST = image_param("destination image")
PAIR = {"src": SRC, "dst": DST}


def border_param(choices: list[str], default: str = "reflect101") -> dict:
    return {"type": "str", "choices": choices, "default": default, "doc": "border extrapolation (OpenCV BORDER_*)"}


def size_param(doc: str, default: list[int] | None = None, odd: bool = False) -> dict:
    spec: dict = {"type": "int_list", "len": 2, "min": 1, "max": 255, "doc": doc + " [width, height]"}
    if odd:
        spec["odd"] = True
    if default is not None:
        spec["default"] = default
    return spec


_FB = border_param(FILTER_BORDERS)
_ANCHOR = {"type": "int_list", "len": 2, "min": -1, "default": [-1, -1], "doc": "[x, y]; -1,-1 = centre"}
_DELTA = {"type": "float", "default": 0.0, "doc": "added to every result"}
_COEFFS = {"type": "float_list", "doc": "kernel coefficients"}
_MORPH = {**PAIR, "shape": {"type": "str", "choices": MORPH_SHAPES, "default": "rect"},
          "ksize": size_param("structuring element size", [3, 3]),
          "anchor": {"type": "int_list", "len": 2, "min": -1, "default": [-1, -1]},
          "iterations": {"type": "int", "min": 1, "max": 100, "default": 1},
          "border": border_param(FILTER_BORDERS, "constant")}
_INTERP = {"type": "str", "choices": INTERPOLATIONS, "default": "linear"}
_WARP_INTERP = {"type": "str", "choices": WARP_INTERPOLATIONS, "default": "linear"}
_WARP_BORDER = border_param(WARP_BORDERS, "constant")
_VALUE = {"type": "float", "default": 0.0, "doc": "value of constant borders"}
_WARP = {"interpolation": _WARP_INTERP, "inverse_map": {"type": "bool", "default": False},
         "border": _WARP_BORDER, "border_value": _VALUE}


def _cv(op_id: int, j5: str, py: str, doc: str, params: dict, inputs=1, outputs=1) -> OperatorEntry:
    return OperatorEntry.declare(op_id, "cv." + j5, params, inputs=inputs, outputs=outputs, doc=doc, j5=j5,
                                 py_name=py)


GAUSSIAN_BLUR = _cv(ids.GAUSSIAN_BLUR, "gaussianBlur", "gaussian_blur",
                    "Gaussian smoothing (cv::GaussianBlur); ksize odd, sigma 0 = derived from ksize.", {
                        **PAIR, "ksize": size_param("kernel size, odd", [5, 5], odd=True),
                        "sigma_x": {"type": "float", "min": 0.0, "max": 1000.0, "default": 0.0},
                        "sigma_y": {"type": "float", "min": 0.0, "max": 1000.0, "default": 0.0}, "border": _FB})
BOX_FILTER = _cv(ids.BOX_FILTER, "boxFilter", "box_filter", "Box filter (cv::boxFilter), normalized by default.", {
    **PAIR, "ksize": size_param("kernel size", [3, 3]), "normalize": {"type": "bool", "default": True},
    "anchor": _ANCHOR, "border": _FB})
MEDIAN_BLUR = _cv(ids.MEDIAN_BLUR, "medianBlur", "median_blur",
                  "Median filter (cv::medianBlur) over a ksize x ksize square, ksize odd.", {
                      **PAIR, "ksize": {"type": "int", "min": 1, "max": 255, "odd": True, "default": 3}})
BILATERAL_FILTER = _cv(ids.BILATERAL_FILTER, "bilateralFilter", "bilateral_filter",
                       "Edge-preserving smoothing (cv::bilateralFilter) with a d x d neighbourhood.", {
                           **PAIR, "d": {"type": "int", "min": 1, "max": 31, "default": 5},
                           "sigma_color": {"type": "float", "min": 0.0, "max": 1e6, "default": 50.0},
                           "sigma_space": {"type": "float", "min": 0.0, "max": 1e6, "default": 50.0},
                           "border": border_param(FILTER_BORDERS + ["wrap"])})
FILTER2D = _cv(ids.FILTER2D, "filter2D", "filter2d",
               "Correlation with an arbitrary kernel (cv::filter2D); kernel row-major, ksize [w, h].", {
                   **PAIR, "kernel": _COEFFS, "ksize": size_param("kernel size", None), "anchor": _ANCHOR,
                   "delta": _DELTA, "border": _FB})
SEP_FILTER2D = _cv(ids.SEP_FILTER2D, "sepFilter2D", "sep_filter2d",
                   "Separable filter (cv::sepFilter2D): rows by kernel_x, then columns by kernel_y.", {
                       **PAIR, "kernel_x": dict(_COEFFS, doc="row kernel (1..255 coefficients)"),
                       "kernel_y": dict(_COEFFS, doc="column kernel (1..255 coefficients)"),
                       "anchor": _ANCHOR, "delta": _DELTA, "border": _FB})
SOBEL = _cv(ids.SOBEL, "sobel", "sobel",
            "Image derivative (cv::Sobel; ksize -1 = Scharr 3x3) into an S16, F32 or 8-bit image.", {
                **PAIR, "dx": {"type": "int", "min": 0, "max": 2, "default": 1},
                "dy": {"type": "int", "min": 0, "max": 2, "default": 0},
                "ksize": {"type": "int", "choices": [-1, 1, 3, 5, 7], "default": 3},
                "scale": {"type": "float", "default": 1.0}, "delta": _DELTA, "border": _FB})
DILATE = _cv(ids.DILATE, "dilate", "dilate", "Dilation (cv::dilate): local maximum over the structuring element.",
             _MORPH)
ERODE = _cv(ids.ERODE, "erode", "erode", "Erosion (cv::erode): local minimum over the structuring element.", _MORPH)
CANNY = _cv(ids.CANNY, "canny", "canny", "Canny edges (cv::Canny): 255 on edges, 0 elsewhere.", {
    **PAIR,
    "threshold1": {"type": "float", "min": 0.0, "max": 1e6, "default": 100.0, "doc": "hysteresis low"},
    "threshold2": {"type": "float", "min": 0.0, "max": 1e6, "default": 200.0, "doc": "hysteresis high"},
    "aperture_size": {"type": "int", "choices": [3, 5, 7], "default": 3},
    "l2_gradient": {"type": "bool", "default": False}})
CORNER_HARRIS = _cv(ids.CORNER_HARRIS, "cornerHarris", "corner_harris",
                    "Harris corner response (cv::cornerHarris) as an F32 image.", {
                        **PAIR, "block_size": {"type": "int", "min": 1, "max": 31, "default": 2},
                        "ksize": {"type": "int", "choices": [1, 3, 5, 7], "default": 3},
                        "k": {"type": "float", "min": 0.0, "max": 1.0, "default": 0.04},
                        "border": border_param(FILTER_BORDERS)})
THRESHOLD = _cv(ids.THRESHOLD, "threshold", "threshold",
                "Fixed-level threshold (cv::threshold); method otsu/triangle picks the level. Returns it.", {
                    **PAIR, "thresh": {"type": "float", "default": 127.0},
                    "maxval": {"type": "float", "default": 255.0},
                    "type": {"type": "str", "choices": THRESHOLD_TYPES, "default": "binary"},
                    "method": {"type": "str", "choices": THRESHOLD_METHODS, "default": "fixed",
                               "doc": "fixed: use thresh; otsu/triangle: computed (8-bit only)"}})
EQUALIZE_HIST = _cv(ids.EQUALIZE_HIST, "equalizeHist", "equalize_hist",
                    "Histogram equalization of an 8-bit gray image (cv::equalizeHist).", dict(PAIR))
INTEGRAL = _cv(ids.INTEGRAL, "integral", "integral",
               "Integral image (cv::integral): dst is (w+1) x (h+1), S32 or F32, first row and column 0.", dict(PAIR))
CVT_COLOR = _cv(ids.CVT_COLOR, "cvtColor", "cvt_color",
                "RGB/BGR -> gray (cv::cvtColor) or -> NV12 / NV12_SEPARATE (BT.601 limited range).", {
                    **PAIR, "code": {"type": "str", "choices": COLOR_CODES},
                    "chroma": {"type": "str", "choices": ["top_left", "average"], "default": "top_left",
                               "doc": "NV12 chroma siting: a 2x2 block's top-left pixel, or its mean"}},
                outputs=(1, 2))
FLIP = _cv(ids.FLIP, "flip", "flip", "Mirror (cv::flip): 0 around the x axis, 1 around the y axis, -1 both.", {
    **PAIR, "flip_code": {"type": "int", "choices": [0, 1, -1], "default": 1}}, inputs=(1, 2), outputs=(1, 2))
ROTATE = _cv(ids.ROTATE, "rotate", "rotate", "Rotation by a multiple of 90 degrees (cv::rotate).", {
    **PAIR, "rotate_code": {"type": "str", "choices": ROTATIONS, "default": "90cw"}}, inputs=(1, 2), outputs=(1, 2))
TRANSPOSE = _cv(ids.TRANSPOSE, "transpose", "transpose", "Swap rows and columns (cv::transpose).", dict(PAIR),
                inputs=(1, 2), outputs=(1, 2))
RESIZE = _cv(ids.RESIZE, "resize", "resize", "Scale the src region to the dst region's size (cv::resize).", {
    **PAIR, "interpolation": _INTERP}, inputs=(1, 2), outputs=(1, 2))
ROI_RESIZE = _cv(ids.ROI_RESIZE, "roiResize", "roi_resize",
                 "Crop ``roi`` [left, top, right, bottom] (inclusive, within the src region) and scale it", {
                     **PAIR, "roi": {"type": "int_list", "len": 4, "min": 0,
                                     "doc": "[left, top, right, bottom] inclusive"},
                     "keep_aspect": {"type": "bool", "default": False}, "interpolation": _INTERP,
                     "pad_value": {"type": "int_list", "min": 0, "max": 255, "default": None,
                                   "doc": "one value per channel (Y, U, V for NV12); default black"}},
                 inputs=(1, 2), outputs=(1, 2))
PYR_DOWN = _cv(ids.PYR_DOWN, "pyrDown", "pyr_down",
               "Gaussian pyramid step down (cv::pyrDown, 5x5 kernel, BORDER_REFLECT_101).", dict(PAIR),
               inputs=(1, 2), outputs=(1, 2))
PYR_UP = _cv(ids.PYR_UP, "pyrUp", "pyr_up", "Gaussian pyramid step up (cv::pyrUp, BORDER_REFLECT_101).", dict(PAIR),
             inputs=(1, 2), outputs=(1, 2))
WARP_AFFINE = _cv(ids.WARP_AFFINE, "warpAffine", "warp_affine",
                  "Affine warp (cv::warpAffine) by a 2x3 matrix given row-major (6 values).", {
                      **PAIR, "matrix": {"type": "float_list", "len": 6, "doc": "2x3 row-major"}, **_WARP})
WARP_PERSPECTIVE = _cv(ids.WARP_PERSPECTIVE, "warpPerspective", "warp_perspective",
                       "Perspective warp (cv::warpPerspective) by a 3x3 matrix given row-major (9 values).", {
                           **PAIR, "matrix": {"type": "float_list", "len": 9, "doc": "3x3 row-major"}, **_WARP})
REMAP = _cv(ids.REMAP, "remap", "remap",
            "Generic remap (cv::remap): dst(x, y) = src(map_x(x, y), map_y(x, y)); maps are F32 images.", {
                "src": SRC, "map_x": dict(SRC, doc="F32 x coordinates, dst-sized"),
                "map_y": dict(SRC, doc="F32 y coordinates, dst-sized"), "dst": DST,
                "interpolation": _WARP_INTERP, "border": _WARP_BORDER, "border_value": _VALUE}, inputs=3)

#: every CV entry by command id, in the order the firmware registers them
ENTRIES = catalog(GAUSSIAN_BLUR, BOX_FILTER, MEDIAN_BLUR, BILATERAL_FILTER, FILTER2D, SEP_FILTER2D, SOBEL,
                  DILATE, ERODE, CANNY, CORNER_HARRIS, THRESHOLD, EQUALIZE_HIST, INTEGRAL, CVT_COLOR, FLIP,
                  ROTATE, TRANSPOSE, RESIZE, ROI_RESIZE, PYR_DOWN, PYR_UP, WARP_AFFINE, WARP_PERSPECTIVE, REMAP)

#: J5 sample name -> command id
BY_J5 = {e.j5: op_id for op_id, e in ENTRIES.items()}

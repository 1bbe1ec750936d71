"""The CV operator catalog (command ids 0x0800-0x0fff), declared once: one entry per operator.

An entry holds the command id, the wire name (``cv.<name>``; the J5 sample's name where the
operator is one of the J5 CV sample's), the Python name, a one-line doc, the typed parameters
and the ARM-side form (:class:`~protocol.contract.cv_form.CvForm`: formats, numpy-mode shape
rule, positional orders). Declaring an entry adds it to :data:`ENTRIES`.

The firmware binds its OpenCV kernels to these entries (``dsp_side.operators.cv``); the ARM
API (``arm_side.cv``), the typed stubs, the C header, ``cv_ids`` and the tables of docs/cv.md,
PROTOCOL.md and the README are derived from them (``python -m vdsp_sim.regen``). The names of
the choices (borders, interpolations, ...) are the contract; what OpenCV constant each maps to
is the firmware's business.
"""
from __future__ import annotations

from protocol.contract.cv_form import CvForm
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


_DECLARED: list[OperatorEntry] = []


def _cv(op_id: int, name: str, py: str, doc: str, params: dict, *, formats: str, inputs: int | tuple[int, int] = 1,
        outputs: int | tuple[int, int] = 1, j5: bool = True, **form) -> OperatorEntry:
    """Declare ``cv.<name>`` (``j5``: one of the J5 CV sample's operators, by that name) and add it
    to :data:`ENTRIES`; ``form``: the other fields of its :class:`CvForm`."""
    entry = OperatorEntry.declare(op_id, "cv." + name, params, inputs=inputs, outputs=outputs, doc=doc,
                                  j5=name if j5 else "", py_name=py, form=CvForm(formats, **form))
    _DECLARED.append(entry)
    return entry


_8BIT = "8-bit → same"
_ANY = "any, NV12 → same"
_DEPTH_ARGS = ("anchor", "delta", "border")
_MORPH_FORM: dict = dict(formats=_8BIT, order=("ksize", "shape", "anchor", "iterations", "border"),
                         arm_params=("kernel",), cv2_args=("kernel", "anchor", "iterations", "border"))
_WARP_FORM: dict = dict(formats="any but NV12 → same", shape="warp",
                        cv2_args=("matrix", "dsize", "interpolation", "border", "border_value"))

GAUSSIAN_BLUR = _cv(0x0809, "gaussianBlur", "gaussian_blur",
                    "Gaussian smoothing (cv::GaussianBlur); ksize odd, sigma 0 = derived from ksize.", {
                        **PAIR, "ksize": size_param("kernel size, odd", [5, 5], odd=True),
                        "sigma_x": {"type": "float", "min": 0.0, "max": 1000.0, "default": 0.0},
                        "sigma_y": {"type": "float", "min": 0.0, "max": 1000.0, "default": 0.0}, "border": _FB},
                    formats=_8BIT)
BOX_FILTER = _cv(0x0801, "boxFilter", "box_filter", "Box filter (cv::boxFilter), normalized by default.", {
    **PAIR, "ksize": size_param("kernel size", [3, 3]), "normalize": {"type": "bool", "default": True},
    "anchor": _ANCHOR, "border": _FB}, formats=_8BIT, shape="same_depth",
    cv2_args=("ddepth", "ksize", "anchor", "normalize", "border"))
MEDIAN_BLUR = _cv(0x080b, "medianBlur", "median_blur",
                  "Median filter (cv::medianBlur) over a ksize x ksize square, ksize odd.", {
                      **PAIR, "ksize": {"type": "int", "min": 1, "max": 255, "odd": True, "default": 3}},
                  formats=_8BIT)
BILATERAL_FILTER = _cv(0x0800, "bilateralFilter", "bilateral_filter",
                       "Edge-preserving smoothing (cv::bilateralFilter) with a d x d neighbourhood.", {
                           **PAIR, "d": {"type": "int", "min": 1, "max": 31, "default": 5},
                           "sigma_color": {"type": "float", "min": 0.0, "max": 1e6, "default": 50.0},
                           "sigma_space": {"type": "float", "min": 0.0, "max": 1e6, "default": 50.0},
                           "border": border_param(FILTER_BORDERS + ["wrap"])}, formats=_8BIT)
FILTER2D = _cv(0x0807, "filter2D", "filter2d",
               "Correlation with an arbitrary kernel (cv::filter2D); kernel row-major, ksize [w, h].", {
                   **PAIR, "kernel": _COEFFS, "ksize": size_param("kernel size", None), "anchor": _ANCHOR,
                   "delta": _DELTA, "border": _FB},
               formats="8-bit → same; gray → S16/F32", shape="depth", order=("kernel", *_DEPTH_ARGS),
               cv2_args=("ddepth", "kernel", *_DEPTH_ARGS))
SEP_FILTER2D = _cv(0x0811, "sepFilter2D", "sep_filter2d",
                   "Separable filter (cv::sepFilter2D): rows by kernel_x, then columns by kernel_y.", {
                       **PAIR, "kernel_x": dict(_COEFFS, doc="row kernel (1..255 coefficients)"),
                       "kernel_y": dict(_COEFFS, doc="column kernel (1..255 coefficients)"),
                       "anchor": _ANCHOR, "delta": _DELTA, "border": _FB},
                   formats="8-bit → same; gray → S16/F32", shape="depth",
                   cv2_args=("ddepth", "kernel_x", "kernel_y", *_DEPTH_ARGS))
SOBEL = _cv(0x0812, "sobel", "sobel",
            "Image derivative (cv::Sobel; ksize -1 = Scharr 3x3) into an S16, F32 or 8-bit image.", {
                **PAIR, "dx": {"type": "int", "min": 0, "max": 2, "default": 1},
                "dy": {"type": "int", "min": 0, "max": 2, "default": 0},
                "ksize": {"type": "int", "choices": [-1, 1, 3, 5, 7], "default": 3},
                "scale": {"type": "float", "default": 1.0}, "delta": _DELTA, "border": _FB},
            formats="gray → S16/F32/gray", shape="depth",
            cv2_args=("ddepth", "dx", "dy", "ksize", "scale", "delta", "border"))
DILATE = _cv(0x0804, "dilate", "dilate", "Dilation (cv::dilate): local maximum over the structuring element.",
             _MORPH, **_MORPH_FORM)
ERODE = _cv(0x0806, "erode", "erode", "Erosion (cv::erode): local minimum over the structuring element.", _MORPH,
            **_MORPH_FORM)
CANNY = _cv(0x0802, "canny", "canny", "Canny edges (cv::Canny): 255 on edges, 0 elsewhere.", {
    **PAIR,
    "threshold1": {"type": "float", "min": 0.0, "max": 1e6, "default": 100.0, "doc": "hysteresis low"},
    "threshold2": {"type": "float", "min": 0.0, "max": 1e6, "default": 200.0, "doc": "hysteresis high"},
    "aperture_size": {"type": "int", "choices": [3, 5, 7], "default": 3},
    "l2_gradient": {"type": "bool", "default": False}}, formats="gray → gray")
CORNER_HARRIS = _cv(0x0817, "cornerHarris", "corner_harris",
                    "Harris corner response (cv::cornerHarris) as an F32 image.", {
                        **PAIR, "block_size": {"type": "int", "min": 1, "max": 31, "default": 2},
                        "ksize": {"type": "int", "choices": [1, 3, 5, 7], "default": 3},
                        "k": {"type": "float", "min": 0.0, "max": 1.0, "default": 0.04},
                        "border": border_param(FILTER_BORDERS)}, formats="gray → F32", shape="f32")
THRESHOLD = _cv(0x0813, "threshold", "threshold",
                "Fixed-level threshold (cv::threshold); method otsu/triangle picks the level. Returns it.", {
                    **PAIR, "thresh": {"type": "float", "default": 127.0},
                    "maxval": {"type": "float", "default": 255.0},
                    "type": {"type": "str", "choices": THRESHOLD_TYPES, "default": "binary"},
                    "method": {"type": "str", "choices": THRESHOLD_METHODS, "default": "fixed",
                               "doc": "fixed: use thresh; otsu/triangle: computed (8-bit only)"}},
                formats="gray or F32 → same", result="threshold")
EQUALIZE_HIST = _cv(0x0805, "equalizeHist", "equalize_hist",
                    "Histogram equalization of an 8-bit gray image (cv::equalizeHist).", dict(PAIR),
                    formats="gray → gray")
INTEGRAL = _cv(0x080a, "integral", "integral",
               "Integral image (cv::integral): dst is (w+1) x (h+1), S32 or F32, first row and column 0.", dict(PAIR),
               formats="gray → S32/F32 of (w+1)×(h+1)", shape="integral", cv2_args=("sdepth",))
CVT_COLOR = _cv(0x0803, "cvtColor", "cvt_color",
                "RGB/BGR -> gray (cv::cvtColor) or -> NV12 / NV12_SEPARATE (BT.601 limited range).", {
                    **PAIR, "code": {"type": "str", "choices": COLOR_CODES},
                    "chroma": {"type": "str", "choices": ["top_left", "average"], "default": "top_left",
                               "doc": "NV12 chroma siting: a 2x2 block's top-left pixel, or its mean"}},
                outputs=(1, 2), formats="RGB/BGR → gray or NV12/NV12_SEPARATE", shape="color")
FLIP = _cv(0x0808, "flip", "flip", "Mirror (cv::flip): 0 around the x axis, 1 around the y axis, -1 both.", {
    **PAIR, "flip_code": {"type": "int", "choices": [0, 1, -1], "default": 1}}, inputs=(1, 2), outputs=(1, 2),
    formats=_ANY)
ROTATE = _cv(0x0810, "rotate", "rotate", "Rotation by a multiple of 90 degrees (cv::rotate).", {
    **PAIR, "rotate_code": {"type": "str", "choices": ROTATIONS, "default": "90cw"}}, inputs=(1, 2), outputs=(1, 2),
    formats=_ANY, shape="rotate")
TRANSPOSE = _cv(0x0814, "transpose", "transpose", "Swap rows and columns (cv::transpose).", dict(PAIR),
                inputs=(1, 2), outputs=(1, 2), formats=_ANY + ", h×w", shape="swap")
RESIZE = _cv(0x080e, "resize", "resize", "Scale the src region to the dst region's size (cv::resize).", {
    **PAIR, "interpolation": _INTERP}, inputs=(1, 2), outputs=(1, 2), formats=_ANY + ", dst's size", shape="resize",
    cv2_args=("dsize", "fx", "fy", "interpolation"))
ROI_RESIZE = _cv(0x080f, "roiResize", "roi_resize",
                 "Crop ``roi`` (inclusive, in the src region), scale it into dst; returns its rect [x, y, w, h].", {
                     **PAIR, "roi": {"type": "int_list", "len": 4, "min": 0,
                                     "doc": "[left, top, right, bottom] inclusive"},
                     "keep_aspect": {"type": "bool", "default": False,
                                     "doc": "false: stretch to dst; true: keep the aspect ratio, centred and padded"},
                     "interpolation": _INTERP,
                     "pad_value": {"type": "int_list", "min": 0, "max": 255, "default": None,
                                   "doc": "one value per channel (Y, U, V for NV12); default black"}},
                 inputs=(1, 2), outputs=(1, 2), formats=_ANY, shape="dsize", result="rect",
                 cv2_args=("roi", "dsize", "keep_aspect", "interpolation", "pad_value"))
PYR_DOWN = _cv(0x080c, "pyrDown", "pyr_down",
               "Gaussian pyramid step down (cv::pyrDown, 5x5 kernel, BORDER_REFLECT_101).", dict(PAIR),
               inputs=(1, 2), outputs=(1, 2), formats=_ANY + ", ≈ half size", shape="half")
PYR_UP = _cv(0x080d, "pyrUp", "pyr_up", "Gaussian pyramid step up (cv::pyrUp, BORDER_REFLECT_101).", dict(PAIR),
             inputs=(1, 2), outputs=(1, 2), formats=_ANY + ", twice the size", shape="double")
WARP_AFFINE = _cv(0x0815, "warpAffine", "warp_affine",
                  "Affine warp (cv::warpAffine) by a 2x3 matrix given row-major (6 values).", {
                      **PAIR, "matrix": {"type": "float_list", "len": 6, "doc": "2x3 row-major"}, **_WARP},
                  **_WARP_FORM)
WARP_PERSPECTIVE = _cv(0x0816, "warpPerspective", "warp_perspective",
                       "Perspective warp (cv::warpPerspective) by a 3x3 matrix given row-major (9 values).", {
                           **PAIR, "matrix": {"type": "float_list", "len": 9, "doc": "3x3 row-major"}, **_WARP},
                       **_WARP_FORM)
REMAP = _cv(0x0818, "remap", "remap",
            "Generic remap (cv::remap): dst(x, y) = src(map_x(x, y), map_y(x, y)); maps are F32 images.", {
                "src": SRC, "map_x": dict(SRC, doc="F32 x coordinates, dst-sized"),
                "map_y": dict(SRC, doc="F32 y coordinates, dst-sized"), "dst": DST,
                "interpolation": _WARP_INTERP, "border": _WARP_BORDER, "border_value": _VALUE}, inputs=3,
            formats="any but NV12 → same; maps F32, dst-sized", shape="maps")
LUT = _cv(0x0819, "LUT", "lut", "Table lookup (cv::LUT): every 8-bit value v of every channel becomes table[v].", {
    **PAIR, "table": {"type": "int_list", "len": 256, "min": 0, "max": 255, "doc": "the output for each value"}},
    formats=_8BIT, j5=False)

#: every CV entry by command id, in the order of their declarations
ENTRIES = catalog(*_DECLARED)

#: J5 sample name -> command id (the operators of the J5 CV sample)
BY_J5 = {e.j5: op_id for op_id, e in ENTRIES.items() if e.j5}

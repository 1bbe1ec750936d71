"""Argument conversion for ``arm_side.cv``: OpenCV's own constants and shapes -> the wire form.

Each converter takes the operator's name, the parameter's name and the value, and returns
a dict of wire parameters (usually one entry; a combined OpenCV flag may set two, e.g.
``THRESH_BINARY | THRESH_OTSU`` sets ``type`` and ``method``). Anything it cannot use is
an ``InvalidArgument`` naming the operator and the parameter, never a TypeError.

The OpenCV constants are plain integers of OpenCV's public API (stable across versions),
spelled out here so that the ARM SDK does not need to import cv2.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np

from protocol import errors

Converter = Callable[[str, str, Any], dict]

# cv2.BORDER_*: CONSTANT 0, REPLICATE 1, REFLECT 2, WRAP 3, REFLECT_101 (= DEFAULT) 4, TRANSPARENT 5.
BORDERS = {0: "constant", 1: "replicate", 2: "reflect", 3: "wrap", 4: "reflect101", 5: "transparent"}
BORDER_ISOLATED = 16        # always on here: an ROI is a crop (docs/cv.md)
BORDER_NAMES = {"reflect_101": "reflect101", "default": "reflect101"}
# cv2.INTER_*: NEAREST 0, LINEAR 1, CUBIC 2, AREA 3, LANCZOS4 4, LINEAR_EXACT 5, NEAREST_EXACT 6.
INTERPOLATIONS = {0: "nearest", 1: "linear", 2: "cubic", 3: "area", 4: "lanczos4", 5: "linear_exact",
                  6: "nearest_exact"}
WARP_INVERSE_MAP = 16
# cv2.THRESH_*: BINARY 0 .. TOZERO_INV 4 (THRESH_MASK 7), OTSU 8, TRIANGLE 16.
THRESH_TYPES = {0: "binary", 1: "binary_inv", 2: "trunc", 3: "tozero", 4: "tozero_inv"}
THRESH_METHODS = {0: "fixed", 8: "otsu", 16: "triangle"}
MORPH_SHAPES = {0: "rect", 1: "cross", 2: "ellipse"}                  # cv2.MORPH_RECT, _CROSS, _ELLIPSE
ROTATIONS = {0: "90cw", 1: "180", 2: "90ccw"}                         # cv2.ROTATE_90_CLOCKWISE, _180, _COUNTER...
ROTATION_NAMES = {"rotate_90_clockwise": "90cw", "rotate_180": "180", "rotate_90_counterclockwise": "90ccw"}
COLOR_CODES = {6: "BGR2GRAY", 7: "RGB2GRAY"}                          # cv2.COLOR_BGR2GRAY, COLOR_RGB2GRAY
# cv2.CV_8U 0, CV_16S 3, CV_32S 4, CV_32F 5: the depth of a new destination (numpy mode).
DEPTHS = {0: "U8", 2: "U16", 3: "S16", 4: "S32", 5: "F32"}


def fail(op: str, name: str, what: str, value: Any) -> errors.VdspError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return errors.InvalidArgument(f"{op}: parameter {name!r} must be {what}, got {shown} ({type(value).__name__})")


def is_int(value: Any) -> bool:
    if type(value) is int:
        return True
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value: Any) -> bool:
    if type(value) in (float, int):
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def as_int(op: str, name: str, value: Any) -> int:
    if not is_int(value):
        raise fail(op, name, "an integer", value)
    return int(value)


def as_ints(op: str, name: str, value: Any, length: int | None = None) -> list[int]:
    if type(value) in (tuple, list) and all(type(v) is int for v in value) \
            and (length is None or len(value) == length):
        return list(value)
    try:
        items = list(np.asarray(value).ravel()) if isinstance(value, np.ndarray) else list(value)
    except TypeError:
        raise fail(op, name, f"a sequence of {length or 'some'} integers", value) from None
    if (length is not None and len(items) != length) or not all(is_int(v) for v in items):
        raise fail(op, name, f"a sequence of {length or 'some'} integers", value)
    return [int(v) for v in items]


def as_floats(op: str, name: str, value: Any) -> list[float]:
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        raise fail(op, name, "an array of numbers", value) from None
    if arr.dtype.kind not in "iuf" or arr.size == 0:
        raise fail(op, name, "a non-empty array of numbers", value)
    return [float(v) for v in arr.ravel()]


def _name(value: str, prefix: str, aliases: dict[str, str] | None = None) -> str:
    """'BORDER_REFLECT' / 'Reflect' -> 'reflect'. An unknown name passes through: the DSP checks
    the choices and its InvalidArgument names the parameter."""
    key = value.strip().lower()
    if prefix and key.startswith(prefix):
        key = key[len(prefix):]
    return (aliases or {}).get(key, key)


def _choice(op: str, name: str, value: Any, table: dict[int, str], prefix: str, what: str,
            aliases: dict[str, str] | None = None) -> str:
    if isinstance(value, str):
        return _name(value, prefix, aliases)
    if is_int(value) and int(value) in table:
        return table[int(value)]
    raise fail(op, name, what, value)


# --- converters (op, name, value) -> wire entries ------------------------------------------

def integer(op: str, name: str, value: Any) -> dict:
    return {name: as_int(op, name, value)}


def real(op: str, name: str, value: Any) -> dict:
    if not is_real(value):
        raise fail(op, name, "a number", value)
    return {name: float(value)}


def boolean(op: str, name: str, value: Any) -> dict:
    if isinstance(value, (bool, np.bool_)) or (is_int(value) and int(value) in (0, 1)):
        return {name: bool(value)}
    raise fail(op, name, "True or False", value)


def text(op: str, name: str, value: Any) -> dict:
    if not isinstance(value, str):
        raise fail(op, name, "a string", value)
    return {name: value}


def ksize(op: str, name: str, value: Any) -> dict:
    """An int k means (k, k), as OpenCV users write ``ksize=5``; else (width, height)."""
    if is_int(value):
        return {name: [int(value)] * 2}
    return {name: as_ints(op, name, value, 2)}


def anchor(op: str, name: str, value: Any) -> dict:
    """(x, y); (-1, -1) or None (as cv2 takes it) = the kernel's centre."""
    return {name: [-1, -1] if value is None else as_ints(op, name, value, 2)}


def rect(op: str, name: str, value: Any) -> dict:
    return {name: as_ints(op, name, value, 4)}


def values_per_channel(op: str, name: str, value: Any) -> dict:
    return {name: [as_int(op, name, value)] if is_int(value) else as_ints(op, name, value)}


def ints(op: str, name: str, value: Any) -> dict:
    """A sequence or array of integers (its length and range are the DSP's to check)."""
    return {name: as_ints(op, name, value)}


def floats(op: str, name: str, value: Any) -> dict:
    return {name: as_floats(op, name, value)}


def kernel2d(op: str, name: str, value: Any) -> dict:
    """filter2D's kernel: a 2-D array (rows x cols); a 1-D array is one column, as cv2 reads it."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail(op, name, "a 2-D array of numbers (rows x cols)", value) from None
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2 or arr.size == 0:
        raise fail(op, name, "a 2-D array of numbers (rows x cols)", value)
    return {name: [float(v) for v in arr.ravel()], "ksize": [arr.shape[1], arr.shape[0]]}


def matrix(rows: int) -> Converter:
    def convert(op: str, name: str, value: Any) -> dict:
        flat = as_floats(op, name, value)
        if len(flat) != rows * 3:
            raise fail(op, name, f"a {rows}x3 matrix ({rows * 3} numbers)", value)
        return {name: flat}
    return convert


def border(op: str, name: str, value: Any) -> dict:
    """cv2.BORDER_* (BORDER_ISOLATED may be or-ed in: it is always the behaviour here) or a name."""
    if is_int(value):
        value = int(value) & ~BORDER_ISOLATED
    return {"border": _choice(op, name, value, BORDERS, "border_",
                              "a cv2.BORDER_* constant or a name such as 'reflect101'", BORDER_NAMES)}


def interpolation(op: str, name: str, value: Any) -> dict:
    """cv2.INTER_* or a name; for warps ``| cv2.WARP_INVERSE_MAP`` sets inverse_map too."""
    out: dict = {}
    if is_int(value) and int(value) & WARP_INVERSE_MAP and op in ("warp_affine", "warp_perspective"):
        value = int(value) & ~WARP_INVERSE_MAP
        out["inverse_map"] = True
    out["interpolation"] = _choice(op, name, value, INTERPOLATIONS, "inter_",
                                   "a cv2.INTER_* constant or a name such as 'linear'")
    return out


def threshold_type(op: str, name: str, value: Any) -> dict:
    """cv2.THRESH_* with THRESH_OTSU / THRESH_TRIANGLE or-ed in (as cv2.threshold takes it), or a name."""
    if isinstance(value, str):
        return {"type": _name(value, "thresh_")}
    if is_int(value):
        v = int(value)
        kind, method = v & 7, v & ~7
        if kind in THRESH_TYPES and method in THRESH_METHODS:
            out = {"type": THRESH_TYPES[kind]}
            if method:
                out["method"] = THRESH_METHODS[method]
            return out
    raise fail(op, name, "a cv2.THRESH_* type, optionally | cv2.THRESH_OTSU or | cv2.THRESH_TRIANGLE", value)


def threshold_method(op: str, name: str, value: Any) -> dict:
    return {"method": _choice(op, name, value, THRESH_METHODS, "thresh_",
                              "'fixed', 'otsu', 'triangle', cv2.THRESH_OTSU or cv2.THRESH_TRIANGLE")}


def morph_shape(op: str, name: str, value: Any) -> dict:
    return {name: _choice(op, name, value, MORPH_SHAPES, "morph_", "a cv2.MORPH_* shape or 'rect'/'cross'/'ellipse'")}


def rotate_code(op: str, name: str, value: Any) -> dict:
    return {name: _choice(op, name, value, ROTATIONS, "",
                          "cv2.ROTATE_90_CLOCKWISE, ROTATE_180, ROTATE_90_COUNTERCLOCKWISE or '90cw'/'180'/'90ccw'",
                          ROTATION_NAMES)}


def color_code(op: str, name: str, value: Any) -> dict:
    if isinstance(value, str):
        key = value.strip().upper()
        return {name: key[len("COLOR_"):] if key.startswith("COLOR_") else key}
    if is_int(value) and int(value) in COLOR_CODES:
        return {name: COLOR_CODES[int(value)]}
    raise fail(op, name, "cv2.COLOR_BGR2GRAY, cv2.COLOR_RGB2GRAY or a name such as 'BGR2NV12'", value)


def depth(op: str, name: str, value: Any) -> int:
    """cv2.CV_8U / CV_16S / CV_32S / CV_32F / -1 (numpy mode: the new dst's depth)."""
    if is_int(value) and (int(value) == -1 or int(value) in DEPTHS):
        return int(value)
    raise fail(op, name, "-1 or cv2.CV_8U, CV_16U, CV_16S, CV_32S, CV_32F", value)


def _ellipse(w: int, h: int) -> np.ndarray:
    """cv2.getStructuringElement(MORPH_ELLIPSE, (w, h)), by OpenCV's own rule."""
    out = np.zeros((h, w), np.uint8)
    r, c = h // 2, w // 2
    inv_r2 = 1.0 / (r * r) if r else 0.0
    for i in range(h):
        dy = i - r
        if abs(dy) <= r:
            dx = int(np.rint(c * np.sqrt((r * r - dy * dy) * inv_r2)))
            out[i, max(c - dx, 0):min(c + dx + 1, w)] = 1
    return out


def structuring_element(shape: str, w: int, h: int) -> np.ndarray:
    """The element ``shape`` ('rect', 'cross', 'ellipse') of w x h, as cv2.getStructuringElement makes it."""
    if shape == "rect":
        return np.ones((h, w), np.uint8)
    if shape == "cross":
        out = np.zeros((h, w), np.uint8)
        out[h // 2, :] = 1
        out[:, w // 2] = 1
        return out
    return _ellipse(w, h)


def morph_kernel(op: str, name: str, value: Any) -> dict:
    """A structuring element array as cv2.dilate/erode take it: must be one that
    cv2.getStructuringElement makes (rect, cross or ellipse); sets ksize and shape."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        arr = np.asarray([])
    if arr.ndim != 2 or arr.size == 0 or arr.dtype.kind not in "iufb":
        raise fail(op, name, "a 2-D structuring element (cv2.getStructuringElement)", value)
    h, w = arr.shape
    mask = arr != 0
    for shape in ("rect", "cross", "ellipse"):
        if np.array_equal(mask, structuring_element(shape, w, h) != 0):
            return {"ksize": [w, h], "shape": shape}
    raise fail(op, name, "a rect, cross or ellipse element as cv2.getStructuringElement makes it "
               "(other elements are not supported by the DSP operator)", value)

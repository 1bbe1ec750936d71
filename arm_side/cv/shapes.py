"""Numpy mode's destination rules: what image a CV function allocates for its result.

A CV entry names its rule (``CvForm.shape``, ``protocol.contract.cv_ops``); :data:`RULES`
holds each rule's function, the numpy-only keywords it reads (with their defaults) and the
sentence the function's docstring gets. A new operator whose result is shaped like an
existing one's names that rule; only a new kind of shape adds a rule here.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from protocol import errors
from arm_side.cv import args as a


@dataclasses.dataclass(frozen=True)
class Ctx:
    """What a numpy-mode destination is derived from."""
    op: str
    fmt: str                    # the source's format
    width: int
    height: int
    wire: dict                  # converted operator parameters
    extra: dict                 # numpy-only keywords (ddepth, dsize, ...)
    arrays: tuple               # every input array


OutFn = Callable[[Ctx], tuple[str, int, int]]


@dataclasses.dataclass(frozen=True)
class Rule:
    out: OutFn
    summary: str                                # the destination it makes (docs/custom_ops.md's table)
    extra: tuple[tuple[str, Any], ...] = ()     # numpy-only keywords and their defaults
    doc: str = ""                               # numpy mode, for the function's docstring


def _same(c: Ctx) -> tuple[str, int, int]:
    return c.fmt, c.width, c.height


def _depth_out(c: Ctx) -> tuple[str, int, int]:
    """filter2d / sep_filter2d / sobel: ``ddepth`` -1 or CV_8U keeps the source's format."""
    d = a.depth(c.op, "ddepth", c.extra["ddepth"])
    if d in (-1, 0):
        return c.fmt, c.width, c.height
    if d not in (3, 5):
        raise a.fail(c.op, "ddepth", "-1, cv2.CV_8U, cv2.CV_16S or cv2.CV_32F", d)
    return a.DEPTHS[d], c.width, c.height


def _same_depth_out(c: Ctx) -> tuple[str, int, int]:
    """box_filter keeps the depth: ``ddepth`` -1 or CV_8U."""
    if a.depth(c.op, "ddepth", c.extra["ddepth"]) not in (-1, 0):
        raise a.fail(c.op, "ddepth", "-1 or cv2.CV_8U (the DSP's boxFilter keeps the depth)", c.extra["ddepth"])
    return c.fmt, c.width, c.height


def _integral_out(c: Ctx) -> tuple[str, int, int]:
    d = a.depth(c.op, "sdepth", c.extra["sdepth"])
    if d not in (-1, 4, 5):
        raise a.fail(c.op, "sdepth", "-1, cv2.CV_32S or cv2.CV_32F", d)
    return ("F32" if d == 5 else "S32"), c.width + 1, c.height + 1


def dsize(c: Ctx, required: bool) -> tuple[int, int] | None:
    """The ``dsize`` keyword as (width, height); None when not given (or (0, 0)) and not required.
    Raises InvalidArgument."""
    value = c.extra.get("dsize")
    if value is None or (a.is_int(value) and value == 0):
        if required:
            raise errors.InvalidArgument(f"{c.op}: numpy input needs dsize=(width, height)")
        return None
    w, h = a.as_ints(c.op, "dsize", value, 2)
    if (w, h) == (0, 0) and not required:
        return None
    if w < 1 or h < 1:
        raise a.fail(c.op, "dsize", "(width, height) of at least 1 each", value)
    return w, h


def _resize_out(c: Ctx) -> tuple[str, int, int]:
    """cv2.resize's rule: dsize, else round(size * fx), round(size * fy)."""
    size = dsize(c, required=False)
    if size is not None:
        return c.fmt, size[0], size[1]
    fx, fy = c.extra.get("fx", 0), c.extra.get("fy", 0)
    for name, f in (("fx", fx), ("fy", fy)):
        if not a.is_real(f) or f <= 0:
            raise errors.InvalidArgument(f"{c.op}: numpy input needs dsize=(width, height) or fx and fy > 0 "
                                         f"(got dsize {c.extra.get('dsize')!r}, {name} {f!r})")
    return c.fmt, max(1, round(c.width * fx)), max(1, round(c.height * fy))


def _dsize_out(c: Ctx) -> tuple[str, int, int]:
    return (c.fmt, *(dsize(c, required=True) or (0, 0)))


def _warp_out(c: Ctx) -> tuple[str, int, int]:
    return (c.fmt, *(dsize(c, required=False) or (c.width, c.height)))


def _cvt_out(c: Ctx) -> tuple[str, int, int]:
    code = c.wire["code"]
    if code.endswith("2GRAY"):
        return "Y", c.width, c.height
    if code.endswith("2NV12"):
        return "NV12", c.width, c.height
    raise a.fail(c.op, "code", "cv2.COLOR_BGR2GRAY, cv2.COLOR_RGB2GRAY, 'BGR2NV12' or 'RGB2NV12'", code)


def _remap_out(c: Ctx) -> tuple[str, int, int]:
    map_x, map_y = c.arrays[1], c.arrays[2]
    if map_x.shape != map_y.shape:
        raise errors.InvalidArgument(f"{c.op}: map_x {map_x.shape} and map_y {map_y.shape} must have one shape")
    return c.fmt, map_x.shape[1], map_x.shape[0]


def _swap(c: Ctx) -> tuple[str, int, int]:
    return c.fmt, c.height, c.width


_DDEPTH = (("ddepth", -1),)
_DSIZE = (("dsize", None),)

RULES: dict[str, Rule] = {
    "same": Rule(_same, "the source's format and size"),
    "same_depth": Rule(_same_depth_out, "the source's format and size; ddepth may only say so", _DDEPTH,
                       "numpy: ddepth -1 or cv2.CV_8U (the depth is kept)."),
    "depth": Rule(_depth_out, "the source's size, the format ddepth names", _DDEPTH,
                  "numpy: ddepth -1 (the source's), cv2.CV_8U, CV_16S or CV_32F."),
    "integral": Rule(_integral_out, "S32 or F32 (sdepth), one more row and column", (("sdepth", -1),),
                     "numpy: sdepth cv2.CV_32S (default) or CV_32F."),
    "resize": Rule(_resize_out, "the source's format, dsize or the source's size scaled by fx, fy",
                   (("dsize", None), ("fx", 0.0), ("fy", 0.0)), "numpy: dsize=(w, h), or fx and fy."),
    "dsize": Rule(_dsize_out, "the source's format, dsize (required)", _DSIZE, "numpy: dsize=(w, h) is required."),
    "warp": Rule(_warp_out, "the source's format, dsize or the source's size", _DSIZE,
                 "numpy: dsize=(w, h), default the source's size."),
    "color": Rule(_cvt_out, "Y or NV12, by the colour code", (),
                  "numpy: Y for the *2GRAY codes, NV12 ((H*3/2) x W) for *2NV12."),
    "half": Rule(lambda c: (c.fmt, (c.width + 1) // 2, (c.height + 1) // 2), "the source's format, half size "
                 "rounded up", (), "numpy: dst about half the src."),
    "double": Rule(lambda c: (c.fmt, 2 * c.width, 2 * c.height), "the source's format, twice the size", (),
                   "numpy: dst twice the src."),
    "rotate": Rule(lambda c: _same(c) if c.wire["rotate_code"] == "180" else _swap(c),
                   "the source's format, width and height swapped unless rotate_code is 180"),
    "swap": Rule(_swap, "the source's format, width and height swapped"),
    "f32": Rule(lambda c: ("F32", c.width, c.height), "F32 of the source's size", (), "numpy: an F32 array."),
    "maps": Rule(_remap_out, "the source's format, the maps' size", (), "numpy: dst has the maps' shape."),
}

"""What every CV operator shares: buffer binding, OpenCV enums (the parameter specs are the
contract's, ``protocol.contract.cv_ops``).

Invariant kept by :func:`bind`: an operator gets views of exactly the valid
pixels of each image's region, so a kernel that writes only into its
destination views can never touch padding bytes or pixels outside the ROI.
"""
from __future__ import annotations

import copy
import cv2
import numpy as np

from protocol import errors
from protocol.contract import image_formats as formats
from protocol.contract.image_formats import ImageDesc
from dsp_side import ddr_resolver

# Formats by role.
GRAY = ("Y", "U8")
PACKED8 = ("Y", "U8", "RGB", "BGR", "YUV444")
ALL_PIXELS = ("Y", "U8", "U16", "S16", "S32", "F32", "RGB", "BGR", "YUV444")
GEOMETRY = ALL_PIXELS + formats.YUV420      # per-plane geometric operators also take NV12

BORDERS = {"reflect101": cv2.BORDER_REFLECT_101, "constant": cv2.BORDER_CONSTANT,
           "replicate": cv2.BORDER_REPLICATE, "reflect": cv2.BORDER_REFLECT, "wrap": cv2.BORDER_WRAP,
           "transparent": cv2.BORDER_TRANSPARENT}
INTERPOLATIONS = {"nearest": cv2.INTER_NEAREST, "linear": cv2.INTER_LINEAR, "cubic": cv2.INTER_CUBIC,
                  "area": cv2.INTER_AREA, "lanczos4": cv2.INTER_LANCZOS4,
                  "linear_exact": cv2.INTER_LINEAR_EXACT, "nearest_exact": cv2.INTER_NEAREST_EXACT}


#: bind's results, kept while the same descriptor objects meet the same buffer arrays (see bind)
BOUND_MAX = 128
_bound: dict = {}
ddr_resolver.ON_DROP.append(_bound.clear)


def bind(op: str, buffers: list, specs: list[tuple[str, object, tuple[str, ...]]]) -> list[tuple[ImageDesc, list]]:
    """Parse each ``(name, descriptor, accepted formats)`` and give it its buffers, in order.

    Returns ``[(image, plane views), ...]``. Raises InvalidArgument when a descriptor
    is bad, when the number of buffers does not match the formats, or a buffer is too small.

    A call with the very descriptor objects (still equal to what they were) and buffer arrays
    of an earlier call gives that call's images and views again (new lists): the firmware hands
    an operator the same parameter objects for the same task body and the same array for the
    same live handle (``Resolver.array``), and descriptors and views are functions of those alone. Kept views
    would keep a dropped segment's mapping open: a resolver dropping any mapping empties the
    cache first (``ddr_resolver.ON_DROP``).
    """
    try:
        key = (op, *[(name, id(desc), accepted) for name, desc, accepted in specs], *map(id, buffers))
        hash(key)
    except TypeError:        # accepted formats that are not hashable: no cache
        key = None
    if key is not None:
        hit = _bound.get(key)
        # the entry holds its descriptors and buffers (their ids stay theirs) and a copy of each
        # descriptor: one changed in place since is looked at afresh
        if hit is not None and all(spec[1] == kept for spec, kept in zip(specs, hit[1])):
            return [(img, list(views)) for img, views in hit[0]]
    images = [formats.parse(name, desc, accepted) for name, desc, accepted in specs]
    need = sum(img.buffers for img in images)
    if need != len(buffers):
        names = ", ".join(f"{img.name} {img.format}: {img.buffers}" for img in images)
        raise errors.InvalidArgument(f"{op}: the images need {need} buffers ({names}), the task has {len(buffers)}")
    out, at = [], 0
    for img in images:
        out.append((img, formats.planes(img, buffers[at:at + img.buffers])))
        at += img.buffers
    if key is not None:
        if len(_bound) >= BOUND_MAX:
            del _bound[next(iter(_bound))]
        _bound[key] = (out, [copy.deepcopy(desc) for _, desc, _ in specs], list(buffers), [d for _, d, _ in specs])
        return [(img, list(views)) for img, views in out]
    return out


def same_size(op: str, a: ImageDesc, b: ImageDesc) -> None:
    """Raises InvalidArgument unless the two regions have the same width and height."""
    if a.size != b.size:
        raise errors.InvalidArgument(f"{op}: {b.name} region {b.size[0]}x{b.size[1]} must equal the "
                                     f"{a.name} region {a.size[0]}x{a.size[1]}")


def same_format(op: str, a: ImageDesc, b: ImageDesc) -> None:
    """Raises InvalidArgument unless both images have the same format."""
    if a.format != b.format and not {a.format, b.format} <= set(formats.YUV420) \
            and not {a.format, b.format} <= set(GRAY):
        raise errors.InvalidArgument(f"{op}: {b.name} format {b.format} must match {a.name} format {a.format}")


def kernel_list(op: str, name: str, values: list, length: int) -> np.ndarray:
    """A float32 kernel of exactly ``length`` coefficients. Raises InvalidArgument."""
    if len(values) != length:
        raise errors.InvalidArgument(f"{op}: parameter {name!r} must have {length} coefficients, got {len(values)}")
    return np.asarray(values, dtype=np.float32)


def anchor_in(op: str, anchor: list[int], kw: int, kh: int) -> tuple[int, int]:
    """(-1, -1) means the centre. Raises InvalidArgument for an anchor outside the kernel."""
    x, y = anchor
    if (x, y) != (-1, -1) and not (0 <= x < kw and 0 <= y < kh):
        raise errors.InvalidArgument(
            f"{op}: parameter 'anchor' {anchor} must be [-1, -1] or inside the {kw}x{kh} kernel")
    return x, y


def store(dst: np.ndarray, result: np.ndarray) -> None:
    """Make sure ``result`` is in ``dst`` (OpenCV writes in place when it can; copy otherwise)."""
    if result is not dst:
        dst[...] = result


class opencv:      # noqa: N801 - used as ``with opencv(op):``, like the function it was
    """Map an OpenCV refusal to InvalidArgument (a safety net: parameters are checked before).

    A class, not a ``contextlib.contextmanager``: no generator per task."""

    __slots__ = ("op",)

    def __init__(self, op: str) -> None:
        self.op = op

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> None:
        if kind is not None and issubclass(kind, cv2.error):
            msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else "error"
            raise errors.InvalidArgument(f"{self.op}: OpenCV refused the arguments: {msg}") from exc

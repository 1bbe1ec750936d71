"""Image descriptors on shared memory: formats, validation and strided numpy views.

Pure (numpy only): used by the DSP operators and by the ARM-side CV API, so both
sides agree on sizes and layouts. A descriptor is plain data (it travels as an
operator parameter)::

    {"format": "NV12", "width": 500, "height": 480, "stride": 512,
     "roi": [200, 200, 359, 419]}          # optional; left, top, right, bottom inclusive

Layouts (``stride`` is bytes per row, >= the row's bytes, a multiple of the
element size; padding bytes after each row are never read or written):

- Y, U8, U16, S16, S32, F32: one plane, one channel.
- RGB, BGR, YUV444: one plane, three interleaved 8-bit channels.
- NV12: one buffer; the Y plane (``height`` rows) then, at byte ``stride * height``,
  the interleaved UV plane (``height / 2`` rows of ``width / 2`` UV pairs).
- NV12_SEPARATE: the same two planes in two buffers, same stride.

A region of interest makes the operator see (or write) only that rectangle, as
if it were the whole image: borders are extrapolated at the ROI's edges.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from protocol import errors, schema

# name -> (channels, numpy dtype)
_PIXEL = {
    "Y": (1, np.uint8), "U8": (1, np.uint8), "U16": (1, np.uint16), "S16": (1, np.int16),
    "S32": (1, np.int32), "F32": (1, np.float32),
    "RGB": (3, np.uint8), "BGR": (3, np.uint8), "YUV444": (3, np.uint8),
    "NV12": (1, np.uint8), "NV12_SEPARATE": (1, np.uint8),
}
FORMATS = tuple(_PIXEL)
YUV420 = ("NV12", "NV12_SEPARATE")
MAX_SIDE = 1 << 15          # a guard against absurd sizes, larger than any sensor


@dataclasses.dataclass(frozen=True)
class ImageDesc:
    """A checked descriptor. ``roi`` is (left, top, right, bottom), inclusive, never None."""

    name: str           # the parameter it came from, for error messages
    format: str
    width: int
    height: int
    stride: int
    roi: tuple[int, int, int, int]

    @property
    def channels(self) -> int:
        return _PIXEL[self.format][0]

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(_PIXEL[self.format][1])

    @property
    def row_bytes(self) -> int:
        return self.width * self.channels * self.dtype.itemsize

    @property
    def buffers(self) -> int:
        """How many shared buffers hold this image (2 for NV12_SEPARATE)."""
        return 2 if self.format == "NV12_SEPARATE" else 1

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the region the operator sees."""
        left, top, right, bottom = self.roi
        return right - left + 1, bottom - top + 1

    @property
    def has_roi(self) -> bool:
        return self.roi != (0, 0, self.width - 1, self.height - 1)

    def plane_bytes(self) -> list[int]:
        """Bytes each buffer must hold (the last row needs no padding)."""
        y = (self.height - 1) * self.stride + self.row_bytes
        if self.format == "NV12":
            return [self.height * self.stride + (self.height // 2 - 1) * self.stride + self.width]
        if self.format == "NV12_SEPARATE":
            return [y, (self.height // 2 - 1) * self.stride + self.width]
        return [y]


def _int(name: str, key: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.InvalidArgument(f"{name}: {key} must be an integer, got {value!r:.40}")
    if not lo <= value <= hi:
        raise errors.InvalidArgument(f"{name}: {key} must be in {lo}..{hi}, got {value}")
    return value


_MEMO_SIZE = 256
_memo: dict = {}


def parse(name: str, desc, formats: tuple[str, ...] = FORMATS) -> ImageDesc:
    """Check descriptor ``desc`` (parameter ``name``) and return it as an ImageDesc.

    Raises InvalidArgument naming the parameter and the field: not a map, unknown
    keys, a format not in ``formats``, sizes, stride, ROI outside the image or
    (YUV 4:2:0) not on even coordinates. A descriptor seen before (same bytes in
    msgpack, same name and formats) gives the ImageDesc it gave then (immutable): an
    operator's images are the same from task to task.
    """
    try:
        key = (name, schema._packb(desc), formats)
    except Exception:        # not wire data, or formats not hashable: checked every time
        return _parse(name, desc, formats)
    img = _memo.get(key)
    if img is None:
        img = _parse(name, desc, formats)
        if len(_memo) >= _MEMO_SIZE:
            del _memo[next(iter(_memo))]
        _memo[key] = img
    return img


def _parse(name: str, desc, formats: tuple[str, ...]) -> ImageDesc:
    if not isinstance(desc, dict):
        raise errors.InvalidArgument(f"{name}: image descriptor must be a map, got {type(desc).__name__}")
    unknown = set(desc) - {"format", "width", "height", "stride", "roi"}
    if unknown:
        raise errors.InvalidArgument(f"{name}: unknown descriptor key(s) {sorted(map(str, unknown))}")
    missing = [k for k in ("format", "width", "height") if k not in desc]
    if missing:
        raise errors.InvalidArgument(f"{name}: descriptor lacks {', '.join(missing)}")
    fmt = desc["format"]
    if fmt not in formats:
        raise errors.InvalidArgument(f"{name}: format {fmt!r} is not accepted here; accepted: {', '.join(formats)}")
    width = _int(name, "width", desc["width"], 1, MAX_SIDE)
    height = _int(name, "height", desc["height"], 1, MAX_SIDE)
    if fmt in YUV420 and (width % 2 or height % 2):
        raise errors.InvalidArgument(f"{name}: {fmt} needs an even width and height, got {width}x{height}")
    channels, dtype = _PIXEL[fmt]
    itemsize = np.dtype(dtype).itemsize
    row = width * channels * itemsize
    stride = _int(name, "stride", desc.get("stride", row), row, MAX_SIDE * 16)
    if stride % itemsize:
        raise errors.InvalidArgument(f"{name}: stride {stride} must be a multiple of the {itemsize}-byte element")
    roi = _roi(name, desc.get("roi"), width, height, fmt in YUV420)
    return ImageDesc(name, fmt, width, height, stride, roi)


def _roi(name: str, roi, width: int, height: int, even: bool) -> tuple[int, int, int, int]:
    if roi is None:
        return 0, 0, width - 1, height - 1
    if not isinstance(roi, (list, tuple)) or len(roi) != 4:
        raise errors.InvalidArgument(f"{name}: roi must be [left, top, right, bottom], got {roi!r:.60}")
    left, top, right, bottom = (_int(name, f"roi.{k}", v, 0, MAX_SIDE)
                                for k, v in zip(("left", "top", "right", "bottom"), roi))
    if not (left <= right < width and top <= bottom < height):
        raise errors.InvalidArgument(
            f"{name}: roi left {left}, top {top}, right {right}, bottom {bottom} is not inside the "
            f"{width}x{height} image (inclusive, left <= right, top <= bottom)")
    if even and (left % 2 or top % 2 or right % 2 == 0 or bottom % 2 == 0):
        raise errors.InvalidArgument(f"{name}: a YUV 4:2:0 roi must start on even and end on odd coordinates, "
                                     f"got [{left}, {top}, {right}, {bottom}]")
    return left, top, right, bottom


def check_buffers(img: ImageDesc, buffers: list) -> None:
    """Raises InvalidArgument when a buffer is too small for ``img``."""
    for i, (buf, need) in enumerate(zip(buffers, img.plane_bytes())):
        if buf.size < need:
            plane = f" plane {i}" if len(buffers) > 1 else ""
            raise errors.InvalidArgument(
                f"{img.name}: buffer{plane} of {buf.size} bytes is too small for {img.width}x{img.height} "
                f"{img.format} with stride {img.stride} (needs {need})")


def _plane(buf: np.ndarray, offset: int, rows: int, cols: int, channels: int, dtype: np.dtype,
           stride: int, name: str) -> np.ndarray:
    shape = (rows, cols) if channels == 1 else (rows, cols, channels)
    strides = (stride, dtype.itemsize) if channels == 1 else (stride, channels * dtype.itemsize, dtype.itemsize)
    view = np.ndarray(shape, dtype=dtype, buffer=buf, offset=offset, strides=strides)
    if dtype.itemsize > 1 and view.ctypes.data % dtype.itemsize:     # (ctypes.data costs µs: bytes need no check)
        raise errors.InvalidArgument(f"{name}: buffer address is not aligned to its {dtype.itemsize}-byte elements")
    return view


def planes(img: ImageDesc, buffers: list) -> list[np.ndarray]:
    """Views of the valid pixels of ``img``'s region (no copy), honouring the stride.

    One view for packed formats (H x W or H x W x C); two for YUV 4:2:0: Y (H x W)
    and UV (H/2 x W/2 x 2). Views of read-only buffers are read-only. Raises
    InvalidArgument (buffer too small or misaligned).
    """
    check_buffers(img, buffers)
    left, top, right, bottom = img.roi
    if img.format in YUV420:
        uv_buf, uv_off = (buffers[0], img.height * img.stride) if img.format == "NV12" else (buffers[1], 0)
        y = _plane(buffers[0], 0, img.height, img.width, 1, img.dtype, img.stride, img.name)
        uv = _plane(uv_buf, uv_off, img.height // 2, img.width // 2, 2, img.dtype, img.stride, img.name)
        return [y[top:bottom + 1, left:right + 1], uv[top // 2:(bottom + 1) // 2, left // 2:(right + 1) // 2]]
    view = _plane(buffers[0], 0, img.height, img.width, img.channels, img.dtype, img.stride, img.name)
    return [view[top:bottom + 1, left:right + 1]]

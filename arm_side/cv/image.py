"""Images in shared memory on the ARM side: allocate, write and read them with any stride.

::

    src = cv.write_image(soc, pixels, "Y", stride=512)     # H x W uint8 -> a new buffer
    dst = cv.alloc_image(soc, "Y", 500, 480, stride=512)
    cv.gaussian_blur(soc, src, dst, ksize=(5, 5), sigma_x=1.2)
    out = cv.read_image(dst)                                # H x W copy of the valid pixels

NV12 / NV12_SEPARATE pixels are exchanged in OpenCV's NV12 layout: an
(H * 3/2) x W uint8 array, Y rows then interleaved UV rows. Layout rules and
descriptor fields are those of :mod:`protocol.contract.image_formats`.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from arm_side.memory import CLEAN, INVALIDATE, Mem
from protocol.contract import image_formats as formats
from protocol import errors


@dataclasses.dataclass(frozen=True)
class Image:
    """An image descriptor plus the shared buffer(s) holding it (2 for NV12_SEPARATE)."""

    mems: tuple[Mem, ...]
    format: str
    width: int
    height: int
    stride: int
    roi: tuple[int, int, int, int] | None = None

    def desc(self) -> dict:
        """The descriptor sent as an operator parameter."""
        out = {"format": self.format, "width": self.width, "height": self.height, "stride": self.stride}
        if self.roi is not None:
            out["roi"] = list(self.roi)
        return out

    def spec(self) -> formats.ImageDesc:
        """The checked descriptor. Raises InvalidArgument."""
        return formats.parse("image", self.desc())

    def with_roi(self, roi: tuple[int, int, int, int] | None) -> "Image":
        """The same buffers seen through another region (left, top, right, bottom inclusive; None = all).
        Raises InvalidArgument."""
        img = dataclasses.replace(self, roi=_roi(roi))
        img.spec()
        return img

    @property
    def shape(self) -> tuple[int, ...]:
        """numpy shape of :func:`read_image` of the whole image."""
        spec = self.spec()
        if self.format in formats.YUV420:
            return (self.height * 3 // 2, self.width)
        return (self.height, self.width) if spec.channels == 1 else (self.height, self.width, spec.channels)


def _roi(roi) -> tuple[int, int, int, int] | None:
    """(left, top, right, bottom) as ints, or None. Raises InvalidArgument."""
    if roi is None:
        return None
    try:
        values = tuple(int(v) for v in roi)
    except (TypeError, ValueError):
        raise errors.InvalidArgument(f"image: roi must be (left, top, right, bottom) integers, got {roi!r}") from None
    if len(values) != 4:
        raise errors.InvalidArgument(f"image: roi must be (left, top, right, bottom), got {roi!r}")
    return values   # type: ignore[return-value]


def _image(img, what: str = "img") -> Image:
    if not isinstance(img, Image):
        raise errors.InvalidArgument(f"{what} must be a cv.Image, got {type(img).__name__}")
    return img


def min_stride(format: str, width: int) -> int:
    """Bytes of one row without padding."""
    return formats.parse("image", {"format": format, "width": width, "height": 2}).row_bytes


def alloc_image(soc, format: str, width: int, height: int, stride: int | None = None,
                roi=None, cached: bool = False, fill: int | None = None) -> Image:
    """Allocate shared memory for an image (``stride`` bytes per row, default no padding).

    ``fill`` sets every byte first (padding included), e.g. a sentinel to check that
    operators leave padding alone. Raises InvalidArgument (descriptor), SysOutOfMemory.
    """
    desc = {"format": format, "width": width, "height": height}
    if stride is not None:
        desc["stride"] = stride
    roi = _roi(roi)
    if roi is not None:
        desc["roi"] = list(roi)
    spec = formats.parse("image", desc)
    alloc = soc.mem.alloc_cached if cached else soc.mem.alloc
    mems = tuple(alloc(max(n, 1)) for n in spec.plane_bytes())
    img = Image(mems, spec.format, spec.width, spec.height, spec.stride, roi)
    if fill is not None:
        for mem in mems:
            mem.array()[:] = fill
            mem.flush(CLEAN)
    return img


def _views(img: Image) -> list[np.ndarray]:
    """Writable views of the whole image's planes (the ROI is ignored)."""
    spec = formats.parse("image", dataclasses.replace(img, roi=None).desc())
    return formats.planes(spec, [m.array() for m in img.mems])


def _split(img: Image, pixels: np.ndarray) -> list[np.ndarray]:
    """Pixels in the numpy layout of ``img`` -> one array per plane. Raises InvalidArgument."""
    pixels = np.asarray(pixels)
    spec = img.spec()
    if pixels.shape != img.shape or pixels.dtype != spec.dtype:
        raise errors.InvalidArgument(f"pixels of shape {pixels.shape} {pixels.dtype} do not fit a "
                                     f"{img.width}x{img.height} {img.format} image ({img.shape} {spec.dtype})")
    if img.format in formats.YUV420:
        return [pixels[:img.height], pixels[img.height:].reshape(img.height // 2, img.width // 2, 2)]
    return [pixels]


def put_image(img: Image, pixels: np.ndarray) -> None:
    """Write all pixels of ``img`` (padding untouched), cleaning cached buffers. Raises InvalidArgument."""
    _image(img)
    for view, plane in zip(_views(img), _split(img, pixels)):
        view[...] = plane
    for mem in img.mems:
        mem.flush(CLEAN)


def write_image(soc, pixels: np.ndarray, format: str, stride: int | None = None, roi=None,
                cached: bool = False, fill: int | None = None) -> Image:
    """A new image in shared memory holding ``pixels`` (H x W, H x W x C, or (H*3/2) x W for NV12)."""
    pixels = np.asarray(pixels)
    if pixels.ndim not in (2, 3):
        raise errors.InvalidArgument(f"pixels must be H x W or H x W x C, got shape {pixels.shape}")
    height = pixels.shape[0] * 2 // 3 if format in formats.YUV420 else pixels.shape[0]
    img = alloc_image(soc, format, pixels.shape[1], height, stride, roi, cached, fill)
    try:
        put_image(img, pixels)
    except BaseException:
        free_image(img)
        raise
    return img


def read_image(img: Image, region: bool = False) -> np.ndarray:
    """A copy of the pixels (invalidating cached buffers first); ``region`` = only the ROI."""
    for mem in _image(img).mems:
        mem.flush(INVALIDATE)
    planes = [v.copy() for v in _views(img)]
    if region and img.roi is not None:
        left, top, right, bottom = img.roi
        planes[0] = planes[0][top:bottom + 1, left:right + 1]
        if len(planes) == 2:
            planes[1] = planes[1][top // 2:(bottom + 1) // 2, left // 2:(right + 1) // 2]
    if len(planes) == 2:
        return np.vstack([planes[0], planes[1].reshape(planes[1].shape[0], -1)])
    return planes[0]


def _pixel_rows(spec: formats.ImageDesc) -> list[list[tuple[int, int]]]:
    """Per buffer, the byte ranges holding pixels (whole image)."""
    if spec.format in formats.YUV420:
        y = [(r * spec.stride, r * spec.stride + spec.width) for r in range(spec.height)]
        base = spec.height * spec.stride if spec.format == "NV12" else 0
        uv = [(base + r * spec.stride, base + r * spec.stride + spec.width) for r in range(spec.height // 2)]
        return [y + uv] if spec.format == "NV12" else [y, uv]
    return [[(r * spec.stride, r * spec.stride + spec.row_bytes) for r in range(spec.height)]]


def read_padding(img: Image) -> np.ndarray:
    """Every byte of the image's buffers that is not a pixel (row padding, tail), concatenated."""
    _image(img)
    spec = formats.parse("image", dataclasses.replace(img, roi=None).desc())
    out = []
    for mem, rows in zip(img.mems, _pixel_rows(spec)):
        mem.flush(INVALIDATE)
        data = mem.array()
        padding = np.ones(data.size, bool)
        for lo, hi in rows:
            padding[lo:hi] = False
        out.append(data[padding])
    return np.concatenate(out)


def free_image(img: Image) -> None:
    """Free the image's buffers."""
    for mem in _image(img).mems:
        if not mem.freed:
            mem.free()

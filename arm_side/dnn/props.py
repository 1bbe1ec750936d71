"""Tensor properties of a model's tensors: ``arm_side.nn.TensorProperties`` for feature maps,
:class:`ImageProperties` for an NV12 image input (hbDNNDataType HB_DNN_IMG_TYPE_NV12);
reading them from a manifest, and checking what a caller passes to ``infer``.

An NV12 image of H rows and W columns, row stride S bytes: ``valid_shape`` (1, 3, H, W),
``aligned_shape`` (1, 3, H, S), ``stride`` (S·H·3/2, S·H, S, 1) — the image, the Y plane
(the UV plane starts there), a row, a pixel — and ``aligned_byte_size`` S·H·3/2.

As the manual allows, a caller may change only ``aligned_shape`` (with the strides that
follow from it) of what the model reports; anything else is InvalidArgument naming the field.
"""
from __future__ import annotations

import dataclasses
import enum

import numpy as np

from protocol import errors
from protocol.contract.tensor_types import DTYPES, LAYOUTS, MAX_DIMS, QUANT_TYPES
from arm_side.nn.dtypes import DataType, Layout, QuantiType
from arm_side.nn.tensor import Quantization, TensorProperties, strides_for

MAX_IMAGE_SIDE = 4096
MAX_DIM = 1 << 20               # one dimension of a tensor
MAX_TENSOR_BYTES = 256 << 20    # one tensor
MAX_QUANT_VALUES = 1 << 16


class ImageType(enum.IntEnum):
    """hbDNNDataType's image members (this runtime takes NV12 inputs)."""
    Y = 0
    NV12 = 1
    NV12_SEPARATE = 2
    YUV444 = 3
    RGB = 4
    BGR = 5


@dataclasses.dataclass(frozen=True)
class ImageProperties:
    """hbDNNTensorProperties of an NV12 image input; build with :func:`nv12`."""
    dtype: ImageType
    layout: Layout
    valid_shape: tuple
    aligned_shape: tuple
    stride: tuple
    quant: Quantization = Quantization()

    @property
    def height(self) -> int:
        return self.valid_shape[2]

    @property
    def width(self) -> int:
        return self.valid_shape[3]

    @property
    def row_stride(self) -> int:
        return self.aligned_shape[3]

    @property
    def aligned_byte_size(self) -> int:
        return self.row_stride * self.height * 3 // 2

    def to_wire(self) -> dict:
        return {"dtype": self.dtype.name, "layout": self.layout.name, "valid_shape": list(self.valid_shape),
                "aligned_shape": list(self.aligned_shape), "stride": list(self.stride),
                "aligned_byte_size": self.aligned_byte_size, "quant": {"type": "NONE"}}

    def planes(self, buf: np.ndarray) -> np.ndarray:
        """The image as H·3/2 rows of W bytes (Y rows, then interleaved UV rows), a view of ``buf``."""
        rows = np.ndarray((self.height * 3 // 2, self.row_stride), dtype=np.uint8, buffer=buf)
        return rows[:, :self.width]

    def with_row_stride(self, row_stride: int) -> "ImageProperties":
        return nv12(self.height, self.width, row_stride)


def nv12(height: int, width: int, row_stride: int | None = None) -> ImageProperties:
    """An NV12 image input. Raises InvalidArgument (odd or out-of-range sides, stride < width)."""
    s = width if row_stride is None else row_stride
    for what, n in (("height", height), ("width", width), ("row stride", s)):
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or not 2 <= n <= MAX_IMAGE_SIDE:
            raise errors.InvalidArgument(f"NV12 {what} must be an integer in 2..{MAX_IMAGE_SIDE}, got {n!r}")
    if height % 2 or width % 2:
        raise errors.InvalidArgument(f"NV12 needs an even height and width, got {height}x{width}")
    if s < width:
        raise errors.InvalidArgument(f"NV12 row stride {s} is smaller than the width {width}")
    h, w, s = int(height), int(width), int(s)
    return ImageProperties(ImageType.NV12, Layout.NCHW, (1, 3, h, w), (1, 3, h, s), (s * h * 3 // 2, s * h, s, 1))


# --- descriptors in a manifest ------------------------------------------------------------------

def _ints(value, what: str, lo: int, hi: int, count: tuple[int, int]) -> tuple:
    if not isinstance(value, list) or not count[0] <= len(value) <= count[1]:
        raise errors.InvalidModel(f"{what} must be a list of {count[0]}..{count[1]} integers")
    out = []
    for v in value:
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise errors.InvalidModel(f"{what}: {v!r} is not an integer in {lo}..{hi}")
        out.append(v)
    return tuple(out)


def _quant(raw, ndim: int, what: str) -> Quantization:
    if raw is None:
        return Quantization()
    if not isinstance(raw, dict) or raw.get("type") not in QUANT_TYPES:
        raise errors.InvalidModel(f"{what}.quant must be a map with type one of {list(QUANT_TYPES)}")
    kind = raw["type"]
    if kind == "NONE":
        return Quantization()
    axis = raw.get("axis", 0)
    if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis < ndim:
        raise errors.InvalidModel(f"{what}.quant.axis must be in 0..{ndim - 1}")
    if kind == "SHIFT":
        return Quantization(QuantiType.SHIFT, shift=_ints(raw.get("shift"), f"{what}.quant.shift", 0, 31,
                                                          (1, MAX_QUANT_VALUES)), axis=axis)
    scale = raw.get("scale")
    if not isinstance(scale, list) or not 1 <= len(scale) <= MAX_QUANT_VALUES or \
            not all(isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v > 0
                    for v in scale):
        raise errors.InvalidModel(f"{what}.quant.scale must be 1..{MAX_QUANT_VALUES} finite numbers > 0")
    zp = _ints(raw.get("zero_point", [0] * len(scale)), f"{what}.quant.zero_point", -(1 << 31), (1 << 31) - 1,
               (len(scale), len(scale)))
    return Quantization(QuantiType.SCALE, scale=tuple(float(v) for v in scale), zero_point=zp, axis=axis)


def from_manifest(raw, what: str):
    """TensorProperties or ImageProperties of a manifest entry. Raises InvalidModel."""
    if not isinstance(raw, dict):
        raise errors.InvalidModel(f"{what} must be a map")
    dtype, layout = raw.get("dtype"), raw.get("layout", "NONE")
    if layout not in LAYOUTS:
        raise errors.InvalidModel(f"{what}.layout must be one of {list(LAYOUTS)}, got {layout!r}")
    valid = _ints(raw.get("valid_shape"), f"{what}.valid_shape", 1, MAX_DIM, (1, MAX_DIMS))
    aligned = _ints(raw.get("aligned_shape", list(valid)), f"{what}.aligned_shape", 1, MAX_DIM,
                    (len(valid), len(valid)))
    if dtype == "NV12":
        if layout != "NCHW" or len(valid) != 4 or valid[:2] != (1, 3) or aligned[:3] != valid[:3]:
            raise errors.InvalidModel(f"{what}: an NV12 input is NCHW [1, 3, H, W] with aligned [1, 3, H, stride]")
        try:
            props: ImageProperties | TensorProperties = nv12(valid[2], valid[3], aligned[3])
        except errors.InvalidArgument as exc:
            raise errors.InvalidModel(f"{what}: {exc.message}") from None
    else:
        if dtype not in DTYPES:
            raise errors.InvalidModel(f"{what}.dtype must be NV12 or one of {sorted(DTYPES)}, got {dtype!r}")
        if any(a < v for a, v in zip(aligned, valid)):
            raise errors.InvalidModel(f"{what}.aligned_shape {list(aligned)} is smaller than valid_shape {list(valid)}")
        dt = DataType[dtype]
        if int(np.prod(aligned, dtype=np.float64)) * dt.numpy.itemsize > MAX_TENSOR_BYTES:
            raise errors.InvalidModel(f"{what} is larger than {MAX_TENSOR_BYTES >> 20} MiB")
        props = TensorProperties(dt, Layout[layout], valid, aligned, strides_for(aligned, dt),
                                 _quant(raw.get("quant"), len(valid), what))
    stride = raw.get("stride")
    if stride is not None and (not isinstance(stride, list) or tuple(stride) != props.stride):
        raise errors.InvalidModel(f"{what}.stride {str(stride)[:80]} does not follow from aligned_shape "
                                  f"(expected {list(props.stride)})")
    return props


# --- what a caller passes -------------------------------------------------------------------------

def check_given(model, given, mem, what: str) -> None:
    """``given`` may differ from the model's ``model`` only in aligned_shape (and the strides that
    follow from it, row-major); ``mem`` must hold its aligned_byte_size bytes.

    Raises InvalidArgument naming the field.
    """
    if not isinstance(given, (TensorProperties, ImageProperties)):
        raise errors.InvalidArgument(f"{what}: properties must be TensorProperties or ImageProperties, "
                                     f"got {type(given).__name__}")
    if given.dtype != model.dtype or type(given) is not type(model):
        raise errors.InvalidArgument(f"{what}.tensorType is {given.dtype.name}, the model takes {model.dtype.name}")
    for field in ("layout", "valid_shape", "quant"):
        if getattr(given, field) != getattr(model, field):
            raise errors.InvalidArgument(f"{what}.{field} is {getattr(given, field)!r}, the model's is "
                                         f"{getattr(model, field)!r}: only alignedShape and tensorType may change")
    if len(given.aligned_shape) != len(model.valid_shape) or \
            any(a < v for a, v in zip(given.aligned_shape, model.valid_shape)):
        raise errors.InvalidArgument(f"{what}.alignedShape {list(given.aligned_shape)} is smaller than validShape "
                                     f"{list(model.valid_shape)}")
    if isinstance(given, ImageProperties):
        expect: ImageProperties | TensorProperties = nv12(given.height, given.width, given.row_stride)
    else:
        expect = TensorProperties(given.dtype, given.layout, given.valid_shape, given.aligned_shape,
                                  strides_for(given.aligned_shape, given.dtype), given.quant)
    if tuple(given.stride) != expect.stride:
        raise errors.InvalidArgument(f"{what}.stride {list(given.stride)} does not follow from alignedShape "
                                     f"{list(given.aligned_shape)} (expected {list(expect.stride)})")
    if mem.size < given.aligned_byte_size:
        raise errors.InvalidArgument(f"{what}: memory of {mem.size} bytes is smaller than alignedByteSize "
                                     f"{given.aligned_byte_size}")

"""ARM-side tensor descriptors (hbDNNTensorProperties), alignment helpers, and copying a
plain array into a padded tensor and back.

``stride[d]`` is the number of bytes between two neighbours along valid dimension d
(hbDNN's "步长"). The BPU alignment rule pads the last dimension of the layout to 16
bytes (W for NCHW, C for NHWC); strides then follow the aligned shape. Only the
elements of ``valid_shape`` are data: padding bytes are never read.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from protocol import errors
from arm_side.memory import CLEAN, INVALIDATE, Mem
from arm_side.nn.dtypes import DataType, Layout, QuantiType, c2_for

MAX_DIMS = 8
BPU_ALIGN = 16


@dataclasses.dataclass(frozen=True)
class Quantization:
    """hbDNNQuantiShift / hbDNNQuantiScale plus quantizeAxis. One value = per tensor,
    else one value per index of dimension ``axis``."""
    type: QuantiType = QuantiType.NONE
    scale: tuple = ()
    zero_point: tuple = ()
    shift: tuple = ()
    axis: int = 0

    @classmethod
    def scale_(cls, scale, zero_point=0, axis: int = 0) -> "Quantization":
        """SCALE quantisation; scalars are per tensor, sequences per axis."""
        s = tuple(float(v) for v in np.atleast_1d(scale))
        z = tuple(int(v) for v in np.broadcast_to(np.atleast_1d(zero_point), (len(s),)))
        return cls(QuantiType.SCALE, scale=s, zero_point=z, axis=axis)

    @classmethod
    def shift_(cls, shift, axis: int = 0) -> "Quantization":
        """SHIFT quantisation; a scalar is per tensor, a sequence per axis."""
        return cls(QuantiType.SHIFT, shift=tuple(int(v) for v in np.atleast_1d(shift)), axis=axis)

    def to_wire(self) -> dict:
        if self.type == QuantiType.NONE:
            return {"type": "NONE"}
        if self.type == QuantiType.SHIFT:
            return {"type": "SHIFT", "shift": list(self.shift), "axis": self.axis}
        return {"type": "SCALE", "scale": list(self.scale), "zero_point": list(self.zero_point), "axis": self.axis}


NO_QUANT = Quantization()


@dataclasses.dataclass(frozen=True)
class TensorProperties:
    """hbDNNTensorProperties. Build with :func:`dense`, :func:`aligned` or :func:`nc1hwc2`."""
    dtype: DataType
    layout: Layout
    valid_shape: tuple
    aligned_shape: tuple
    stride: tuple
    quant: Quantization = NO_QUANT

    @property
    def aligned_byte_size(self) -> int:
        """Bytes to allocate: the outermost stride times the aligned outermost dimension."""
        return self.stride[0] * self.aligned_shape[0]

    @property
    def np_dtype(self) -> np.dtype:
        return self.dtype.numpy

    def with_quant(self, quant: Quantization) -> "TensorProperties":
        return dataclasses.replace(self, quant=quant)

    def to_wire(self) -> dict:
        """The descriptor as operator params carry it."""
        return {"dtype": self.dtype.name, "layout": self.layout.name, "valid_shape": list(self.valid_shape),
                "aligned_shape": list(self.aligned_shape), "stride": list(self.stride),
                "aligned_byte_size": self.aligned_byte_size, "quant": self.quant.to_wire()}

    def view(self, buf) -> np.ndarray:
        """The valid elements of ``buf`` (bytes-like or uint8 array) as a strided numpy view.

        Raises InvalidArgument when the buffer is smaller than ``aligned_byte_size``.
        """
        arr = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf.reshape(-1)
        if arr.size < self.aligned_byte_size:
            raise errors.InvalidArgument(f"buffer of {arr.size} bytes is smaller than aligned_byte_size "
                                         f"{self.aligned_byte_size}")
        return np.ndarray(self.valid_shape, dtype=self.np_dtype, buffer=arr, strides=self.stride)


def _shape(shape: Sequence[int]) -> tuple:
    shape = tuple(int(n) for n in shape)
    if not 1 <= len(shape) <= MAX_DIMS or min(shape) < 1:
        raise errors.InvalidArgument(f"shape {list(shape)} must have 1..{MAX_DIMS} dimensions, each >= 1")
    return shape


def strides_for(aligned_shape: Sequence[int], dtype: DataType) -> tuple:
    """Row-major byte strides of a tensor laid out in ``aligned_shape``."""
    out, step = [], int(DataType(dtype).numpy.itemsize)
    for n in reversed(tuple(aligned_shape)):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def dense(shape: Sequence[int], dtype: DataType, layout: Layout = Layout.NONE,
          quant: Quantization = NO_QUANT) -> TensorProperties:
    """A packed tensor (aligned shape = valid shape). Raises InvalidArgument."""
    shape = _shape(shape)
    return TensorProperties(DataType(dtype), Layout(layout), shape, shape, strides_for(shape, dtype), quant)


def aligned_last_dim(n: int, dtype: DataType, align_bytes: int = BPU_ALIGN) -> int:
    """Elements of a last dimension of ``n`` padded to a multiple of ``align_bytes`` bytes."""
    size = DataType(dtype).numpy.itemsize
    if align_bytes % size:
        raise errors.InvalidArgument(f"alignment {align_bytes} is not a multiple of the item size {size}")
    per = align_bytes // size
    return -(-n // per) * per


def aligned(shape: Sequence[int], dtype: DataType, layout: Layout, align_bytes: int = BPU_ALIGN,
            quant: Quantization = NO_QUANT) -> TensorProperties:
    """The BPU feature-map rule: the last dimension of the layout (W of NCHW, C of NHWC) padded
    to ``align_bytes`` bytes, strides from the aligned shape. Raises InvalidArgument."""
    shape = _shape(shape)
    al = shape[:-1] + (aligned_last_dim(shape[-1], dtype, align_bytes),)
    return TensorProperties(DataType(dtype), Layout(layout), shape, al, strides_for(al, dtype), quant)


def nc1hwc2(n: int, c: int, h: int, w: int, dtype: DataType, platform: str | None = None,
            c2: int | None = None) -> TensorProperties:
    """An NC1HWC2 tensor [N, ceil(C / C2), H, W, C2], C2 from the platform table unless given.

    Raises InvalidArgument for an unknown platform or a dtype it has no NC1HWC2 form for.
    """
    if c2 is None:
        if platform is None:
            raise errors.InvalidArgument("nc1hwc2: give platform or c2")
        c2 = c2_for(platform, dtype)
    return dense((n, -(-c // c2), h, w, c2), dtype, Layout.NC1HWC2)


# --- plain array <-> tensor in memory --------------------------------------------------------

def write(mem: Mem, props: TensorProperties, array: np.ndarray, *, clean: bool = True) -> None:
    """Store ``array`` (shape = valid_shape) into ``mem`` through the strides; padding bytes
    are left as they are. CLEANs cached memory unless ``clean`` is False.

    Raises InvalidArgument for a shape mismatch or a buffer smaller than aligned_byte_size.
    """
    array = np.asarray(array)
    if array.shape != props.valid_shape:
        raise errors.InvalidArgument(f"array shape {array.shape} differs from valid_shape {props.valid_shape}")
    props.view(mem.array())[...] = array
    if clean:
        mem.flush(CLEAN)


def read(mem: Mem, props: TensorProperties, *, invalidate: bool = True) -> np.ndarray:
    """A packed copy of the valid elements of ``mem`` (INVALIDATEs cached memory first)."""
    if invalidate:
        mem.flush(INVALIDATE)
    return props.view(mem.array()).copy()


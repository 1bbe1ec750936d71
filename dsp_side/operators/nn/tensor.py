"""Tensor descriptors as the firmware receives them, and strided views over the DDR.

A descriptor is the wire form of hbDNNTensorProperties (a msgpack map)::

    {"dtype": "S8", "layout": "NCHW", "valid_shape": [1, 64, 56, 56],
     "aligned_shape": [1, 64, 56, 64], "stride": [229376, 3584, 64, 1],
     "aligned_byte_size": 229376,
     "quant": {"type": "SCALE", "scale": [0.02], "zero_point": [0], "axis": 1}}

``aligned_shape``, ``stride`` (bytes per step of each valid dimension) and
``aligned_byte_size`` default to the dense values; ``quant`` defaults to NONE.
Only the elements of the valid shape are ever read or written: padding bytes
between them are not data.
"""
from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np

from protocol import errors

from protocol.contract.tensor_types import DTYPES, LAYOUTS, MAX_DIMS, PACKED, QUANT_TYPES  # noqa: F401
_KEYS = {"dtype", "layout", "valid_shape", "aligned_shape", "stride", "aligned_byte_size", "quant"}


@dataclasses.dataclass(frozen=True)
class Quant:
    """Quantisation of a tensor. Invariant: the arrays have length 1 (per tensor) or
    the length of dimension ``axis`` (per axis)."""
    kind: str = "NONE"
    axis: int = 0
    scale: np.ndarray | None = None       # float32, > 0
    zero_point: np.ndarray | None = None  # int64
    shift: np.ndarray | None = None       # int64, 0..31

    def along(self, values: np.ndarray, ndim: int) -> np.ndarray:
        """``values`` shaped to broadcast along ``axis`` of an ``ndim``-D tensor."""
        if values.size == 1:
            return values.reshape(())
        shape = [1] * ndim
        shape[self.axis] = values.size
        return values.reshape(shape)


@dataclasses.dataclass(frozen=True)
class TensorDesc:
    """A checked descriptor. Invariant: strides are multiples of the item size and
    valid elements never alias (row-major order, each stride covers the dimension inside it)."""
    name: str
    dtype_name: str
    layout: str
    shape: tuple
    aligned: tuple
    stride: tuple
    quant: Quant

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(DTYPES[self.dtype_name])

    @property
    def span(self) -> int:
        """Bytes from the first to one past the last valid element."""
        if 0 in self.shape:
            return 0
        return self.dtype.itemsize + sum((n - 1) * s for n, s in zip(self.shape, self.stride))

    def view(self, buf: np.ndarray) -> np.ndarray:
        """The valid elements of ``buf`` (flat uint8, read-only for inputs) as a strided array.

        Raises InvalidArgument when the buffer is smaller than the descriptor needs.
        """
        if buf.size < self.span:
            raise errors.InvalidArgument(f"{self.name}: buffer of {buf.size} bytes is too small, the descriptor "
                                         f"(shape {list(self.shape)}, stride {list(self.stride)}) needs {self.span}")
        return np.ndarray(self.shape, dtype=self.dtype, buffer=buf, offset=0, strides=self.stride)


def _bad(name: str, msg: str) -> errors.InvalidArgument:
    return errors.InvalidArgument(f"{name}: {msg}")


def _int_list(name: str, value, ndim: int | None, lo: int) -> tuple:
    ok = isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if not ok or not 1 <= len(value) <= MAX_DIMS or (ndim is not None and len(value) != ndim):
        want = f"{ndim} integers" if ndim is not None else f"1..{MAX_DIMS} integers"
        raise _bad(name, f"must be a list of {want}, got {value!r:.60}")
    if any(v < lo for v in value):
        raise _bad(name, f"every element must be >= {lo}, got {list(value)}")
    return tuple(value)


def dense_strides(shape, itemsize: int) -> tuple:
    """Row-major byte strides of a packed tensor of ``shape``."""
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


#: parse's results per descriptor object (see parse)
PARSED_MAX = 64
_parsed: dict = {}


def parse(name: str, desc) -> TensorDesc:
    """Check a wire descriptor. Raises InvalidArgument naming ``name`` and the field.

    The very descriptor object of an earlier call, still equal to what it was then, gives that
    call's TensorDesc (its quantisation arrays are read-only): the firmware hands an operator the
    same parameter objects for the same task body, and a descriptor with 1000 per-class scales
    took longer to check than the operator to run."""
    key = (name, id(desc))
    hit = _parsed.get(key)
    if hit is not None and hit[0] is desc and desc == hit[1]:
        return hit[2]
    t = _parse(name, desc)
    for arr in (t.quant.scale, t.quant.zero_point, t.quant.shift):
        if arr is not None:
            arr.flags.writeable = False
    if len(_parsed) >= PARSED_MAX:
        del _parsed[next(iter(_parsed))]
    _parsed[key] = (desc, copy.deepcopy(desc), t)       # holding desc keeps its id its own
    return t


def _parse(name: str, desc) -> TensorDesc:
    if not isinstance(desc, dict):
        raise _bad(name, f"must be a tensor descriptor map, got {type(desc).__name__}")
    unknown = set(desc) - _KEYS
    if unknown:
        raise _bad(name, f"unknown field(s) {sorted(unknown)}; accepted: {sorted(_KEYS)}")
    dtype = desc.get("dtype")
    if not isinstance(dtype, str):     # a list or map is unhashable: never look it up
        raise _bad(f"{name}.dtype", f"must be one of {sorted(DTYPES)}, got {dtype!r:.80}")
    if dtype in PACKED:
        raise _bad(f"{name}.dtype", f"{dtype} is packed 4-bit data, which this operator cannot address")
    if dtype not in DTYPES:
        raise _bad(f"{name}.dtype", f"must be one of {sorted(DTYPES)}, got {dtype!r}")
    layout = desc.get("layout", "NONE")
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise _bad(f"{name}.layout", f"must be one of {list(LAYOUTS)}, got {layout!r}")
    shape = _int_list(f"{name}.valid_shape", desc.get("valid_shape"), None, 1)
    ndim, itemsize = len(shape), np.dtype(DTYPES[dtype]).itemsize
    aligned = _int_list(f"{name}.aligned_shape", desc.get("aligned_shape", list(shape)), ndim, 1)
    if any(a < v for a, v in zip(aligned, shape)):
        raise _bad(f"{name}.aligned_shape", f"{list(aligned)} is smaller than valid_shape {list(shape)}")
    stride = _int_list(f"{name}.stride", desc.get("stride", list(dense_strides(aligned, itemsize))), ndim, 1)
    _check_strides(name, shape, stride, itemsize, dtype)
    t = TensorDesc(name, dtype, layout, shape, aligned, stride, Quant())
    size = desc.get("aligned_byte_size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < t.span):
        raise _bad(f"{name}.aligned_byte_size", f"must be an integer >= {t.span} (the bytes the strides span), "
                                                f"got {size!r}")
    return dataclasses.replace(t, quant=_quant(f"{name}.quant", desc.get("quant"), t))


def _check_strides(name: str, shape: tuple, stride: tuple, itemsize: int, dtype: str) -> None:
    for d, s in enumerate(stride):
        if s % itemsize:
            raise _bad(f"{name}.stride", f"stride[{d}] = {s} is not a multiple of the {dtype} item size {itemsize}")
    if stride[-1] < itemsize:
        raise _bad(f"{name}.stride", f"stride[{len(stride) - 1}] = {stride[-1]} is below the item size {itemsize}")
    for d in range(len(shape) - 1):
        inner = stride[d + 1] * shape[d + 1]
        if stride[d] < inner:  # would make valid elements of two rows alias
            raise _bad(f"{name}.stride", f"stride[{d}] = {stride[d]} is smaller than stride[{d + 1}] x "
                                         f"valid_shape[{d + 1}] = {inner}")


def _quant(name: str, q, t: TensorDesc) -> Quant:
    if q is None:
        return Quant()
    if not isinstance(q, dict) or q.get("type", "NONE") not in QUANT_TYPES:
        raise _bad(name, f"must be a map with type one of {list(QUANT_TYPES)}, got {q!r:.80}")
    unknown = set(q) - {"type", "axis", "scale", "zero_point", "shift"}
    if unknown:
        raise _bad(name, f"unknown field(s) {sorted(unknown)}")
    kind = q.get("type", "NONE")
    if kind == "NONE":
        return Quant()
    axis = q.get("axis", 0)
    if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis < len(t.shape):
        raise _bad(f"{name}.axis", f"must be an integer in 0..{len(t.shape) - 1}, got {axis!r}")
    if kind == "SHIFT":
        shift = _numbers(f"{name}.shift", q.get("shift"), t.shape[axis], int)
        if shift.min() < 0 or shift.max() > 31:
            raise _bad(f"{name}.shift", f"every shift must be in 0..31, got {shift.tolist()[:8]}")
        return Quant("SHIFT", axis, shift=shift.astype(np.int64))
    scale = _numbers(f"{name}.scale", q.get("scale"), t.shape[axis], float).astype(np.float32)
    if not (np.isfinite(scale).all() and (scale > 0).all()):
        raise _bad(f"{name}.scale", "every scale must be finite and > 0 (as a float32)")
    zp = q.get("zero_point", [0] * scale.size)
    zp = _numbers(f"{name}.zero_point", zp, t.shape[axis], int)
    if zp.size != scale.size:
        raise _bad(f"{name}.zero_point", f"has {zp.size} values but scale has {scale.size}")
    if t.dtype.kind in "iu":
        info = np.iinfo(t.dtype)
        if zp.min() < info.min or zp.max() > info.max:
            raise _bad(f"{name}.zero_point", f"must lie in the {t.dtype_name} range {info.min}..{info.max}")
    return Quant("SCALE", axis, scale=scale, zero_point=zp.astype(np.int64))


def _numbers(name: str, value, axis_len: int, kind: type) -> np.ndarray:
    """1 value (per tensor) or ``axis_len`` values (per axis). Raises InvalidArgument."""
    if not isinstance(value, (list, tuple)) or not value:
        raise _bad(name, f"must be a non-empty list, got {value!r:.60}")
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float) if kind is float else int):
            raise _bad(name, f"must hold {kind.__name__} values, got {v!r:.30}")
        if kind is float and not math.isfinite(v):
            raise _bad(name, f"must hold finite values, got {v!r}")
    if len(value) not in (1, axis_len):
        raise _bad(name, f"has {len(value)} values; per tensor takes 1, per axis takes {axis_len} "
                         "(the size of dimension quant.axis)")
    return np.asarray(value, dtype=np.float64 if kind is float else np.int64)


def require(t: TensorDesc, *, dtypes=None, layouts=None, quant=None, ndim=None) -> None:
    """Operator-specific restrictions on a checked descriptor. Raises InvalidArgument."""
    if dtypes is not None and t.dtype_name not in dtypes:
        raise _bad(f"{t.name}.dtype", f"must be one of {list(dtypes)} here, got {t.dtype_name}")
    if layouts is not None and t.layout not in layouts:
        raise _bad(f"{t.name}.layout", f"must be one of {list(layouts)} here, got {t.layout}")
    if quant is not None and t.quant.kind not in quant:
        raise _bad(f"{t.name}.quant", f"type must be one of {list(quant)} here, got {t.quant.kind}")
    if ndim is not None and len(t.shape) != ndim:
        raise _bad(f"{t.name}.valid_shape", f"must have {ndim} dimensions here, got {list(t.shape)}")


def same_shape(a: TensorDesc, b: TensorDesc) -> None:
    """Raises InvalidArgument when the valid shapes differ."""
    if a.shape != b.shape:
        raise _bad(b.name, f"valid_shape {list(b.shape)} differs from {a.name}.valid_shape {list(a.shape)}")

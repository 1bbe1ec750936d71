"""Data types, layouts and quantisation kinds of NN tensors (hbDNNDataType, hbDNNTensorLayout,
hbDNNQuantiType), their numpy types, and RKNPU's C2 table for NC1HWC2.

The enum values are the SDK's; the names are what travels on the wire.
"""
from __future__ import annotations

import enum

import numpy as np

from protocol import errors
# RKNN's table of C2 per platform (int8 covers S8/U8; float16): one copy, shared with the DSP side.
from protocol.contract.tensor_types import C2_TABLE


class DataType(enum.IntEnum):
    """hbDNNDataType (tensor members; the image members 0-5 are the CV descriptors' business)."""
    S4 = 6
    U4 = 7
    S8 = 8
    U8 = 9
    F16 = 10
    S16 = 11
    U16 = 12
    F32 = 13
    S32 = 14
    U32 = 15
    F64 = 16
    S64 = 17
    U64 = 18

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype. Raises InvalidArgument for the packed 4-bit types."""
        if self in (DataType.S4, DataType.U4):
            raise errors.InvalidArgument(f"{self.name} is packed 4-bit data and has no numpy element type")
        return np.dtype(_NUMPY[self])

    @property
    def itemsize(self) -> float:
        """Bytes per element (0.5 for S4/U4)."""
        return 0.5 if self in (DataType.S4, DataType.U4) else self.numpy.itemsize


_NUMPY = {DataType.S8: np.int8, DataType.U8: np.uint8, DataType.F16: np.float16, DataType.S16: np.int16,
          DataType.U16: np.uint16, DataType.F32: np.float32, DataType.S32: np.int32, DataType.U32: np.uint32,
          DataType.F64: np.float64, DataType.S64: np.int64, DataType.U64: np.uint64}


def from_numpy(dtype) -> DataType:
    """The DataType of a numpy dtype. Raises InvalidArgument for one without a counterpart."""
    dt = np.dtype(dtype)
    for k, v in _NUMPY.items():
        if np.dtype(v) == dt:
            return k
    raise errors.InvalidArgument(f"numpy dtype {dt} has no hbDNN tensor type")


class Layout(enum.IntEnum):
    """hbDNNTensorLayout, plus RKNPU's NC1HWC2 (value of our own choosing)."""
    NHWC = 0
    NCHW = 2
    NC1HWC2 = 3
    NONE = 255


class QuantiType(enum.IntEnum):
    """hbDNNQuantiType."""
    NONE = 0
    SHIFT = 1
    SCALE = 2


def c2_for(platform: str, dtype: DataType) -> int:
    """C2 of NC1HWC2 on ``platform`` for ``dtype``. Raises InvalidArgument if the platform has none."""
    table = C2_TABLE.get(platform)
    if table is None:
        raise errors.InvalidArgument(f"unknown platform {platform!r}; known: {sorted(C2_TABLE)}")
    key = "INT8" if dtype in (DataType.S8, DataType.U8) else DataType(dtype).name
    if key not in table:
        raise errors.InvalidArgument(f"{platform} has no NC1HWC2 form for {DataType(dtype).name}")
    return table[key]

"""NN tensor types of the wire: data types (with their numpy types), layouts, quantisation
kinds, and RKNPU's C2 table for NC1HWC2 (per platform and element class)."""
from __future__ import annotations

import numpy as np

MAX_DIMS = 8  # HB_DNN_TENSOR_MAX_DIMENSIONS
DTYPES = {"S8": np.int8, "U8": np.uint8, "S16": np.int16, "U16": np.uint16, "S32": np.int32,
          "U32": np.uint32, "S64": np.int64, "U64": np.uint64, "F16": np.float16, "F32": np.float32,
          "F64": np.float64}
PACKED = ("S4", "U4")  # known to the descriptor, not addressable per element by the operators
LAYOUTS = ("NHWC", "NCHW", "NC1HWC2", "NONE")
QUANT_TYPES = ("NONE", "SHIFT", "SCALE")

# platform -> {element class -> C2}; RKNN's table (int8 covers S8/U8).
C2_TABLE = {
    "RK2118": {"F16": 4},
    "RK3566": {"INT8": 8, "F16": 4}, "RK3568": {"INT8": 8, "F16": 4},
    "RK3588": {"INT8": 16, "F16": 8}, "RK3576": {"INT8": 16, "F16": 8},
    "RV1103B": {"INT8": 8}, "RV1106B": {"INT8": 8},
    "RV1103": {"INT8": 16, "F16": 8}, "RV1106": {"INT8": 16, "F16": 8},
    "RK3562": {"INT8": 16, "F16": 8},
}


def c2_class(dtype_name: str) -> str:
    return "INT8" if dtype_name in ("S8", "U8") else dtype_name

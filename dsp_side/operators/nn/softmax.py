"""softmax along one axis, numerically stable (the maximum is subtracted before exp).

The input is float (F16/F32/F64, quant NONE) or an integer tensor with SCALE/SHIFT
quantisation, which is dequantised first (``quant.dequantize_values``). The sums
are taken in float64; the output is F32 or F64.
"""
from __future__ import annotations

import numpy as np

from protocol import errors
from dsp_side.operators.nn import quant, tensor


def softmax_values(x: np.ndarray, axis: int) -> np.ndarray:
    """exp(x - max) / sum(exp(x - max)) along ``axis``, in float64."""
    v = x.astype(np.float64)
    v -= v.max(axis=axis, keepdims=True)
    np.exp(v, out=v)
    v /= v.sum(axis=axis, keepdims=True)
    return v


def softmax(ctx, inputs, outputs, input, output, axis):
    """Softmax of a float or quantised tensor along ``axis`` (negative counts from the end)."""
    src, dst = tensor.parse("input", input), tensor.parse("output", output)
    tensor.require(dst, dtypes=("F32", "F64"), quant=("NONE",))
    tensor.same_shape(src, dst)
    if src.dtype_name in quant.FLOATS:
        tensor.require(src, quant=("NONE",))
    else:
        tensor.require(src, dtypes=quant.QUANTIZED, quant=("SCALE", "SHIFT"))
    ndim = len(src.shape)
    if not -ndim <= axis < ndim:
        raise errors.InvalidArgument(f"softmax: parameter 'axis' must be in {-ndim}..{ndim - 1}, got {axis}")
    x = src.view(inputs[0])
    if src.quant.kind != "NONE":
        x = quant.dequantize_values(x, src.quant, np.float32)
    y = dst.view(outputs[0])
    y[...] = softmax_values(x, axis)
    return {"elements": int(y.size)}

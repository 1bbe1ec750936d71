"""quantize / dequantize (hbDNNQuantiScale and hbDNNQuantiShift semantics).

Rounding rule (the same in every NN operator and in ``arm_side.nn.reference``):
the value is computed in float64 from the float32 (or float16/float64) input and the
float32 scale, then rounded to the nearest integer with ties away from zero (C
``round``), then clipped to the range of the output type. NaN quantises like 0.0.

* SCALE quantize:   q = clip(round(x / scale + zero_point))
* SHIFT quantize:   q = clip(round(x * 2**shift))
* SCALE dequantize: x = (q - zero_point) * scale   (exact in float64, one rounding to the output type)
* SHIFT dequantize: x = q / 2**shift   (beyond an F16 output's range: +-inf)

Writing through a padded output descriptor is the BPU's feature-map padding fused
with quantisation: only valid elements are written, padding bytes are left as they are.
"""
from __future__ import annotations

import numpy as np

from dsp_side.operators.nn import tensor

FLOATS = ("F16", "F32", "F64")
QUANTIZED = ("S8", "U8", "S16", "U16", "S32")


def round_half_away(v: np.ndarray) -> np.ndarray:
    """Nearest integer, ties away from zero; consumes ``v`` (float64) as scratch.
    ``v - trunc(v)`` is exact, so there is no double rounding."""
    t = np.trunc(v)
    v -= t
    t += v >= 0.5
    t -= v <= -0.5
    return t


def quantize_values(x: np.ndarray, q: tensor.Quant, out_dtype: np.dtype) -> np.ndarray:
    """The integer values of float ``x`` under ``q`` (SCALE or SHIFT), as ``out_dtype``."""
    v = x.astype(np.float64)
    nan = np.isnan(v)
    if nan.any():
        v[nan] = 0.0
    if q.kind == "SCALE":
        assert q.scale is not None and q.zero_point is not None     # a SCALE quant has both
        v /= q.along(q.scale.astype(np.float64), v.ndim)
        v += q.along(q.zero_point.astype(np.float64), v.ndim)
    else:
        assert q.shift is not None
        v *= q.along(np.ldexp(1.0, q.shift), v.ndim)
    info = np.iinfo(out_dtype)
    r = round_half_away(v)
    np.clip(r, info.min, info.max, out=r)
    return r.astype(out_dtype)


def dequantize_values(qv: np.ndarray, q: tensor.Quant, out_dtype: np.dtype) -> np.ndarray:
    """The real values of integers ``qv`` under ``q`` (NONE = plain conversion), as ``out_dtype``."""
    v = qv.astype(np.float64)
    if q.kind == "SCALE":
        assert q.scale is not None and q.zero_point is not None
        v -= q.along(q.zero_point.astype(np.float64), v.ndim)
        v *= q.along(q.scale.astype(np.float64), v.ndim)
    elif q.kind == "SHIFT":
        assert q.shift is not None
        v /= q.along(np.ldexp(1.0, q.shift), v.ndim)
    with np.errstate(over="ignore"):  # beyond the float type's range: +-inf, like a C cast
        return v.astype(out_dtype)


def quantize(ctx, inputs, outputs, input, output):
    """Quantize a float tensor into an integer tensor (SCALE or SHIFT), honouring both descriptors' strides."""
    src, dst = tensor.parse("input", input), tensor.parse("output", output)
    tensor.require(src, dtypes=FLOATS, quant=("NONE",))
    tensor.require(dst, dtypes=QUANTIZED, quant=("SCALE", "SHIFT"))
    tensor.same_shape(src, dst)
    x, y = src.view(inputs[0]), dst.view(outputs[0])
    y[...] = quantize_values(x, dst.quant, dst.dtype)
    return {"elements": int(y.size)}


def dequantize(ctx, inputs, outputs, input, output):
    """Dequantize an integer tensor (SCALE or SHIFT) into a float tensor, honouring both descriptors' strides."""
    src, dst = tensor.parse("input", input), tensor.parse("output", output)
    tensor.require(src, dtypes=QUANTIZED, quant=("SCALE", "SHIFT"))
    tensor.require(dst, dtypes=FLOATS, quant=("NONE",))
    tensor.same_shape(src, dst)
    x, y = src.view(inputs[0]), dst.view(outputs[0])
    y[...] = dequantize_values(x, src.quant, dst.dtype)
    return {"elements": int(y.size)}

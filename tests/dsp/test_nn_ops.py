"""quantize / dequantize / softmax / layout run in-process as the firmware runs them (schema
check, flat uint8 buffers, read-only inputs), against the independent references of
arm_side.nn.reference (no SoC needed). ``buffer`` and ``run`` serve the other NN tests too."""
from __future__ import annotations

import numpy as np
import pytest

from protocol import errors, schema
from arm_side import nn
from arm_side.nn import reference as ref
from dsp_side.operators import nn as dsp_nn
from dsp_side.registry import Registry

_REGISTRY = Registry()
dsp_nn.register(_REGISTRY)


def buffer(nbytes: int, garbage: bool = True, seed: int = 0) -> np.ndarray:
    """A flat uint8 buffer, filled with random garbage so that padding read as data shows."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, nbytes, dtype=np.uint8) if garbage else np.zeros(nbytes, np.uint8)


def run(op_id: int, inputs: list, outputs: list, params: dict) -> dict:
    """Validate like the firmware and call the operator. Raises what it raises."""
    spec = _REGISTRY.get(op_id)
    spec.check_counts(len(inputs), len(outputs))
    checked = schema.validate(spec.name, spec.params, params)
    ro = []
    for a in inputs:
        v = a.view()
        v.flags.writeable = False
        ro.append(v)
    return spec.fn(None, ro, outputs, **checked) or {}


DT = nn.DataType
INT_TYPES = [DT.S8, DT.U8, DT.S16, DT.U16, DT.S32]


def _floats(shape, spread=300.0, seed=1):
    return (np.random.default_rng(seed).standard_normal(shape) * spread).astype(np.float32)


def _quantize(x, src_props, dst_props, out=None):
    src = buffer(src_props.aligned_byte_size)
    src_props.view(src)[...] = x
    out = buffer(dst_props.aligned_byte_size, seed=7) if out is None else out
    run(nn.ids.QUANTIZE, [src], [out], {"input": src_props.to_wire(), "output": dst_props.to_wire()})
    return out


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_quantize_per_tensor_every_type(dtype):
    x = _floats((2, 3, 5, 7))
    info = np.iinfo(dtype.numpy)
    zp = int(min(max(3, info.min), info.max))
    q = nn.Quantization.scale_(0.37, zp)
    dst = nn.dense(x.shape, dtype, nn.Layout.NCHW, q)
    out = _quantize(x, nn.dense(x.shape, DT.F32, nn.Layout.NCHW), dst)
    np.testing.assert_array_equal(dst.view(out), ref.quantize(x, q, dtype.numpy))


@pytest.mark.parametrize("dtype,zps", [(DT.S8, [-128, 127, 0, 5]), (DT.U8, [0, 255, 128, 7])])
def test_quantize_per_axis_zero_point_extremes(dtype, zps):
    x = _floats((1, 4, 3, 6), spread=40.0)
    q = nn.Quantization.scale_([0.1, 0.25, 1.0, 0.03], zps, axis=1)
    dst = nn.dense(x.shape, dtype, nn.Layout.NCHW, q)
    out = _quantize(x, nn.dense(x.shape, DT.F32), dst)
    got = dst.view(out)
    np.testing.assert_array_equal(got, ref.quantize(x, q, dtype.numpy))
    info = np.iinfo(dtype.numpy)
    assert got.min() == info.min and got.max() == info.max  # saturates at both ends


def test_quantize_per_axis_length_one_axis():
    x = _floats((2, 1, 4, 4))
    q = nn.Quantization.scale_([0.5], [-3], axis=1)
    dst = nn.dense(x.shape, DT.S16, nn.Layout.NCHW, q)
    out = _quantize(x, nn.dense(x.shape, DT.F32), dst)
    np.testing.assert_array_equal(dst.view(out), ref.quantize(x, q, np.int16))


def test_rounding_ties_away_from_zero_and_saturation():
    x = np.array([0.25, -0.25, 0.75, -0.75, 1.25, 100.0, -100.0, np.nan], dtype=np.float32)
    q = nn.Quantization.scale_(0.5)                  # x / 0.5: 0.5 -0.5 1.5 -1.5 2.5 200 -200 nan
    dst = nn.dense(x.shape, DT.S8, quant=q)
    out = _quantize(x, nn.dense(x.shape, DT.F32), dst)
    assert dst.view(out).tolist() == [1, -1, 2, -2, 3, 127, -128, 0]


def test_shift_quantize_and_dequantize_per_axis():
    x = _floats((3, 8), spread=10.0)
    q = nn.Quantization.shift_([0, 3, 7], axis=0)
    dst = nn.dense(x.shape, DT.S16, quant=q)
    out = _quantize(x, nn.dense(x.shape, DT.F32), dst)
    qv = dst.view(out)
    np.testing.assert_array_equal(qv, ref.quantize(x, q, np.int16))
    back = buffer(x.size * 4)
    run(nn.ids.DEQUANTIZE, [out], [back], {"input": dst.to_wire(), "output": nn.dense(x.shape, DT.F32).to_wire()})
    np.testing.assert_array_equal(back.view(np.float32).reshape(x.shape), ref.dequantize(qv, q))


@pytest.mark.parametrize("layout,shape", [(nn.Layout.NCHW, (1, 64, 56, 56)), (nn.Layout.NHWC, (1, 7, 9, 20))])
def test_feature_map_padding_fused_with_quantize_leaves_padding(layout, shape):
    x = _floats(shape, spread=5.0)
    q = nn.Quantization.scale_(0.05)
    dst = nn.aligned(shape, DT.S8, layout, quant=q)
    assert dst.aligned_shape[-1] * 1 % 16 == 0 and dst.aligned_shape[-1] > shape[-1]
    before = buffer(dst.aligned_byte_size, seed=9)
    out = _quantize(x, nn.dense(shape, DT.F32, layout), dst, out=before.copy())
    np.testing.assert_array_equal(dst.view(out), ref.quantize(x, q, np.int8))
    valid = np.zeros(dst.aligned_byte_size, bool)
    dst.view(valid.view(np.int8))[...] = 1
    np.testing.assert_array_equal(out[~valid], before[~valid])  # padding bytes untouched


def test_w_already_aligned_means_no_padding():
    props = nn.aligned((1, 3, 4, 32), DT.S8, nn.Layout.NCHW)
    assert props.aligned_shape == props.valid_shape and props.stride == (384, 128, 32, 1)
    assert nn.aligned((1, 3, 4, 8), DT.F32, nn.Layout.NCHW).aligned_shape[-1] == 8   # 32 bytes already


@pytest.mark.parametrize("dtype", INT_TYPES)
@pytest.mark.parametrize("out_type", [DT.F32, DT.F16])
def test_dequantize_from_padded_input_with_garbage(dtype, out_type):
    info = np.iinfo(dtype.numpy)
    lo, hi = max(info.min, -10000), min(info.max, 10000)
    qv = np.random.default_rng(3).integers(lo, hi, (2, 3, 5), endpoint=True).astype(dtype.numpy)
    q = nn.Quantization.scale_([0.5, 0.001, 2.0], [lo, 0, hi], axis=1)
    src = nn.aligned(qv.shape, dtype, nn.Layout.NONE, align_bytes=32, quant=q)
    inp = buffer(src.aligned_byte_size, seed=11)   # garbage in every padding byte
    src.view(inp)[...] = qv
    dst = nn.dense(qv.shape, out_type)
    out = buffer(dst.aligned_byte_size)
    run(nn.ids.DEQUANTIZE, [inp], [out], {"input": src.to_wire(), "output": dst.to_wire()})
    np.testing.assert_array_equal(dst.view(out), ref.dequantize(qv, q, out_type.numpy))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_float_large_magnitudes(axis):
    x = _floats((3, 4, 5), spread=1.0)
    x[0, 0, 0], x[1, 2, 3], x[2, 3, 4] = 1e4, -1e4, 3e38
    src, dst = nn.aligned(x.shape, DT.F32, nn.Layout.NONE, 64), nn.dense(x.shape, DT.F32)
    inp, out = buffer(src.aligned_byte_size), buffer(dst.aligned_byte_size)
    src.view(inp)[...] = x
    run(nn.ids.SOFTMAX, [inp], [out], {"input": src.to_wire(), "output": dst.to_wire(), "axis": axis})
    got = dst.view(out)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref.softmax(x, axis), rtol=1e-6, atol=1e-12)


def test_softmax_int8_input_dequantises_first():
    qv = np.random.default_rng(5).integers(-128, 128, (2, 10)).astype(np.int8)
    q = nn.Quantization.scale_(0.125, -4)
    src, dst = nn.dense(qv.shape, DT.S8, quant=q), nn.dense(qv.shape, DT.F32)
    out = buffer(dst.aligned_byte_size)
    run(nn.ids.SOFTMAX, [qv.view(np.uint8).reshape(-1)], [out], {"input": src.to_wire(), "output": dst.to_wire()})
    np.testing.assert_allclose(dst.view(out), ref.softmax(ref.dequantize(qv, q), -1), rtol=1e-6, atol=1e-12)


def _convert(x_props, x, y_props, channels=-1, platform="", seed=13):
    inp = buffer(x_props.aligned_byte_size, seed=seed)
    x_props.view(inp)[...] = x
    out = buffer(y_props.aligned_byte_size, seed=seed + 1)
    run(nn.ids.LAYOUT, [inp], [out], {"input": x_props.to_wire(), "output": y_props.to_wire(),
                                      "channels": channels, "platform": platform})
    return y_props.view(out)


@pytest.mark.parametrize("platform,dtype,c", [("RK3568", DT.S8, 13), ("RK3588", DT.S8, 13), ("RK3588", DT.U8, 32),
                                              ("RK3566", DT.F16, 6), ("RV1106", DT.F16, 8)])
def test_nchw_nhwc_to_nc1hwc2_and_back(platform, dtype, c):
    x = np.random.default_rng(2).integers(-100, 100, (2, c, 3, 5)).astype(dtype.numpy)
    c2 = nn.c2_for(platform, dtype)
    blocked = nn.nc1hwc2(2, c, 3, 5, dtype, platform)
    assert blocked.valid_shape == (2, -(-c // c2), 3, 5, c2)
    y = _convert(nn.dense(x.shape, dtype, nn.Layout.NCHW), x, blocked, platform=platform)
    np.testing.assert_array_equal(y, ref.nchw_to_nc1hwc2(x, c2))   # padding lanes are zero
    # back, with garbage in the padding lanes of the source
    src = np.array(y)
    if c % c2:
        src[:, -1, :, :, c % c2:] = 77
    back = _convert(blocked, src, nn.aligned(x.shape, dtype, nn.Layout.NCHW), seed=20)
    np.testing.assert_array_equal(back, x)
    nhwc = x.transpose(0, 2, 3, 1)
    y2 = _convert(nn.dense(nhwc.shape, dtype, nn.Layout.NHWC), nhwc, blocked, platform=platform)
    np.testing.assert_array_equal(y2, y)
    back2 = _convert(blocked, src, nn.aligned(nhwc.shape, dtype, nn.Layout.NHWC), seed=30)
    np.testing.assert_array_equal(back2, nhwc)


def test_nc1hwc2_between_blocked_and_repacking_planar():
    x = np.arange(2 * 5 * 2 * 3, dtype=np.int8).reshape(2, 5, 2, 3)
    a, b = nn.nc1hwc2(2, 5, 2, 3, DT.S8, c2=4), nn.nc1hwc2(2, 5, 2, 3, DT.S8, c2=2)
    ya = _convert(nn.dense(x.shape, DT.S8, nn.Layout.NCHW), x, a)
    yb = _convert(a, ya, b, channels=5)
    np.testing.assert_array_equal(yb, ref.nchw_to_nc1hwc2(x, 2))
    padded = _convert(nn.dense(x.shape, DT.S8, nn.Layout.NCHW), x, nn.aligned(x.shape, DT.S8, nn.Layout.NCHW))
    np.testing.assert_array_equal(padded, x)


def _expect_invalid(op, inputs, outputs, params, *words):
    with pytest.raises(errors.InvalidArgument) as info:
        run(op, inputs, outputs, params)
    for w in words:
        assert w in str(info.value)
    return info.value


def test_bad_descriptors_are_invalid_argument():
    f32 = nn.dense((2, 4), DT.F32)
    s8 = nn.dense((2, 4), DT.S8, quant=nn.Quantization.scale_(0.1))
    inp, out = buffer(32), buffer(8)
    io = {"input": f32.to_wire(), "output": s8.to_wire()}
    run(nn.ids.QUANTIZE, [inp], [out], io)
    Q = nn.ids.QUANTIZE
    f32q = nn.dense((2, 4), DT.F32, quant=nn.Quantization.scale_(0.1))
    _expect_invalid(Q, [inp], [out], {**io, "output": f32q.to_wire()}, "output.dtype")
    _expect_invalid(Q, [inp], [out], {**io, "output": {**s8.to_wire(), "dtype": "S4"}}, "output.dtype", "4-bit")
    _expect_invalid(Q, [inp], [out], {**io, "input": {**f32.to_wire(), "dtype": "S8"}}, "input.dtype")
    _expect_invalid(Q, [inp], [out], {**io, "output": {**s8.to_wire(), "valid_shape": [4, 2], "stride": [2, 1],
                                                       "aligned_shape": [4, 2]}}, "valid_shape")
    _expect_invalid(Q, [inp], [out], {**io, "input": {**f32.to_wire(), "stride": [16, 2]}}, "input.stride",
                    "multiple")
    _expect_invalid(Q, [inp], [out], {**io, "input": {**f32.to_wire(), "stride": [8, 4]}}, "input.stride",
                    "smaller")
    _expect_invalid(Q, [inp], [out], {**io, "input": {**f32.to_wire(), "stride": [16]}}, "input.stride")
    _expect_invalid(Q, [inp], [out], {**io, "input": {**f32.to_wire(), "aligned_shape": [1, 4]}},
                    "input.aligned_shape")
    _expect_invalid(Q, [inp], [buffer(7)], io, "output", "too small")
    _expect_invalid(Q, [buffer(31)], [out], io, "input", "too small")
    bad_q = {**s8.to_wire(), "quant": {"type": "SCALE", "scale": [0.1, 0.2, 0.3], "axis": 1}}
    _expect_invalid(Q, [inp], [out], {**io, "output": bad_q}, "output.quant.scale", "per axis takes 4")
    bad_q = {**s8.to_wire(), "quant": {"type": "SCALE", "scale": [0.1], "zero_point": [200]}}
    _expect_invalid(Q, [inp], [out], {**io, "output": bad_q}, "zero_point", "-128..127")
    bad_q = {**s8.to_wire(), "quant": {"type": "SCALE", "scale": [0.0]}}
    _expect_invalid(Q, [inp], [out], {**io, "output": bad_q}, "scale", "> 0")
    bad_q = {**s8.to_wire(), "quant": {"type": "SCALE", "scale": [1.0], "axis": 2}}
    _expect_invalid(Q, [inp], [out], {**io, "output": bad_q}, "quant.axis")
    _expect_invalid(Q, [inp], [out], {**io, "output": {**s8.to_wire(), "quant": {"type": "NONE"}}}, "output.quant")
    _expect_invalid(Q, [inp], [out], {**io, "output": {**s8.to_wire(), "colour": 1}}, "unknown field")
    _expect_invalid(Q, [inp], [out], {**io, "output": [1, 2]}, "descriptor")
    _expect_invalid(Q, [inp], [out], {**io, "output": {**s8.to_wire(), "valid_shape": [0, 4]}}, "valid_shape")
    _expect_invalid(Q, [inp], [out], {**io, "output": {**s8.to_wire(), "aligned_byte_size": 3}}, "aligned_byte_size")


@pytest.mark.parametrize("field, value", [("dtype", ["S8"]), ("dtype", {"a": 1}), ("dtype", None), ("dtype", 3),
                                          ("layout", ["NCHW"]), ("layout", {"x": 1}), ("quant", {"type": ["SCALE"]})])
def test_descriptor_fields_of_the_wrong_type_are_invalid_argument(field, value):
    """A list or map where a name belongs was a TypeError (unhashable) that crashed the firmware."""
    f32 = nn.dense((2, 4), DT.F32)
    s8 = nn.dense((2, 4), DT.S8, quant=nn.Quantization.scale_(0.1))
    io = {"input": f32.to_wire(), "output": {**s8.to_wire(), field: value}}
    _expect_invalid(nn.ids.QUANTIZE, [buffer(32)], [buffer(8)], io, f"output.{field}" if field != "quant" else "quant")


def test_bad_softmax_and_layout_arguments():
    f32 = nn.dense((2, 4), DT.F32)
    _expect_invalid(nn.ids.SOFTMAX, [buffer(32)], [buffer(32)],
                    {"input": f32.to_wire(), "output": f32.to_wire(), "axis": 2}, "axis")
    x = nn.dense((1, 13, 2, 2), DT.S8, nn.Layout.NCHW)
    wrong_c1 = nn.nc1hwc2(1, 20, 2, 2, DT.S8, c2=8)
    wrong_c2 = nn.nc1hwc2(1, 13, 2, 2, DT.S8, c2=16)
    args = {"channels": -1, "platform": ""}
    _expect_invalid(nn.ids.LAYOUT, [buffer(64)], [buffer(128)],
                    {"input": x.to_wire(), "output": wrong_c1.to_wire(), **args}, "C1")
    _expect_invalid(nn.ids.LAYOUT, [buffer(64)], [buffer(128)],
                    {"input": x.to_wire(), "output": wrong_c2.to_wire(), **args, "platform": "RK3568"},
                    "C2 = 16", "RK3568")
    _expect_invalid(nn.ids.LAYOUT, [buffer(64)], [buffer(128)],
                    {"input": x.to_wire(), "output": {**wrong_c2.to_wire(), "dtype": "U8"}, **args}, "dtype")
    _expect_invalid(nn.ids.LAYOUT, [buffer(64)], [buffer(128)],
                    {"input": {**x.to_wire(), "layout": "NONE"}, "output": wrong_c2.to_wire(), **args}, "layout")

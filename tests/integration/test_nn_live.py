"""NN operators on a live SoC through the typed ARM API: results against the references,
bad descriptors as error replies with both cores still serving, Yolov3 batch split."""
from __future__ import annotations

import numpy as np
import pytest

from protocol import errors
from arm_side import CLEAN, CORE_0, CORE_1, Soc, opids
from arm_side import nn
from arm_side.nn import reference as ref
from tests.dsp.test_nn_yolo import make_maps, make_params, TOL

pytestmark = pytest.mark.live
DT = nn.DataType


@pytest.fixture(scope="module")
def soc(shared_soc):
    with Soc() as s:
        yield s


def _garbage(mem, seed=0):
    mem.array()[:] = np.random.default_rng(seed).integers(0, 256, mem.size, dtype=np.uint8)
    mem.flush(CLEAN)


def test_quantize_with_padding_then_dequantize(soc):
    shape = (1, 16, 6, 10)
    x = (np.random.default_rng(1).standard_normal(shape) * 3).astype(np.float32)
    q = nn.Quantization.scale_(np.linspace(0.01, 0.05, 16), np.arange(-8, 8), axis=1)
    f_props, s_props = nn.dense(shape, DT.F32, nn.Layout.NCHW), nn.aligned(shape, DT.S8, nn.Layout.NCHW, quant=q)
    src, dst, back = (soc.mem.alloc_cached(f_props.aligned_byte_size), soc.mem.alloc(s_props.aligned_byte_size),
                      soc.mem.alloc_cached(f_props.aligned_byte_size))
    _garbage(dst)
    nn.write(src, f_props, x)
    nn.quantize(soc, nn.Tensor(src, f_props), nn.Tensor(dst, s_props)).wait(10000)
    qv = nn.read(dst, s_props)
    np.testing.assert_array_equal(qv, ref.quantize(x, q, np.int8))
    task = nn.dequantize(soc, nn.Tensor(dst, s_props), nn.Tensor(back, f_props))  # padding holds garbage
    assert task.wait(10000)["elements"] == x.size
    np.testing.assert_array_equal(nn.read(back, f_props), ref.dequantize(qv, q))


def test_softmax_int8_and_layout_round_trip(soc):
    qv = np.random.default_rng(2).integers(-128, 128, (1, 13, 3, 3)).astype(np.int8)
    q = nn.Quantization.scale_(0.1)
    s_props, f_props = nn.dense(qv.shape, DT.S8, nn.Layout.NCHW, q), nn.dense(qv.shape, DT.F32, nn.Layout.NCHW)
    src, out = soc.mem.alloc(s_props.aligned_byte_size), soc.mem.alloc(f_props.aligned_byte_size)
    nn.write(src, s_props, qv)
    nn.softmax(soc, nn.Tensor(src, s_props), nn.Tensor(out, f_props), axis=1).wait(10000)
    np.testing.assert_allclose(nn.read(out, f_props), ref.softmax(ref.dequantize(qv, q), 1), rtol=1e-6, atol=1e-12)
    blocked = nn.nc1hwc2(1, 13, 3, 3, DT.S8, "RK3568")
    nc, again = soc.mem.alloc(blocked.aligned_byte_size), soc.mem.alloc(s_props.aligned_byte_size)
    _garbage(nc)
    nn.convert_layout(soc, nn.Tensor(src, s_props), nn.Tensor(nc, blocked), platform="RK3568").wait(10000)
    np.testing.assert_array_equal(nn.read(nc, blocked), ref.nchw_to_nc1hwc2(qv, 8))
    nn.convert_layout(soc, nn.Tensor(nc, blocked), nn.Tensor(again, s_props)).wait(10000)
    np.testing.assert_array_equal(nn.read(again, s_props), qv)


@pytest.mark.parametrize("core", [CORE_0, CORE_1])
def test_bad_descriptors_are_errors_and_the_core_keeps_serving(soc, core):
    f_props = nn.dense((4, 4), DT.F32)
    s_props = nn.dense((4, 4), DT.S8, quant=nn.Quantization.scale_(0.5))
    src, dst = soc.mem.alloc(64), soc.mem.alloc(16)
    bad = [
        {"input": f_props.to_wire(), "output": {**s_props.to_wire(), "dtype": "BF16"}},               # dtype
        {"input": f_props.to_wire(), "output": {**s_props.to_wire(), "valid_shape": [4, 5]}},         # shape
        {"input": {**f_props.to_wire(), "stride": [16, 2]}, "output": s_props.to_wire()},              # stride
        {"input": f_props.to_wire(), "output": nn.dense((8, 4), DT.S8, quant=s_props.quant).to_wire()},  # too small
    ]
    for params in bad:
        with pytest.raises(errors.InvalidArgument) as info:
            soc.rpc(nn.ids.QUANTIZE, [src], [dst], params, core=core).wait(10000)
        assert info.value.code == -6000001
    with pytest.raises(errors.InvalidArgument):
        nn.quantize(soc, nn.Tensor(src, f_props), nn.Tensor((dst.phys_addr, 8), s_props), core=core).wait(10000)
    assert soc.rpc(opids.PING, core=core).wait(5000)["core"] == f"vdsp{int(core) - 1}"
    nn.quantize(soc, nn.Tensor(src, f_props), nn.Tensor(dst, s_props), core=core).wait(10000)


def test_yolov3_batch_3_split_over_both_cores_and_chain_agrees(soc):
    p = make_params()
    batch = 3
    maps = make_maps(p, batch, seed=11)
    mems = []
    for m, x in enumerate(maps):
        mem = soc.mem.alloc(p.map_bytes(m, batch))
        mem.write(x.tobytes())
        mems.append(mem)
    out, out_chain = soc.mem.alloc(p.output_bytes(batch)), soc.mem.alloc(p.output_bytes(batch))
    _garbage(out)
    det = nn.detection_output(soc, mems, out, p, batch)
    assert sorted(det.cores) == ["vdsp0", "vdsp1"]   # one RPC per core
    got = nn.parse_output(out.array(np.float32), batch, p.max_box_num)
    expect = ref.yolov3_detection_output(maps, p, batch)
    assert det.counts == [len(e) for e in expect] and min(det.counts) > 0
    for g, e in zip(got, expect):
        np.testing.assert_array_equal(g[:, :2], e[:, :2])        # batch index, class
        np.testing.assert_allclose(g[:, 2:], e[:, 2:], atol=TOL)
    with nn.Chain(soc, p, batch, capacity=1024) as chain:
        res = chain.run(mems, out_chain)
    assert res.counts == det.counts and len(res.cores) == 4
    np.testing.assert_array_equal(out_chain.array(np.float32), out.array(np.float32))

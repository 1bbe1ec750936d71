"""arm_side.nn tensor descriptors: enums, alignment and strides, C2 table, and writing a plain
array into a padded tensor in shared memory and back (padding full of garbage)."""
from __future__ import annotations

import numpy as np
import pytest

from protocol import errors
from arm_side import nn
from arm_side.memory import MemoryManager

DT = nn.DataType


@pytest.fixture
def mm(shm):
    manager = MemoryManager(strict=False)
    yield manager
    manager.close()


def test_enum_values_are_the_sdk_ones():
    assert [DT.S4, DT.U4, DT.S8, DT.U8, DT.F16, DT.S16, DT.U16, DT.F32, DT.S32, DT.U32, DT.F64, DT.S64, DT.U64] == \
        list(range(6, 19))
    assert (nn.Layout.NHWC, nn.Layout.NCHW, nn.Layout.NONE) == (0, 2, 255)
    assert (nn.QuantiType.NONE, nn.QuantiType.SHIFT, nn.QuantiType.SCALE) == (0, 1, 2)
    assert DT.S4.itemsize == 0.5 and DT.S16.itemsize == 2 and nn.from_numpy(np.float16) is DT.F16
    with pytest.raises(errors.InvalidArgument):
        DT.U4.numpy


def test_bpu_feature_map_alignment_like_the_padding_guide():
    # the guide's example: int8 NCHW 1x64x56x56, W padded from 56 to 64 bytes
    p = nn.aligned((1, 64, 56, 56), DT.S8, nn.Layout.NCHW)
    assert p.aligned_shape == (1, 64, 56, 64)
    assert p.stride == (229376, 3584, 64, 1) and p.aligned_byte_size == 229376
    # NHWC pads C; 16 bytes of F32 is 4 elements
    q = nn.aligned((2, 5, 7, 3), DT.F32, nn.Layout.NHWC)
    assert q.aligned_shape == (2, 5, 7, 4) and q.stride == (560, 112, 16, 4)
    assert nn.aligned_last_dim(8, DT.S16) == 8 and nn.aligned_last_dim(9, DT.S16) == 16


def test_c2_table():
    assert nn.c2_for("RK3568", DT.S8) == 8 and nn.c2_for("RK3566", DT.U8) == 8
    assert all(nn.c2_for(p, DT.S8) == 16 for p in ("RK3588", "RK3576", "RK3562", "RV1106"))
    assert nn.c2_for("RK3568", DT.F16) == 4 and nn.c2_for("RK3588", DT.F16) == 8
    with pytest.raises(errors.InvalidArgument):
        nn.c2_for("RV1106B", DT.F16)
    with pytest.raises(errors.InvalidArgument):
        nn.c2_for("RK9999", DT.S8)
    # RKNN's example: (1, 13, 4, 4) int8 on RK3568 is (1, 2, 4, 4, 8)
    assert nn.nc1hwc2(1, 13, 4, 4, DT.S8, "RK3568").valid_shape == (1, 2, 4, 4, 8)


def test_wire_form():
    q = nn.Quantization.scale_([0.5, 0.25], [1, -2], axis=3)
    w = nn.aligned((1, 2, 3, 2), DT.S8, nn.Layout.NCHW, quant=q).to_wire()
    assert w == {"dtype": "S8", "layout": "NCHW", "valid_shape": [1, 2, 3, 2], "aligned_shape": [1, 2, 3, 16],
                 "stride": [96, 48, 16, 1], "aligned_byte_size": 96,
                 "quant": {"type": "SCALE", "scale": [0.5, 0.25], "zero_point": [1, -2], "axis": 3}}
    assert nn.Quantization.shift_(3).to_wire() == {"type": "SHIFT", "shift": [3], "axis": 0}


@pytest.mark.parametrize("dtype", [DT.S8, DT.U8, DT.S16, DT.U16, DT.S32, DT.F16, DT.F32])
@pytest.mark.parametrize("cached", [False, True])
def test_write_and_read_a_padded_tensor(mm, dtype, cached):
    shape = (2, 3, 5, 7)
    x = (np.arange(np.prod(shape)) % 100).astype(dtype.numpy).reshape(shape)
    p = nn.aligned(shape, dtype, nn.Layout.NCHW)
    mem = (mm.alloc_cached if cached else mm.alloc)(p.aligned_byte_size)
    garbage = np.random.default_rng(0).integers(0, 256, p.aligned_byte_size, dtype=np.uint8)
    mem.array()[:] = garbage
    nn.write(mem, p, x)
    raw = np.frombuffer(mem.read(), dtype=np.uint8) if not cached else mem.array().copy()
    # every valid element sits at n*s0 + c*s1 + h*s2 + w*s3; everything else is untouched
    itemsize = dtype.numpy.itemsize
    valid = np.zeros(p.aligned_byte_size, bool)
    for idx in np.ndindex(*shape):
        off = sum(i * s for i, s in zip(idx, p.stride))
        assert raw[off:off + itemsize].tobytes() == x[idx].tobytes()
        valid[off:off + itemsize] = True
    np.testing.assert_array_equal(raw[~valid], garbage[~valid])
    np.testing.assert_array_equal(nn.read(mem, p), x)


def test_write_checks_shape_and_size(mm):
    p = nn.aligned((1, 2, 3, 4), DT.S8, nn.Layout.NCHW)
    with pytest.raises(errors.InvalidArgument):
        nn.write(mm.alloc(p.aligned_byte_size), p, np.zeros((1, 2, 3, 5), np.int8))
    with pytest.raises(errors.InvalidArgument):
        nn.write(mm.alloc(p.aligned_byte_size - 1), p, np.zeros((1, 2, 3, 4), np.int8))
    with pytest.raises(errors.InvalidArgument):
        nn.dense((1, 0, 3), DT.S8)

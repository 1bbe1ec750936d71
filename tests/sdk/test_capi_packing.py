"""The packed input of hbDSPRpcV2 (arm_side.capi.packing, docs/capi.md): the layout each operator
gets from the contract, hb_dsp.h's constants, the split of an hbDSPPackedBuffers and the texts of
a packed input that does not fit; and the embedded SDK's texts in C's terms (arm_side.capi.bridge).
The live checks (C programs packing as a J5 program does) are tests/integration/test_capi_packed.py
and the conformance table's ``packed`` cases."""
from __future__ import annotations

import re
import struct

import pytest

from arm_side.capi import opsgen, packing
from protocol import errors
from protocol.contract import cv_ids, framework_ops, pointcloud_ids

HB_DSP_H = opsgen.HEADER.parent / "hb_dsp.h"


def sizes() -> dict[int, packing.Packed]:
    return {p.id: p for p in opsgen.packed(opsgen.host_sizeof())}


def test_hb_dsp_h_states_the_layouts_constants():
    text = HB_DSP_H.read_text()
    assert re.search(r"#define HB_DSP_PACKED_ALIGN (\d+)", text).group(1) == str(packing.ALIGN)
    assert re.search(r"#define HB_DSP_PACKED_MAX_BUFFERS (\d+)", text).group(1) == str(packing.MAX_BUFFERS)
    assert opsgen.host_sizeof()(packing.TABLE_STRUCT) == packing.TABLE_BYTES


def test_the_table_holds_every_buffer_count_the_contract_allows():
    for e in opsgen.stock_entries():
        assert max(e.inputs[1], e.outputs[1]) <= packing.MAX_BUFFERS, e.name


def test_each_operator_with_a_struct_has_a_layout_and_ping_has_none():
    layouts = sizes()
    assert set(layouts) == {i for i, op in opsgen.OPERATORS.items() if op.struct}
    assert framework_ops.PING.id not in layouts
    blur = layouts[cv_ids.GAUSSIAN_BLUR]
    assert (blur.size, blur.has_table, blur.header, blur.data, blur.least) == (112, False, 112, 128, 129)
    encode = layouts[pointcloud_ids.ENCODE]          # two or three outputs: a table after the struct
    assert (encode.has_table, encode.header, encode.data) == (True, encode.size + 72, 192)
    fill = layouts[framework_ops.FILL.id]            # no inputs: the input holds the parameters only
    assert fill.least == fill.header == 16


def test_the_data_and_the_outputs_are_split_as_the_table_says():
    encode = sizes()[pointcloud_ids.ENCODE]
    table = struct.pack("<II8I8I", 0, 2, *[0] * 8, 400, 100, *[0] * 6)
    ins, outs = packing.ranges(encode, table, 192 + 1600, 548)
    assert ins == [(192, 1600)]                      # count 0: one input, to the end
    assert outs == [(0, 400), (448, 100)]            # the second from the next 64-byte boundary
    blur = sizes()[cv_ids.GAUSSIAN_BLUR]
    assert packing.ranges(blur, b"", 128 + 50, 64) == ([(128, 50)], None)   # the output as given


@pytest.mark.parametrize("table, in_size, out_size, text", [
    (struct.pack("<II8I8I", 0, 4, *[0] * 16), 300, 512, "hbDSPPackedBuffers.outputCount 4 must be in 0..3"),
    (struct.pack("<II8I8I", 0, 2, *[0] * 8, 400, 0, *[0] * 6), 300, 512, "hbDSPPackedBuffers.outputSize[1] is 0"),
    (struct.pack("<II8I8I", 0, 2, *[0] * 8, 400, 100, *[0] * 6), 300, 500,
     "the 2 outputs of hbDSPPackedBuffers.outputSize end at byte 548, the output has 500 bytes"),
    (struct.pack("<II8I8I", 0, 2, *[0] * 8, 400, 100, *[0] * 6), 300, None,
     "hbDSPPackedBuffers.outputCount is 2 but the output is NULL"),
    (b"", 192, 512, "the input has 192 bytes, at least 193 needed"),
])
def test_a_packed_input_that_does_not_fit_is_an_invalid_argument_naming_the_call_and_the_sizes(
        table, in_size, out_size, text):
    encode = sizes()[pointcloud_ids.ENCODE]
    with pytest.raises(errors.InvalidArgument) as exc:
        packing.ranges(encode, table or bytes(packing.TABLE_BYTES), in_size, out_size)
    assert exc.value.message == (
        f"hbDSPRpcV2: operator 0x0600 (pointcloud_encode) takes its parameters packed in its input: "
        f"hbDSPPointcloudEncodeParam ({encode.size} bytes), hbDSPPackedBuffers (72 bytes) at byte {encode.size}, "
        f"then its data from byte 192: {text}")


def test_a_null_input_is_refused_for_an_operator_with_a_struct():
    with pytest.raises(errors.InvalidArgument, match=r"hbDSPRpcV2: operator 0x0809 \(cv.gaussianBlur\) .*: the input "
                                                     r"is NULL$"):
        packing.check_input(sizes()[cv_ids.GAUSSIAN_BLUR], None)


@pytest.mark.parametrize("exc, c_text", [
    (errors.CacheCoherencyError("memory 0x10 (64 bytes) was written by the CPU but not cleaned: call flush(CLEAN) "
                                "before the task"), "call hbSysFlushMem(HB_SYS_MEM_CACHE_CLEAN) before the task"),
    (errors.CacheCoherencyError("memory 0x10 (64 bytes) was written by the DSP; call flush(INVALIDATE) before "
                                "reading"), "call hbSysFlushMem(HB_SYS_MEM_CACHE_INVALIDATE) before reading"),
    (errors.SysRegisterMemFailed("0x10 size 64: memory of owner 0x000001 is not granted to this process's owner "
                                 "0x000002 (its owner must grant it first: mem.share())"),
     "(its owner must grant it first)"),
])
def test_the_embedded_sdks_texts_name_c_functions(exc, c_text):
    cffi = pytest.importorskip("cffi")
    from arm_side.capi.bridge import Bridge
    ffi = cffi.FFI()
    ffi.cdef(re.sub(r'extern "Python"[^;]*;', "", (opsgen.HEADER.parent.parent / "capi.cdef").read_text()))
    bridge = Bridge(ffi)
    assert bridge.failed(exc, errors.InvalidArgument.code) == exc.code
    text = ffi.string(bridge.error_desc(exc.code)).decode()
    assert text.endswith(c_text + ")"), text
    assert "flush(" not in text and "mem.share" not in text, text

"""arm_side.hb, Horizon's C names for ported J5 code (live SoC): return codes instead of
exceptions (0, or the manual's negative code), out-parameters filled in place, hbSys* memory,
hbDSP* tasks and the hbDNN* runtime; expected results from numpy and onnxruntime alone."""
from __future__ import annotations

import numpy as np
from arm_side.dnn.ortload import onnxruntime as ort
import pytest

from arm_side import Soc, dnn, errors, hb, opids
from vdsp_sim import dnn_models

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def soc(shared_soc):
    with Soc() as s:
        hb.use(s)
        yield s
        hb.close()


def test_codes_are_the_manuals(soc):
    for code, cls in errors.all_codes().items():
        if cls.name.startswith("HB_"):
            assert getattr(hb, cls.name) == code
    assert (hb.HB_DNN_INVALID_ARGUMENT, hb.HB_DNN_TIMEOUT, hb.HB_DNN_INVALID_TASK_HANDLE) == \
        (-6000001, -6000008, -6000011)
    assert (hb.HB_SYS_INVALID_ARGUMENT, hb.HB_SYS_OUT_OF_MEMORY) == (-6000129, -6000130)
    assert (hb.HB_SYS_MEM_CACHE_INVALIDATE, hb.HB_SYS_MEM_CACHE_CLEAN) == (1, 2)
    assert (hb.HB_BPU_CORE_ANY, hb.HB_BPU_CORE_0, hb.HB_BPU_CORE_1) == (0, 1, 2)
    assert hb.HB_DNN_PRIORITY_PREEMP == hb.HB_DNN_PRIORITY_HIGHEST == 255
    assert hb.hbDNNGetErrorDesc(-6000008).startswith("HB_DNN_TIMEOUT")
    assert "unknown" in hb.hbDNNGetErrorDesc(-1234)
    assert hb.hbDNNGetVersion() == dnn.version()


def test_memory_and_a_dsp_task_as_the_j5_sample_writes_them(soc):
    src, dst = hb.hbSysMem(), hb.hbSysMem()
    assert hb.hbSysAllocCachedMem(src, 4096) == 0 and hb.hbSysAllocMem(dst, 4096) == 0
    assert src.memSize == 4096 and src.phyAddr == src.mem.phys_addr and src.virAddr.size == 4096
    pattern = (np.arange(4096) * 7 % 251).astype(np.uint8)
    src.virAddr[:] = pattern
    assert hb.hbSysFlushMem(src, hb.HB_SYS_MEM_CACHE_CLEAN) == 0
    task, ctrl = hb.hbDSPTask_t(), hb.hbDSPRpcCtrlParam(priority=9)
    hb.HB_DSP_INITIALIZE_RPC_CTRL_PARAM(ctrl)
    assert ctrl == hb.hbDSPRpcCtrlParam()
    ctrl.dspCoreId = hb.HB_DSP_CORE_1
    assert hb.hbDSPRpcV2(task, src, dst, opids.MEMCPY, ctrl) == 0
    assert hb.hbDSPWaitTaskDone(task, 5000) == 0
    assert task.value.core == "vdsp1" and task.value.values == {"bytes": 4096}
    assert hb.hbDSPReleaseTask(task) == 0
    out = bytearray(4096)
    assert hb.hbSysReadMem(out, dst, 4096) == 0
    assert bytes(out) == pattern.tobytes()
    assert hb.hbSysWriteMem(dst, b"\x01\x02\x03", 3) == 0
    assert bytes(dst.virAddr[:4]) == b"\x01\x02\x03" + pattern[3:4].tobytes()
    # register this process's own memory (a second, cached mapping of it), then unregister
    again = hb.hbSysMem(phyAddr=dst.phyAddr, memSize=16)
    assert hb.hbSysRegisterMem(again) == 0
    assert bytes(again.virAddr[:3]) == b"\x01\x02\x03"
    assert hb.hbSysUnregisterMem(again) == 0
    for mem in (src, dst):
        assert hb.hbSysFreeMem(mem) == 0 and mem.mem is None


def test_errors_are_return_codes(soc):
    mem = hb.hbSysMem()
    assert hb.hbSysAllocMem(mem, -1) == hb.HB_SYS_INVALID_ARGUMENT
    assert isinstance(hb.last_error(), errors.SysInvalidArgument)
    assert hb.hbSysAllocMem("not a struct", 64) == hb.HB_SYS_INVALID_ARGUMENT
    assert hb.hbSysAllocMem(mem, 64) == 0 and hb.last_error() is None
    assert hb.hbSysFlushMem(mem, 3) == hb.HB_SYS_INVALID_ARGUMENT
    assert hb.hbSysReadMem(b"read-only", mem, 4) == hb.HB_SYS_INVALID_ARGUMENT
    assert hb.hbSysWriteMem(mem, b"ab", 5) == hb.HB_SYS_INVALID_ARGUMENT
    assert hb.hbSysFreeMem(mem) == 0
    assert hb.hbSysFreeMem(mem) == hb.HB_SYS_INVALID_ARGUMENT          # twice
    assert hb.hbSysRegisterMem(hb.hbSysMem(phyAddr=0x1234, memSize=64)) == hb.HB_SYS_REGISTER_MEM_FAILED

    task = hb.hbDSPTask_t()
    assert hb.hbDSPRpcV2(task, None, None, 0x13FF) == 0                   # refused when waited for
    assert hb.hbDSPWaitTaskDone(task, 5000) == hb.HB_DSP_UNKNOWN_OPERATOR == -6000260
    assert "0x13ff" in str(hb.last_error()).lower()
    slow = hb.hbDSPTask_t()
    assert hb.hbDSPRpcV2(slow, [], [], opids.SLEEP, params={"ms": 300}) == 0
    assert hb.hbDSPWaitTaskDone(slow, 20) == hb.HB_DNN_TIMEOUT
    assert hb.hbDSPWaitTaskDone(slow, 5000) == 0 and slow.value.values == {"slept_ms": 300.0}
    assert hb.hbDSPWaitTaskDone(hb.hbDSPTask_t(), 10) == hb.HB_DNN_INVALID_TASK_HANDLE
    assert hb.hbDSPRpcV2("no ref", None, None, opids.PING) == hb.HB_DNN_INVALID_ARGUMENT
    assert hb.hbDSPRpcV2(hb.hbDSPTask_t(), None, None, opids.PING, hb.hbDSPRpcCtrlParam(dspCoreId=7)) == \
        hb.HB_DSP_INVALID_CORE
    assert hb.hbDNNWaitTaskDone(hb.hbDNNTaskHandle_t(), 10) == hb.HB_DNN_INVALID_TASK_HANDLE


def test_the_dnn_flow_matches_onnxruntime_alone(soc, tmp_path):
    path, whole = dnn_models.ensure(dnn_models.MOBILENET, tmp_path)
    rt = dnn.Runtime(soc, enable_dsp=True, plugin_path=dnn.STOCK_PLUGIN_DIR, environ={}, log_level=0)
    hb.use(soc, runtime=rt)
    try:
        assert hb.hbDNNRegisterLayerCreator("Softmax", rt.plugin_creators()["Softmax"]) == 0
        pack, names, count = hb.hbPackedDNNHandle_t(), hb.Ref(), hb.Ref()
        assert hb.hbDNNInitializeFromFiles(pack, [str(path)], 1) == 0
        assert hb.hbDNNGetModelNameList(names, count, pack) == 0 and count.value == 1
        model = hb.hbDNNHandle_t()
        assert hb.hbDNNGetModelHandle(model, pack, names.value[0]) == 0
        n_in, n_out, in_props, out_props, in_name = hb.Ref(), hb.Ref(), hb.Ref(), hb.Ref(), hb.Ref()
        assert hb.hbDNNGetInputCount(n_in, model) == 0 and hb.hbDNNGetOutputCount(n_out, model) == 0
        assert (n_in.value, n_out.value) == (1, 1)
        assert hb.hbDNNGetInputName(in_name, model, 0) == 0 and in_name.value == "data"
        assert hb.hbDNNGetInputName(in_name, model, 5) == hb.HB_DNN_INVALID_ARGUMENT
        assert hb.hbDNNGetInputTensorProperties(in_props, model, 0) == 0
        assert hb.hbDNNGetOutputTensorProperties(out_props, model, 0) == 0

        img = np.random.default_rng(1).integers(0, 256, (336, 224), dtype=np.uint8)
        inp = hb.hbDNNTensor(properties=in_props.value)
        out = hb.hbDNNTensor(properties=out_props.value)
        assert hb.hbSysAllocCachedMem(inp.sysMem[0], in_props.value.aligned_byte_size) == 0
        assert hb.hbSysAllocCachedMem(out.sysMem[0], out_props.value.aligned_byte_size) == 0
        in_props.value.planes(inp.sysMem[0].virAddr)[...] = img
        assert hb.hbSysFlushMem(inp.sysMem[0], hb.HB_SYS_MEM_CACHE_CLEAN) == 0

        task, ctrl = hb.hbDNNTaskHandle_t(), hb.hbDNNInferCtrlParam(priority=3)
        hb.HB_DNN_INITIALIZE_INFER_CTRL_PARAM(ctrl)
        assert ctrl.priority == hb.HB_DNN_PRIORITY_LOWEST and ctrl.bpuCoreId == hb.HB_BPU_CORE_ANY
        done = []
        assert hb.hbDNNInfer(task, [out], [inp], model, ctrl) == 0
        assert hb.hbDNNSetTaskDoneCb(task, lambda t, status, ud: done.append((status, ud)), "ud") == 0
        assert hb.hbDNNWaitTaskDone(task, 0) == 0
        assert done == [(0, "ud")]
        assert hb.hbSysFlushMem(out.sysMem[0], hb.HB_SYS_MEM_CACHE_INVALIDATE) == 0
        prob = from_props(out_props.value, out.sysMem[0])
        assert hb.hbDNNReleaseTask(task) == 0
        assert hb.hbDNNReleaseTask(task) == hb.HB_DNN_INVALID_TASK_HANDLE
        assert hb.hbDNNRelease(pack) == 0
        assert hb.hbDNNUnregisterLayerCreator("Softmax") == 0
        assert hb.hbDNNUnregisterLayerCreator("Softmax") == hb.HB_DNN_INVALID_ARGUMENT
        for t in (inp, out):
            assert hb.hbSysFreeMem(t.sysMem[0]) == 0
    finally:
        rt.close()
        hb.use(soc)
    want = ort.InferenceSession(str(whole), providers=["CPUExecutionProvider"]).run(None, {"data": img[None]})[0]
    np.testing.assert_allclose(prob, want.reshape(-1), rtol=1e-5, atol=1e-7)


def from_props(props, mem: hb.hbSysMem) -> np.ndarray:
    from arm_side import nn
    return nn.read(mem.mem, props, invalidate=False).reshape(-1)

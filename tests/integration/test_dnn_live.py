"""arm_side.dnn against a live SoC: every API function, DSP dispatch vs the ARM side vs
onnxruntime alone, a user-registered layer on the DSP, ``more``, the manual's error codes,
the environment variables, and ``vdsp sample nn mobilenet`` in both HB_DNN_ENABLE_DSP settings."""
from __future__ import annotations

import io
import json
import logging
import threading

import numpy as np
from arm_side.dnn.ortload import onnxruntime as ort
import pytest

from protocol import errors
from arm_side import CLEAN, INVALIDATE, Soc, dnn, nn
from vdsp_sim import dnn_models

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def soc(shared_soc):
    with Soc() as s:
        yield s


@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory):
    return dnn_models.ensure(dnn_models.MOBILENET, tmp_path_factory.mktemp("models"))


def runtime(soc, dsp: bool, **kw) -> dnn.Runtime:
    kw.setdefault("log_level", 0)
    rt = dnn.Runtime(soc, enable_dsp=dsp, plugin_path=dnn.STOCK_PLUGIN_DIR, environ={}, **kw)
    rt.register_layer_creator("Softmax", rt.plugin_creators()["Softmax"])
    return rt


def nv12_image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (336, 224), dtype=np.uint8)


def run_mobilenet(soc, rt, path, img):
    pack = rt.initialize_from_files([path])
    model = rt.model_handle(pack, rt.model_name_list(pack)[0])
    ip, op = rt.input_tensor_properties(model, 0), rt.output_tensor_properties(model, 0)
    with soc.mem.alloc_cached(ip.aligned_byte_size) as src, soc.mem.alloc_cached(op.aligned_byte_size) as dst:
        ip.planes(src.array())[...] = img
        src.flush(CLEAN)
        task = rt.infer([nn.Tensor(dst, op)], [nn.Tensor(src, ip)], model)
        rt.wait_task_done(task, 0)
        dst.flush(INVALIDATE)
        prob, layers = nn.read(dst, op, invalidate=False).reshape(-1), task.layers
        rt.release_task(task)
    rt.release(pack)
    return prob, layers


def test_dsp_dispatch_arm_side_and_onnxruntime_alone_agree(soc, mobilenet):
    path, whole = mobilenet
    img = nv12_image(1)
    with runtime(soc, True) as rt:
        on_dsp, dsp_layers = run_mobilenet(soc, rt, path, img)
    with runtime(soc, False) as rt:
        on_arm, arm_layers = run_mobilenet(soc, rt, path, img)
    ref = ort.InferenceSession(str(whole), providers=["CPUExecutionProvider"]).run(None, {"data": img[None]})[0]
    assert [(r.name, r.where[:3]) for r in dsp_layers] == [("bpu_subgraph0", "BPU"), ("logits", "vds"),
                                                           ("prob", "vds")]
    assert [(r.name, r.where[:3]) for r in arm_layers] == [("bpu_subgraph0", "BPU"), ("logits", "ARM"),
                                                           ("prob", "ARM")]
    assert all(r.rpc_us > 0 and r.exec_us > 0 for r in dsp_layers[1:])
    np.testing.assert_allclose(on_dsp, on_arm, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(on_dsp, ref.reshape(-1), rtol=1e-5, atol=1e-7)
    assert list(np.argsort(-on_dsp)[:5]) == list(np.argsort(-ref.reshape(-1))[:5])
    assert abs(on_dsp.sum() - 1) < 1e-5


class NchwToNhwc(dnn.Layer):
    """A user's layer: NCHW -> NHWC by the stock layout operator on a DSP core."""
    def init(self, attrs, inputs, outputs):
        self.ran = 0

    def forward(self, ctx, inputs, outputs):
        ctx.wait(nn.convert_layout(ctx.soc, inputs[0], outputs[0], **ctx.rpc_args))


def test_a_user_registered_layer_runs_on_the_dsp_and_quantize_too(soc):
    data, whole = dnn_models.build_feature_head(user_layer=True)
    x = (np.random.default_rng(2).standard_normal(dnn_models.FEATURE_SHAPE) * 2).astype(np.float32)
    results = {}
    for dsp in (True, False):
        with runtime(soc, dsp) as rt:
            with pytest.raises(errors.InvalidModel, match="no layer creator is registered for type NchwToNhwc"):
                rt.initialize_from_ddr([data])
            rt.register_layer_creator("NchwToNhwc", NchwToNhwc)
            pack = rt.initialize_from_ddr([data])
            model = rt.model_handle(pack, "feature_head_nhwc")
            ip, op = rt.input_tensor_properties(model, 0), rt.output_tensor_properties(model, 0)
            assert op.layout == nn.Layout.NHWC and op.valid_shape == (1, 3, 3, 10)
            with soc.mem.alloc(ip.aligned_byte_size) as src, soc.mem.alloc(op.aligned_byte_size) as dst:
                nn.write(src, ip, x)
                task = rt.infer([nn.Tensor(dst, op)], [nn.Tensor(src, ip)], model)
                rt.wait_task_done(task, 10000)
                results[dsp] = (nn.read(dst, op), {r.name: r.where for r in task.layers})
                rt.release_task(task)
            rt.release(pack)
    out_dsp, where_dsp = results[True]
    out_arm, where_arm = results[False]
    assert where_dsp["to_nhwc"].startswith("vdsp") and where_dsp["feature_quantize"].startswith("vdsp")
    assert where_arm["feature_quantize"] == "ARM" and where_arm["scores"] == "ARM"
    assert where_arm["to_nhwc"].startswith("vdsp")       # the user's layer only has a DSP side
    np.testing.assert_array_equal(out_dsp, out_arm)
    ref = ort.InferenceSession(whole, providers=["CPUExecutionProvider"]).run(None, {"feature": x})[0]
    np.testing.assert_allclose(out_dsp, ref, rtol=1e-6, atol=1e-6)


# --- a small model with a gate layer, to control timing --------------------------------------------

class Gate(dnn.Layer):
    """Waits for ``opened`` then copies its input; records the order of the inferences it ran."""
    opened = threading.Event()
    order: list = []
    fail_with = None

    def forward(self, ctx, inputs, outputs):
        assert Gate.opened.wait(30)
        x = ctx.read(inputs[0])
        Gate.order.append(float(x.reshape(-1)[0]))
        if Gate.fail_with is not None:
            raise Gate.fail_with
        ctx.write(outputs[0], x)


def gate_model() -> bytes:
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    f = nn.dense((1, 4), nn.DataType.F32)
    manifest = {"name": "gated", "inputs": ["x"], "outputs": ["z"], "tensors": {"x": f, "y": f, "z": f},
                "layers": [{"name": "relu", "type": "BPU", "graph": "relu", "inputs": ["x"], "outputs": ["y"]},
                           {"name": "gate", "type": "Gate", "inputs": ["y"], "outputs": ["z"]}]}
    return dnn.container.pack([manifest], {"relu": m.SerializeToString()})


@pytest.fixture
def gated(soc):
    Gate.opened.set()
    Gate.order.clear()
    Gate.fail_with = None
    rt = dnn.Runtime(soc, enable_dsp=False, log_level=0, environ={})
    rt.register_layer_creator("Gate", Gate)
    pack = rt.initialize_from_ddr([gate_model()])
    model = rt.model_handle(pack, "gated")
    f = rt.input_tensor_properties(model, 0)
    mems = []

    def tensors(value: float):
        src, dst = soc.mem.alloc(f.aligned_byte_size), soc.mem.alloc(f.aligned_byte_size)
        mems.extend([src, dst])
        nn.write(src, f, np.full((1, 4), value, np.float32))
        return [nn.Tensor(dst, f)], [nn.Tensor(src, f)]
    yield rt, model, tensors
    Gate.opened.set()
    rt.close()
    for m in mems:
        m.free()


def test_every_api_function(soc, mobilenet, gated):
    rt, model, tensors = gated
    assert dnn.version() == rt.version() and dnn.version().startswith("1.0.0_(onnxruntime ")
    assert rt.error_desc(-6000005) == "HB_DNN_INVALID_DNN_HANDLE: invalid DNN handle"
    pack = rt.initialize_from_files([mobilenet[0]])
    with soc.mem.alloc(mobilenet[0].stat().st_size) as mem:       # from memory: bytes and a Mem
        mem.write(mobilenet[0].read_bytes())
        assert rt.model_name_list(rt.initialize_from_ddr([mem])) == [dnn_models.MOBILENET]
    assert rt.model_name_list(pack) == [dnn_models.MOBILENET]
    m = rt.model_handle(pack, dnn_models.MOBILENET)
    assert (rt.input_count(m), rt.output_count(m), rt.input_name(m, 0), rt.output_name(m, 0)) == (1, 1, "data", "prob")
    assert rt.input_tensor_properties(m, 0) == dnn.nv12(224, 224)
    assert rt.output_tensor_properties(m, 0) == nn.dense((1, 1000, 1, 1), nn.DataType.F32, nn.Layout.NCHW)
    # infer / wait / callback / release_task on the gated model
    seen = []
    outs, ins = tensors(3.0)
    task = rt.infer(outs, ins, model, dnn.InferCtrlParam(priority=10, custom_id=7))
    rt.set_task_done_callback(task, lambda t, status, ud: seen.append((t, status, ud)), "user data")
    rt.wait_task_done(task, -1)
    assert seen == [(task, 0, "user data")] and task.status == 0
    late = []
    rt.set_task_done_callback(task, lambda t, status, ud: late.append(status))      # already done: at once
    assert late == [0]
    np.testing.assert_array_equal(nn.read(outs[0].mem, outs[0].props), np.full((1, 4), 3.0))
    rt.release_task(task)
    rt.unregister_layer_creator("Gate")
    with pytest.raises(errors.InvalidModel, match="Gate"):
        rt.initialize_from_ddr([gate_model()])
    rt.register_layer_creator("Gate", Gate)
    rt.release(pack)


def test_the_manuals_error_codes(soc, gated, mobilenet):
    rt, model, tensors = gated
    other = dnn.Runtime(soc, log_level=0, environ={})
    try:
        foreign = other.initialize_from_files([mobilenet[0]])
        for bad in (None, 7, "pack", foreign):
            with pytest.raises(errors.InvalidPackedDnnHandle) as ei:
                rt.model_name_list(bad)
            assert ei.value.code == -6000004
        pack = rt.initialize_from_files([mobilenet[0]])
        m = rt.model_handle(pack, dnn_models.MOBILENET)
        with pytest.raises(errors.InvalidArgument):
            rt.model_handle(pack, "resnet")
        with pytest.raises(errors.InvalidArgument):
            rt.input_name(m, 1)
        rt.release(pack)
        with pytest.raises(errors.InvalidPackedDnnHandle):
            rt.release(pack)
        for bad in (None, m, pack):
            with pytest.raises(errors.InvalidDnnHandle) as ei:
                rt.input_count(bad)
            assert ei.value.code == -6000005
    finally:
        other.close()
    # wrong tensor properties
    outs, ins = tensors(1.0)
    f = ins[0].props
    for props, word in ((nn.dense((1, 5), nn.DataType.F32), "valid_shape"), (nn.dense((1, 4), nn.DataType.F64),
                        "tensorType"), (nn.dense((1, 4), nn.DataType.F32, nn.Layout.NCHW), "layout")):
        with pytest.raises(errors.InvalidArgument, match=word) as ei:
            rt.infer(outs, [nn.Tensor(ins[0].mem, props)], model)
        assert ei.value.code == -6000001
    with soc.mem.alloc(8) as small:
        with pytest.raises(errors.InvalidArgument, match="alignedByteSize"):
            rt.infer(outs, [nn.Tensor(small, f)], model)
    with pytest.raises(errors.InvalidArgument, match="has 1 inputs"):
        rt.infer(outs, ins * 2, model)
    with pytest.raises(errors.InvalidArgument, match="priority"):
        rt.infer(outs, ins, model, dnn.InferCtrlParam(priority=256))
    with pytest.raises(errors.InvalidArgument, match="bpuCoreId"):
        rt.infer(outs, ins, model, dnn.InferCtrlParam(bpu_core_id=3))
    # too many tasks, a timeout, a released handle, a pack whose tasks live
    Gate.opened.clear()
    tasks = [rt.infer(outs, ins, model) for _ in range(dnn.MAX_TASKS)]
    with pytest.raises(errors.TaskNumExceedLimit) as ei:
        rt.infer(outs, ins, model)
    assert ei.value.code == -6000009
    with pytest.raises(errors.TaskTimeout) as ei:
        rt.wait_task_done(tasks[0], 50)
    assert ei.value.code == -6000008
    with pytest.raises(errors.ModelIsRunning) as ei:
        rt.release(model.pack)
    assert ei.value.code == -6000013
    rt.release_task(tasks[-1])
    for call in (lambda: rt.wait_task_done(tasks[-1]), lambda: rt.release_task(tasks[-1]),
                 lambda: rt.set_task_done_callback(tasks[-1], print), lambda: rt.infer(outs, ins, model, task=tasks[-1])):
        with pytest.raises(errors.InvalidTaskHandle) as ei:
            call()
        assert ei.value.code == -6000011
    rt.infer(outs, ins, model)          # a place was freed
    Gate.opened.set()
    for t in list(rt._tasks):
        rt.wait_task_done(t, 10000)
        rt.release_task(t)


def test_a_failing_layer_fails_its_task_with_a_code(gated):
    rt, model, tensors = gated
    outs, ins = tensors(1.0)
    statuses = []
    for exc, code in ((errors.OperatorFailed("no"), -6000270), (ZeroDivisionError("bug"), -6000012)):
        Gate.fail_with = exc
        task = rt.infer(outs, ins, model)
        rt.set_task_done_callback(task, lambda t, status, ud: statuses.append(status))
        with pytest.raises(errors.VdspError) as ei:
            rt.wait_task_done(task, 10000)
        assert ei.value.code == code and task.status == code
        rt.release_task(task)
    assert statuses == [-6000270, -6000012]


def test_priority_then_custom_id_then_arrival_and_core_pinning(gated):
    rt, model, tensors = gated
    Gate.opened.clear()
    blocker = rt.infer(*tensors(-1.0), model, dnn.InferCtrlParam(bpu_core_id=dnn.BPU_CORE_0))
    threading.Event().wait(0.3)         # BPU core 0 now holds the blocker in the gate
    plan = [(1.0, 0, 5), (2.0, 0, 1), (3.0, 200, 9), (4.0, 255, 0), (5.0, 200, 2), (6.0, 0, 1)]
    tasks = [rt.infer(*tensors(v), model, dnn.InferCtrlParam(bpu_core_id=dnn.BPU_CORE_0, priority=p, custom_id=c))
             for v, p, c in plan]
    Gate.order.clear()
    Gate.opened.set()
    for t in [blocker] + tasks:
        rt.wait_task_done(t, 10000)
        assert t.layers[0].where == "BPU0"          # pinned to core 0, although core 1 was idle
        rt.release_task(t)
    assert [v for v in Gate.order if v > 0] == [4.0, 5.0, 3.0, 2.0, 6.0, 1.0]


def test_more_batches_small_inferences_under_one_handle(gated):
    rt, model, tensors = gated
    pairs = [tensors(float(i)) for i in range(5)]
    task = None
    for i, (outs, ins) in enumerate(pairs):
        task = rt.infer(outs, ins, model, dnn.InferCtrlParam(more=i < 4), task=task)
        if i < 4:
            with pytest.raises(errors.ApiUseError, match="still open"):
                rt.wait_task_done(task, 10)
    rt.wait_task_done(task, 10000)
    assert len(task.inferences) == 5 and task.status == 0
    for i, (outs, _) in enumerate(pairs):
        assert nn.read(outs[0].mem, outs[0].props)[0, 0] == float(i)
    with pytest.raises(errors.ApiUseError, match="takes no more"):
        rt.infer(*pairs[0], model, task=task)
    rt.release_task(task)
    outs, ins = pairs[0]
    task = rt.infer(outs, ins, model, dnn.InferCtrlParam(more=True))
    for _ in range(dnn.MAX_BATCH - 1):
        rt.infer(outs, ins, model, dnn.InferCtrlParam(more=True), task=task)
    with pytest.raises(errors.TaskBatchSizeExceedLimit) as ei:
        rt.infer(outs, ins, model, dnn.InferCtrlParam(more=False), task=task)
    assert ei.value.code == -6000010
    rt.release_task(task)


# --- environment variables on a live SoC -----------------------------------------------------------

def test_hb_dnn_enable_dsp_from_the_environment(soc, mobilenet):
    img = nv12_image(3)
    for value, side in (("1", "vdsp"), ("0", "ARM")):
        with dnn.Runtime(soc, environ={"HB_DNN_ENABLE_DSP": value, "HB_DNN_LOG_LEVEL": "0"}) as rt:
            _, layers = run_mobilenet(soc, rt, mobilenet[0], img)
        assert layers[1].type == "Dequantize" and layers[1].where.startswith(side)
        assert layers[2].type == "Softmax" and layers[2].where == "ARM"    # the built-in Softmax: not registered


def test_hb_dnn_profiler_log_path(soc, mobilenet, tmp_path):
    with dnn.Runtime(soc, environ={"HB_DNN_PROFILER_LOG_PATH": str(tmp_path), "HB_DNN_ENABLE_DSP": "1",
                                   "HB_DNN_PLUGIN_PATH": str(dnn.STOCK_PLUGIN_DIR)}, log_level=0) as rt:
        rt.register_layer_creator("Softmax", rt.plugin_creators()["Softmax"])
        for seed in range(3):
            run_mobilenet(soc, rt, mobilenet[0], nv12_image(seed))
        data = json.loads((tmp_path / "profiler.json").read_text())
    model = data["models"][dnn_models.MOBILENET]
    assert model["inferences"]["count"] == 3 and data["enable_dsp"] is True
    assert set(model["layers"]) == {"bpu_subgraph0", "logits", "prob"}
    prob = model["layers"]["prob"]
    assert prob["count"] == 3 and set(prob["where"]) <= {"vdsp0", "vdsp1"} and prob["dsp_avg_us"] > 0
    assert 0 < prob["min_us"] <= prob["avg_us"] <= prob["max_us"]


def test_the_log_says_where_layers_ran(soc, mobilenet):
    out = io.StringIO()
    with runtime(soc, True, log_level=3, log_stream=out) as rt:
        run_mobilenet(soc, rt, mobilenet[0], nv12_image(4))
    text = out.getvalue()
    assert "Run Quantize and Dequantize on DSP" in text and "layer Softmax has been registered." in text
    assert "layer logits (Dequantize) runs on DSP (vdsp" in text and "layer prob (Softmax) runs on DSP (vdsp" in text
    assert "ran on" not in text        # the per-inference lines are info (level 2)


# --- the sample --------------------------------------------------------------------------------------

@pytest.mark.parametrize("enable_dsp", ["1", "0"])
def test_sample_nn_mobilenet(shared_soc, monkeypatch, capfd, enable_dsp, tmp_path):
    from vdsp_sim.samples import nn as nn_samples
    monkeypatch.setenv("HB_DNN_ENABLE_DSP", enable_dsp)
    monkeypatch.setenv("VDSP_MODEL_DIR", str(tmp_path))
    monkeypatch.delenv("HB_DNN_PLUGIN_PATH", raising=False)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        assert nn_samples.main(["mobilenet"]) == 0
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    err = capfd.readouterr().err
    for phrase in ("hbDNNRegisterLayerCreator success", "hbDNNGetModelNameList success", "hbDNNGetModelHandle success",
                   "hbDNNInfer success", "task done", "TOP 0 result id: ", "TOP 4 result id: ", "check result right",
                   "its class ids mean nothing", "mobilenet finish",
                   "Run Quantize and Dequantize on " + ("DSP" if enable_dsp == "1" else "ARM")):
        assert phrase in err, phrase
    assert ("prob (Softmax) on vdsp" in err) == (enable_dsp == "1")


def test_the_softmax_sample_does_not_plant_the_j5_class_ids(shared_soc, capfd):
    """It planted 340, 292, 282, 83, 290 (the J5 log's TOP-5) into its logits."""
    from vdsp_sim.samples import nn_ops
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        assert nn_ops.main(["softmax"]) == 0
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    err = capfd.readouterr().err
    ids = [int(line.split("result id: ")[1].split()[0]) for line in err.splitlines() if "result id: " in line]
    assert len(ids) == 5 and ids != [340, 292, 282, 83, 290]

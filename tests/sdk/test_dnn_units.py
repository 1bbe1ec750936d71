"""arm_side.dnn without a SoC: the model container, tensor properties a caller may change, the
HB_DNN_* variables, plugins, the log levels and the profile file."""
from __future__ import annotations

import io
import json
import os
import struct

import numpy as np
import pytest

from protocol import errors
from arm_side import dnn, nn
from arm_side.dnn import config, container, plugin, props as tprops
from arm_side.dnn.dnnlog import DnnLog
from arm_side.dnn.profiler import Profiler
from arm_side.dnn.tasks import LayerRun
from vdsp_sim import dnn_models


@pytest.fixture(scope="module")
def head():
    return dnn_models.build_feature_head()[0]


# --- container --------------------------------------------------------------------------------------

def test_a_container_reads_back(head):
    [m] = container.unpack(head, "head")
    assert m.name == "feature_head" and m.inputs == ("feature",) and m.outputs == ("scores",)
    assert [la.type for la in m.layers] == ["Quantize", "BPU", "Dequantize"]
    fq = m.tensors["feature_q"]
    assert fq.aligned_shape == (1, 8, 6, 16) and fq.stride == (768, 96, 16, 1)     # W padded to 16 bytes
    assert m.layers[1].graph[:2] and isinstance(m.layers[1].graph, bytes)


def _manifest(data: bytes) -> dict:
    _, _, n = container.HEADER.unpack_from(data)
    return json.loads(data[container.HEADER.size:container.HEADER.size + n])


def _repack(data: bytes, manifest: dict, version: int = container.FORMAT_VERSION) -> bytes:
    _, _, n = container.HEADER.unpack_from(data)
    blobs = data[container.HEADER.size + n:]
    body = json.dumps(manifest).encode()
    return container.HEADER.pack(container.MAGIC, version, len(body)) + body + blobs


@pytest.mark.parametrize("edit, exc, words", [
    (lambda m: m["models"][0]["layers"].reverse(), errors.InvalidModel, "before any layer writes it"),
    (lambda m: m["models"][0]["tensors"]["feature_q"].update(valid_shape=[1, 8, 6, 99]), errors.InvalidModel,
     "smaller than valid_shape"),
    (lambda m: m["models"][0]["tensors"]["feature"].update(dtype="F128"), errors.InvalidModel, "dtype"),
    (lambda m: m["models"][0]["tensors"]["feature_q"].update(stride=[1, 1, 1, 1]), errors.InvalidModel,
     "does not follow"),
    (lambda m: m["models"][0].update(name="../etc"), errors.InvalidModel, "name"),
    (lambda m: m["models"][0]["layers"][1].update(graph="nope"), errors.InvalidModel, "not a blob"),
    (lambda m: m["models"][0]["layers"].append(dict(m["models"][0]["layers"][2])), errors.InvalidModel,
     "written twice"),
    (lambda m: m["blobs"]["feature_head.bpu0"].update(size=10 ** 9), errors.InvalidModel, "outside"),
    (lambda m: m["blobs"]["feature_head.bpu0"].update(sha256="0" * 64), errors.InvalidModel, "SHA-256"),
    (lambda m: m["models"].extend([dict(m["models"][0], name=f"m{i}") for i in range(40)]),
     errors.ModelNumberExceedLimit, "at most 32"),
])
def test_bad_manifests_are_refused_with_the_manuals_codes(head, edit, exc, words):
    m = _manifest(head)
    edit(m)
    with pytest.raises(exc, match=words):
        container.unpack(_repack(head, m), "edited")


def test_other_format_versions_and_garbage(head):
    with pytest.raises(errors.IncompatibleModel) as ei:
        container.unpack(_repack(head, _manifest(head), version=2), "v2")
    assert ei.value.code == -6000014
    for junk in (b"", b"VDNNMDL\0", b"not a model at all", head[:40], head[:8] + struct.pack("<II", 1, 1 << 30)):
        with pytest.raises(errors.InvalidModel) as ei:
            container.unpack(junk, "junk")
        assert ei.value.code == -6000002


def test_model_files_are_opened_without_following_symlinks(tmp_path, head):
    real = tmp_path / "m.vdnn"
    real.write_bytes(head)
    (tmp_path / "link.vdnn").symlink_to(real)
    assert container.read_file(real) == head
    with pytest.raises(errors.FileNotFound, match="symlink"):
        container.read_file(tmp_path / "link.vdnn")
    with pytest.raises(errors.FileNotFound):
        container.read_file(tmp_path / "missing.vdnn")
    with pytest.raises(errors.FileNotFound, match="not a regular file"):
        container.read_file(tmp_path)


# --- what a caller may change -------------------------------------------------------------------------

class FakeMem:
    def __init__(self, size):
        self.size = size


def test_only_the_aligned_shape_may_change():
    model = nn.aligned((1, 8, 6, 6), nn.DataType.S8, nn.Layout.NCHW, quant=nn.Quantization.scale_(0.05))
    tprops.check_given(model, model, FakeMem(model.aligned_byte_size), "input[0]")
    packed = nn.TensorProperties(model.dtype, model.layout, model.valid_shape, model.valid_shape,
                                 nn.strides_for(model.valid_shape, model.dtype), model.quant)
    tprops.check_given(model, packed, FakeMem(packed.aligned_byte_size), "input[0]")    # prepared per validShape
    cases = [
        (model.with_quant(nn.Quantization.scale_(0.1)), "quant"),
        (nn.aligned((1, 8, 6, 7), nn.DataType.S8, nn.Layout.NCHW, quant=model.quant), "valid_shape"),
        (nn.aligned((1, 8, 6, 6), nn.DataType.U8, nn.Layout.NCHW, quant=model.quant), "tensorType"),
        (nn.aligned((1, 8, 6, 6), nn.DataType.S8, nn.Layout.NHWC, quant=model.quant), "layout"),
        (nn.TensorProperties(model.dtype, model.layout, model.valid_shape, model.aligned_shape,
                             (1, 1, 1, 1), model.quant), "stride"),
    ]
    for given, word in cases:
        with pytest.raises(errors.InvalidArgument, match=word) as ei:
            tprops.check_given(model, given, FakeMem(10 ** 6), "input[0]")
        assert ei.value.code == -6000001
    with pytest.raises(errors.InvalidArgument, match="smaller than alignedByteSize"):
        tprops.check_given(model, model, FakeMem(model.aligned_byte_size - 1), "input[0]")


def test_nv12_properties():
    p = dnn.nv12(224, 224)
    assert p.valid_shape == (1, 3, 224, 224) and p.aligned_byte_size == 224 * 224 * 3 // 2
    wide = p.with_row_stride(256)
    assert wide.stride == (256 * 336, 256 * 224, 256, 1)
    tprops.check_given(p, wide, FakeMem(wide.aligned_byte_size), "input[0]")
    buf = np.arange(wide.aligned_byte_size, dtype=np.uint64).astype(np.uint8)
    assert wide.planes(buf).shape == (336, 224) and wide.planes(buf)[1, 0] == 256 % 256
    for bad in ((223, 224), (0, 4), (5000, 4)):
        with pytest.raises(errors.InvalidArgument):
            dnn.nv12(*bad)
    with pytest.raises(errors.InvalidArgument, match="tensorType"):
        tprops.check_given(p, nn.dense((1, 3, 224, 224), nn.DataType.U8, nn.Layout.NCHW), FakeMem(10 ** 6), "in")


# --- environment ----------------------------------------------------------------------------------

def test_hb_dnn_enable_dsp_and_log_level_values(tmp_path):
    assert config.Config.from_env({}).enable_dsp is False
    assert config.Config.from_env({"HB_DNN_ENABLE_DSP": "1"}).enable_dsp is True
    assert config.Config.from_env({"HB_DNN_ENABLE_DSP": "0"}, enable_dsp=True).enable_dsp is True
    assert config.Config.from_env({}).log_level == 3
    assert config.Config.from_env({"HB_DNN_LOG_LEVEL": "0"}).log_level == 0
    for name, value in (("HB_DNN_ENABLE_DSP", "yes"), ("HB_DNN_LOG_LEVEL", "9"), ("HB_DNN_LOG_LEVEL", "warning")):
        with pytest.raises(errors.InvalidArgument, match=name):
            config.Config.from_env({name: value})
    with pytest.raises(errors.FileNotFound, match="HB_DNN_PROFILER_LOG_PATH"):
        config.Config.from_env({"HB_DNN_PROFILER_LOG_PATH": str(tmp_path / "nowhere")})


def _lines(level: int) -> str:
    out = io.StringIO()
    log = DnnLog(level, out)
    log.debug("Util", "d-line")
    log.info("Util", "i-line")
    log.warning("Layer", "w-line")
    log.error("Task", "e-line")
    log.fatal("Task", "f-line")
    log.always("Util", "a-line")
    log.close()
    return out.getvalue()


@pytest.mark.parametrize("level, shown", [
    (0, []), (1, ["d", "i", "w", "e", "f", "a"]), (2, ["i", "w", "e", "f", "a"]), (3, ["w", "e", "f", "a"]),
    (4, ["e", "f", "a"]), (5, ["f", "a"]),
])
def test_hb_dnn_log_level_rules(level, shown):
    """A line shows when its level >= HB_DNN_LOG_LEVEL; 0 shows nothing, not even the A lines."""
    text = _lines(level)
    assert [k for k in "diwefa" if f"{k}-line" in text] == shown
    if "w" in shown:
        assert "[W][DNN][test_dnn_units.py:" in text and "][Layer](" in text
    if "f" in shown:
        assert "[F][DNN]" in text and "[A][DNN]" in text


def test_the_log_level_reaches_the_runtime(capfd):
    with dnn.Runtime(None, environ={"HB_DNN_LOG_LEVEL": "4"}) as rt:
        rt.register_layer_creator("Softmax", dnn.Softmax)      # a warning: hidden at 4
    err = capfd.readouterr().err
    assert "Run Quantize and Dequantize on ARM" in err and "has been registered" not in err
    with dnn.Runtime(None, environ={"HB_DNN_LOG_LEVEL": "0"}) as rt:
        rt.register_layer_creator("Softmax", dnn.Softmax)
    assert capfd.readouterr().err == ""
    with dnn.Runtime(None, environ={}) as rt:                    # default 3: warnings show
        rt.register_layer_creator("Softmax", dnn.Softmax)
    assert "[W][DNN]" in capfd.readouterr().err


# --- plugins (HB_DNN_PLUGIN_PATH) ---------------------------------------------------------------------

PLUGIN = '''
from arm_side.dnn import Layer
class Twice(Layer):
    def forward(self, ctx, inputs, outputs):
        ctx.write(outputs[0], ctx.read(inputs[0]) * 2)
LAYER_CREATORS = {"Twice": Twice}
'''


def test_plugins_come_from_hb_dnn_plugin_path(tmp_path):
    (tmp_path / "twice.py").write_text(PLUGIN)
    (tmp_path / "_private.py").write_text("raise SystemExit")      # skipped
    with dnn.Runtime(None, environ={"HB_DNN_PLUGIN_PATH": str(tmp_path)}, log_level=0) as rt:
        assert sorted(rt.plugin_creators()) == ["Twice"]
    with dnn.Runtime(None, environ={}, log_level=0) as rt:
        assert rt.plugin_creators() == {}
    stock = plugin.load(dnn.STOCK_PLUGIN_DIR)
    assert list(stock) == ["hb_dsp_nn_plugin"] and "Softmax" in stock["hb_dsp_nn_plugin"]


def test_bad_plugins_are_refused(tmp_path):
    (tmp_path / "real.py").write_text(PLUGIN)
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    with pytest.raises(errors.FileNotFound, match="symlink"):
        plugin.load(link)
    with pytest.raises(errors.FileNotFound):
        dnn.Runtime(None, environ={"HB_DNN_PLUGIN_PATH": str(tmp_path / "missing")})
    files = tmp_path / "files"
    files.mkdir()
    (files / "a.py").symlink_to(tmp_path / "real.py")
    with pytest.raises(errors.FileNotFound, match="symlink"):
        plugin.load(files)
    (files / "a.py").unlink()
    (files / "b.py").write_text("LAYER_CREATORS = 'Softmax'")
    with pytest.raises(errors.InvalidArgument, match="LAYER_CREATORS"):
        plugin.load(files)
    (files / "b.py").write_text("import no_such_module_here")
    with pytest.raises(errors.InvalidArgument, match="failed to load"):
        plugin.load(files)
    (files / "b.py").write_text("#" * (plugin.MAX_PLUGIN_BYTES + 1))
    with pytest.raises(errors.InvalidArgument, match="bytes"):
        plugin.load(files)


# --- layer creators --------------------------------------------------------------------------------

def test_layer_creator_register_and_unregister(capfd):
    with dnn.Runtime(None, log_level=3) as rt:
        rt.register_layer_creator("MyLayer", dnn.Softmax)
        assert "has been registered" not in capfd.readouterr().err
        rt.register_layer_creator("Softmax", dnn.Softmax)
        assert "layer Softmax has been registered." in capfd.readouterr().err
        rt.unregister_layer_creator("MyLayer")
        rt.unregister_layer_creator("Softmax")      # back to the built-in one
        for bad, word in (("MyLayer", "no layer creator"), ("Quantize", "built-in"), ("BPU", "BPU"), ("", "1..64")):
            with pytest.raises(errors.InvalidArgument, match=word):
                rt.unregister_layer_creator(bad)
        with pytest.raises(errors.InvalidArgument, match="callable"):
            rt.register_layer_creator("X", "not a function")


# --- profile (HB_DNN_PROFILER_LOG_PATH) ---------------------------------------------------------------

def test_profile_json(tmp_path):
    prof = Profiler(tmp_path, {"runtime": "x"})
    prof.record("m", 1000.0, [LayerRun("prob", "Softmax", "vdsp0", 400.0, 380.0, 100)])
    prof.record("m", 3000.0, [LayerRun("prob", "Softmax", "vdsp1", 600.0, 580.0, 120)])
    data = json.loads(prof.write().read_text())
    layer = data["models"]["m"]["layers"]["prob"]
    assert layer == {"type": "Softmax", "where": {"vdsp0": 1, "vdsp1": 1}, "count": 2, "avg_us": 500.0,
                     "min_us": 400.0, "max_us": 600.0, "rpc_avg_us": 480.0, "dsp_avg_us": 110.0}
    assert data["models"]["m"]["inferences"]["avg_us"] == 2000.0
    assert oct(os.stat(tmp_path / "profiler.json").st_mode & 0o777) == "0o600"

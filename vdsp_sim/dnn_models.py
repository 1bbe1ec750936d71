"""The models of the NN samples and tests, built with seeded weights (``python -m vdsp_sim.dnn_models``,
run by scripts/venv.sh at install time; built on first use when missing).

No package this project can depend on ships a pretrained image classifier inside its wheel
(docs/dnn.md says what was looked at), so the classifier here has **seeded random weights:
its class ids mean nothing**. What can be checked is checked instead: a model run with its
non-BPU layers on the DSP, the same run on the ARM side, and the whole model as one ONNX graph
on onnxruntime alone must agree.

* ``mobilenetv1_224x224_nv12``: NV12 224x224 input; the BPU converts it to YUV444, subtracts
  128, scales by 1/128, runs a small MobileNet-v1-shaped network (a 3x3 convolution, four
  depthwise-separable blocks, global average pooling, a 1x1 convolution to 1000 classes) and
  writes S32 logits with one scale per class ([1, 1000, 1, 1], W padded to 16 bytes); then
  Dequantize and Softmax (axis 1), the layers the BPU does not run.
* ``feature_head`` (tests): F32 [1, 8, 6, 6] -> Quantize (S8, W padded) -> BPU (3x3 conv, max
  pool) -> S16 [1, 10, 3, 3] -> Dequantize -> F32; with ``user_layer`` a last layer of type
  ``NchwToNhwc`` (registered by the test) makes it NHWC.

Each model file comes with ``NAME.onnx``: the whole model as one graph, for the checks.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Callable
from pathlib import Path

import numpy as np

from arm_side import nn
from arm_side.dnn import container, props as tprops
from vdsp_board.config import settings

BUILDER = "vdsp_sim.dnn_models 1"
OPSET = 17
MOBILENET = "mobilenetv1_224x224_nv12"
FEATURE_HEAD = "feature_head"
DEFAULT_DIR = Path(__file__).resolve().parent / "models"
SEED = 20240204


def _onnx():
    """onnx and what the builders use of it, imported when a model is built, not when this module
    is (1.3 s of CPU on the 2-CPU VM, which every process that only finds the built files paid)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    return onnx, TensorProto, helper, numpy_helper


def model_dir() -> Path:
    """``$VDSP_MODEL_DIR``, else ``vdsp_sim/models`` next to this file."""
    return settings.current().model_dir or Path(DEFAULT_DIR)


class _Graph:
    """A small builder of ONNX nodes with seeded initialisers."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.n = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, value: np.ndarray | np.generic, base: str = "c") -> str:
        _, _, _, numpy_helper = _onnx()
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op: str, inputs: list, base: str | None = None, **attrs) -> str:
        _, _, helper, _ = _onnx()
        out = self.name(base or op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1, relu: bool = True) -> str:
        fan_in = cin // group * k * k
        w = (self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.1).astype(np.float32)
        y = self.op("Conv", [x, self.const(w, "w"), self.const(b, "b")], kernel_shape=[k, k],
                    strides=[stride, stride], pads=[k // 2] * 4, group=group)
        return self.op("Relu", [y]) if relu else y

    def quantize_int(self, x: str, scale: np.ndarray | np.generic, dtype, lo: int, hi: int) -> str:
        """x / scale, rounded (half to even, as the BPU's own rounding), clipped, cast."""
        v = self.op("Round", [self.op("Div", [x, self.const(scale.astype(np.float32), "scale")])])
        v = self.op("Clip", [v, self.const(np.float32(lo)), self.const(np.float32(hi))])
        return self.op("Cast", [v], to=dtype)

    def model(self, inputs: list, outputs: list, last: str, out_name: str) -> bytes:
        onnx, _, helper, _ = _onnx()
        self.nodes.append(helper.make_node("Identity", [last], [out_name]))
        graph = helper.make_graph(self.nodes, "g", inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name=BUILDER)
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m.SerializeToString()


# --- mobilenetv1_224x224_nv12 ------------------------------------------------------------------------

def _mobilenet_body(g: _Graph, h: int = 224, w: int = 224) -> str:
    """NV12 uint8 [1, h*3/2, w] 'data' -> float logits [1, 1000, 1, 1]."""
    _, TensorProto, _, _ = _onnx()
    y = g.op("Slice", ["data", g.const(np.array([0, 0, 0])), g.const(np.array([1, h, w]))])
    y = g.op("Unsqueeze", [g.op("Cast", [y], to=TensorProto.FLOAT), g.const(np.array([1]))])
    uv = g.op("Slice", ["data", g.const(np.array([0, h, 0])), g.const(np.array([1, h * 3 // 2, w]))])
    uv = g.op("Reshape", [uv, g.const(np.array([1, h // 2, w // 2, 2]))])
    uv = g.op("Cast", [g.op("Transpose", [uv], perm=[0, 3, 1, 2])], to=TensorProto.FLOAT)
    uv = g.op("Resize", [uv, "", g.const(np.array([1, 1, 2, 2], dtype=np.float32))], mode="nearest")
    x = g.op("Concat", [y, uv], axis=1)                                   # YUV444
    x = g.op("Mul", [g.op("Sub", [x, g.const(np.float32(128))]), g.const(np.float32(1 / 128))])
    x = g.conv(x, 3, 16, 3, stride=2)                                     # 112
    for cin, cout in ((16, 32), (32, 64), (64, 128), (128, 256)):         # 56, 28, 14, 7
        x = g.conv(x, cin, cin, 3, stride=2, group=cin)
        x = g.conv(x, cin, cout, 1)
    x = g.op("GlobalAveragePool", [x])
    return g.conv(x, 256, 1000, 1, relu=False)


def _mobilenet_scales(seed: int) -> np.ndarray:
    """One scale per class: the largest |logit| over a few calibration images / 2**15."""
    _, TensorProto, helper, _ = _onnx()
    g = _Graph(seed)
    logits = _mobilenet_body(g)
    data = helper.make_tensor_value_info("data", TensorProto.UINT8, [1, 336, 224])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000, 1, 1])
    from arm_side.dnn.ortload import onnxruntime as ort
    sess = ort.InferenceSession(g.model([data], [out], logits, "logits"), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed + 1)
    peak = np.zeros(1000)
    for _ in range(4):
        img = rng.integers(0, 256, (1, 336, 224), dtype=np.uint8)
        peak = np.maximum(peak, np.abs(sess.run(None, {"data": img})[0].reshape(1000)))
    return (np.maximum(peak, 1e-3) * 1.5 / 2 ** 15).astype(np.float32)


def build_mobilenet(seed: int = SEED) -> tuple[bytes, bytes]:
    """(container bytes, whole-model ONNX bytes)."""
    _, TensorProto, helper, _ = _onnx()
    scales = _mobilenet_scales(seed)
    data = helper.make_tensor_value_info("data", TensorProto.UINT8, [1, 336, 224])
    q = nn.Quantization.scale_(scales, 0, axis=1)
    logits_q = nn.aligned((1, 1000, 1, 1), nn.DataType.S32, nn.Layout.NCHW, quant=q)
    logits = nn.dense((1, 1000, 1, 1), nn.DataType.F32, nn.Layout.NCHW)
    prob = nn.dense((1, 1000, 1, 1), nn.DataType.F32, nn.Layout.NCHW)
    g = _Graph(seed)
    qv = g.quantize_int(_mobilenet_body(g), scales.reshape(1, 1000, 1, 1), TensorProto.INT32, -(1 << 31), (1 << 31) - 1)
    bpu = g.model([data], [helper.make_tensor_value_info("logits_q", TensorProto.INT32, [1, 1000, 1, 1])],
                  qv, "logits_q")
    # The whole model: the same graph, then dequantize and softmax in float32.
    w = _Graph(seed)
    wq = w.quantize_int(_mobilenet_body(w), scales.reshape(1, 1000, 1, 1), TensorProto.INT32, -(1 << 31),
                        (1 << 31) - 1)
    f = w.op("Mul", [w.op("Cast", [wq], to=TensorProto.FLOAT), w.const(scales.reshape(1, 1000, 1, 1))])
    whole = w.model([data], [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 1000, 1, 1])],
                    w.op("Softmax", [f], axis=1), "prob")
    manifest = {
        "name": MOBILENET, "inputs": ["data"], "outputs": ["prob"],
        "tensors": {"data": tprops.nv12(224, 224), "logits_q": logits_q, "logits": logits, "prob": prob},
        "layers": [
            {"name": "bpu_subgraph0", "type": "BPU", "graph": f"{MOBILENET}.bpu0", "inputs": ["data"],
             "outputs": ["logits_q"]},
            {"name": "logits", "type": "Dequantize", "inputs": ["logits_q"], "outputs": ["logits"]},
            {"name": "prob", "type": "Softmax", "inputs": ["logits"], "outputs": ["prob"], "attrs": {"axis": 1}},
        ],
        "builder": BUILDER,
    }
    return container.pack([manifest], {f"{MOBILENET}.bpu0": bpu}), whole


# --- feature_head (tests) -------------------------------------------------------------------------------

FEATURE_SHAPE, SCORES_SHAPE = (1, 8, 6, 6), (1, 10, 3, 3)
FEATURE_SCALE, SCORES_SCALE = 0.05, 0.002


def build_feature_head(user_layer: bool = False, seed: int = SEED + 7) -> tuple[bytes, bytes]:
    """(container bytes, whole-model ONNX bytes); see the module docstring."""
    _, TensorProto, helper, _ = _onnx()
    fq = nn.aligned(FEATURE_SHAPE, nn.DataType.S8, nn.Layout.NCHW, quant=nn.Quantization.scale_(FEATURE_SCALE))
    sq = nn.aligned(SCORES_SHAPE, nn.DataType.S16, nn.Layout.NCHW, quant=nn.Quantization.scale_(SCORES_SCALE))

    def body(g: _Graph, x: str) -> str:
        x = g.op("Mul", [g.op("Cast", [x], to=TensorProto.FLOAT), g.const(np.float32(FEATURE_SCALE))])
        x = g.conv(x, 8, 10, 3)
        x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
        return g.quantize_int(x, np.float32(SCORES_SCALE), TensorProto.INT16, -32768, 32767)

    g = _Graph(seed)
    bpu = g.model([helper.make_tensor_value_info("feature_q", TensorProto.INT8, list(FEATURE_SHAPE))],
                  [helper.make_tensor_value_info("scores_q", TensorProto.INT16, list(SCORES_SHAPE))],
                  body(g, "feature_q"), "scores_q")
    w = _Graph(seed)
    xq = w.op("QuantizeLinear", ["feature", w.const(np.float32(FEATURE_SCALE)), w.const(np.int8(0))])
    out = w.op("Mul", [w.op("Cast", [body(w, xq)], to=TensorProto.FLOAT), w.const(np.float32(SCORES_SCALE))])
    out_shape = list(SCORES_SHAPE)
    if user_layer:
        out = w.op("Transpose", [out], perm=[0, 2, 3, 1])
        out_shape = [1, 3, 3, 10]
    whole = w.model([helper.make_tensor_value_info("feature", TensorProto.FLOAT, list(FEATURE_SHAPE))],
                    [helper.make_tensor_value_info("out", TensorProto.FLOAT, out_shape)], out, "out")
    tensors = {"feature": nn.dense(FEATURE_SHAPE, nn.DataType.F32, nn.Layout.NCHW), "feature_q": fq,
               "scores_q": sq, "scores": nn.dense(SCORES_SHAPE, nn.DataType.F32, nn.Layout.NCHW)}
    layers = [
        {"name": "feature_quantize", "type": "Quantize", "inputs": ["feature"], "outputs": ["feature_q"]},
        {"name": "bpu_subgraph0", "type": "BPU", "graph": "feature_head.bpu0", "inputs": ["feature_q"],
         "outputs": ["scores_q"]},
        {"name": "scores", "type": "Dequantize", "inputs": ["scores_q"], "outputs": ["scores"]},
    ]
    output = "scores"
    if user_layer:
        tensors["scores_nhwc"] = nn.dense((1, 3, 3, 10), nn.DataType.F32, nn.Layout.NHWC)
        layers.append({"name": "to_nhwc", "type": "NchwToNhwc", "inputs": ["scores"], "outputs": ["scores_nhwc"]})
        output = "scores_nhwc"
    name = FEATURE_HEAD + ("_nhwc" if user_layer else "")
    manifest = {"name": name, "inputs": ["feature"], "outputs": [output], "tensors": tensors, "layers": layers,
                "builder": BUILDER}
    return container.pack([manifest], {"feature_head.bpu0": bpu}), whole


# --- files --------------------------------------------------------------------------------------------

BUILDERS: dict[str, Callable[[], tuple[bytes, bytes]]] = {MOBILENET: build_mobilenet, FEATURE_HEAD: build_feature_head}


def _current(path: Path) -> bool:
    try:
        data = path.read_bytes()
        _, _, mlen = container.HEADER.unpack_from(data)
        manifest = json.loads(data[container.HEADER.size:container.HEADER.size + mlen])
        return all(m.get("builder") == BUILDER for m in manifest["models"])
    except (OSError, ValueError, KeyError, TypeError, Exception):
        return False


def paths(name: str, directory: Path | None = None) -> tuple[Path, Path]:
    d = directory or model_dir()
    return d / f"{name}.vdnn", d / f"{name}.onnx"


def ensure(name: str = MOBILENET, directory: Path | None = None) -> tuple[Path, Path]:
    """(container path, whole-model ONNX path) of ``name``, built when missing or out of date."""
    model, whole = paths(name, directory)
    if not (_current(model) and whole.exists()):
        model.parent.mkdir(parents=True, exist_ok=True)
        data, onnx_bytes = BUILDERS[name]()
        tmp = whole.with_name(f".{whole.name}.{os.getpid()}.tmp")
        tmp.write_bytes(onnx_bytes)
        os.replace(tmp, whole)
        tmp = model.with_name(f".{model.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, model)
    return model, whole


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vdsp_sim.dnn_models",
                                 description="Build the seeded models of the NN samples (their class ids mean "
                                             "nothing) into $VDSP_MODEL_DIR or vdsp_sim/models.")
    ap.add_argument("--dir", type=Path, help="where to write them (default: %(default)s)", default=None)
    args = ap.parse_args(argv)
    for name in BUILDERS:
        model, whole = ensure(name, args.dir)
        print(f"{name}: {model} ({model.stat().st_size} bytes), whole model {whole.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

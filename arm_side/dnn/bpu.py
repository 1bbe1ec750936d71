"""The BPU of the simulated SoC: a model's BPU subgraphs run in the ARM process on onnxruntime.

A BPU layer reads its input tensors from DDR and writes its outputs to DDR, as a device
does: through the tensors' strides (padding is neither read nor written) and past the CPU
cache of cached memory (``Mem.ddr_array``), so an input the CPU wrote without CLEAN is seen
stale, as on the board, and an output must be INVALIDATEd before the CPU reads it.

The ONNX graph of a BPU layer has one input per layer input and one output per layer output,
named like the tensors: an NV12 image tensor is a uint8 input of shape [1, H·3/2, W] (the Y
rows, then the interleaved UV rows); a feature map has its valid shape and element type.
"""
from __future__ import annotations

import numpy as np
from arm_side.dnn.ortload import onnxruntime as ort

from protocol import errors
from arm_side.dnn.props import ImageProperties

_ORT_TYPES = {np.dtype(np.int8): "tensor(int8)", np.dtype(np.uint8): "tensor(uint8)",
              np.dtype(np.int16): "tensor(int16)", np.dtype(np.uint16): "tensor(uint16)",
              np.dtype(np.int32): "tensor(int32)", np.dtype(np.uint32): "tensor(uint32)",
              np.dtype(np.int64): "tensor(int64)", np.dtype(np.uint64): "tensor(uint64)",
              np.dtype(np.float16): "tensor(float16)", np.dtype(np.float32): "tensor(float)",
              np.dtype(np.float64): "tensor(double)"}


def onnx_signature(props) -> tuple[str, tuple]:
    """(ONNX element type, shape) a graph uses for a tensor with these properties."""
    if isinstance(props, ImageProperties):
        return "tensor(uint8)", (1, props.height * 3 // 2, props.width)
    return _ORT_TYPES[props.np_dtype], tuple(props.valid_shape)


def session_options() -> ort.SessionOptions:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1       # one BPU core = one thread; the SoC has two
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return opts


class BpuGraph:
    """One BPU subgraph. ``run`` is safe from several threads (one per BPU core)."""

    def __init__(self, name: str, graph: bytes, inputs: dict, outputs: dict) -> None:
        """``inputs``/``outputs``: tensor name -> properties, in the layer's order.
        Raises InvalidModel when onnxruntime refuses the graph or its signature differs."""
        self.name, self.inputs, self.outputs = name, dict(inputs), dict(outputs)
        try:
            self.session = ort.InferenceSession(graph, sess_options=session_options(),
                                                providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise errors.InvalidModel(f"BPU layer {name}: onnxruntime cannot load its graph: {exc}") from None
        for kind, declared, actual in (("input", self.inputs, self.session.get_inputs()),
                                       ("output", self.outputs, self.session.get_outputs())):
            if [a.name for a in actual] != list(declared):
                raise errors.InvalidModel(f"BPU layer {name}: graph {kind}s {[a.name for a in actual]} differ from "
                                          f"the layer's {list(declared)}")
            for a in actual:
                etype, shape = onnx_signature(declared[a.name])
                if a.type != etype or tuple(a.shape) != shape:
                    raise errors.InvalidModel(f"BPU layer {name}: graph {kind} {a.name} is {a.type} {a.shape}, "
                                              f"the tensor needs {etype} {list(shape)}")

    def run(self, memory, inputs: list, outputs: list) -> None:
        """Read ``inputs`` (nn.Tensor) from DDR, run, write ``outputs`` to DDR."""
        feeds = {}
        for name, t in zip(self.inputs, inputs):
            ddr = t.mem.ddr_array()
            feeds[name] = (t.props.planes(ddr)[None] if isinstance(t.props, ImageProperties)
                           else t.props.view(ddr)).copy()
        results = self.session.run(list(self.outputs), feeds)
        for t, value in zip(outputs, results):
            t.props.view(t.mem.ddr_array())[...] = value
            memory.mark_device_written(t.mem)

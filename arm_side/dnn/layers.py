"""Layers the BPU does not run, and the creators that make them (hbDNNRegisterLayerCreator).

A layer creator is a callable without arguments that returns a :class:`Layer` (like
``hbDNNLayerCreator``). When a model is loaded, each of its non-BPU layers is made by the
creator registered for its type and initialised with its attributes and tensor properties;
each inference then calls ``forward(ctx, inputs, outputs)`` with ``nn.Tensor`` s in shared
memory. A layer runs on a DSP core by submitting RPCs through ``ctx`` (``ctx.wait(nn.softmax(
ctx.soc, src, dst, **ctx.rpc_args))``) and on the ARM side by reading and writing the tensors
(``ctx.read`` / ``ctx.write``, which INVALIDATE and CLEAN cached memory); ``ctx.dsp_enabled``
says what ``HB_DNN_ENABLE_DSP`` asks for. Where each layer ran is recorded from what it did.

Built in (``BUILTIN``): Quantize and Dequantize (on vdsp0/vdsp1 when the DSP is enabled, else
on the ARM side) and the runtime's own Softmax (ARM side). Registering a creator for a type
that has one (built in or registered) replaces it, with a warning; unregistering returns to
the built-in layer, if any.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from protocol import errors
from protocol.task_options import TaskOptions
from arm_side import nn
from arm_side.nn import reference as ref
from arm_side.nn.dtypes import QuantiType

MAX_CREATORS = 256
RESERVED = ("BPU",)


class Layer:
    """hobot::dnn::Layer. Subclasses override :meth:`forward` and, if they check their
    configuration, :meth:`init`."""

    def init(self, attrs: dict, inputs: list, outputs: list) -> None:
        """Called once at model load with the layer's attributes and the properties of its
        input and output tensors. Raise InvalidModel (or InvalidArgument) to refuse them."""

    def forward(self, ctx: "LayerContext", inputs: list, outputs: list) -> None:
        """Compute ``outputs`` (nn.Tensor) from ``inputs``. Raise a protocol.errors error to fail the task."""
        raise NotImplementedError


class RpcRecord:
    """One RPC a layer made: the core that ran it, wall time from submit to done, DSP time."""
    __slots__ = ("core", "wall_us", "exec_us")

    def __init__(self, core: str, wall_us: float, exec_us: int) -> None:
        self.core, self.wall_us, self.exec_us = core, wall_us, exec_us


class LayerContext:
    """What a layer sees during one inference."""

    def __init__(self, soc, dsp_enabled: bool, priority: int, custom_id: int, timeout_ms: float) -> None:
        self.soc = soc
        self.dsp_enabled = dsp_enabled
        self.options = TaskOptions(priority=priority, custom_id=custom_id, timeout_ms=timeout_ms)
        self.rpc_args = {"options": self.options}
        self.timeout_ms = timeout_ms
        self.records: list[RpcRecord] = []

    def wait(self, task) -> dict:
        """Wait for an RPC task the layer submitted; records where and how long it ran.
        Raises the task's error."""
        values = task.wait(self.timeout_ms)
        self.records.append(RpcRecord(task.core, task.latency_us, task.exec_us))
        return values

    def rpc(self, cmd: int, inputs=(), outputs=(), params: dict | None = None) -> dict:
        """Submit operator ``cmd`` with this inference's priority and customId, and wait."""
        t0 = time.perf_counter()
        task = self.soc.rpc(cmd, inputs, outputs, params, options=self.options)
        values = task.wait(self.timeout_ms)
        self.records.append(RpcRecord(task.core, task.latency_us or (time.perf_counter() - t0) * 1e6,
                                      task.exec_us))
        return values

    @staticmethod
    def read(tensor: nn.Tensor) -> np.ndarray:
        """The valid elements, as the CPU sees them after INVALIDATE."""
        return nn.read(tensor.mem, tensor.props)

    @staticmethod
    def write(tensor: nn.Tensor, array: np.ndarray) -> None:
        """Store ``array`` through the strides and CLEAN (cached memory)."""
        nn.write(tensor.mem, tensor.props, np.asarray(array, dtype=tensor.props.np_dtype))


def _one_to_one(name: str, inputs: list, outputs: list) -> None:
    if len(inputs) != 1 or len(outputs) != 1:
        raise errors.InvalidModel(f"{name} takes one input and one output tensor")
    if not isinstance(inputs[0], nn.TensorProperties) or not isinstance(outputs[0], nn.TensorProperties):
        raise errors.InvalidModel(f"{name} works on feature-map tensors, not images")
    if inputs[0].valid_shape != outputs[0].valid_shape:
        raise errors.InvalidModel(f"{name}: input shape {inputs[0].valid_shape} differs from output shape "
                                  f"{outputs[0].valid_shape}")


_FLOAT = (nn.DataType.F16, nn.DataType.F32, nn.DataType.F64)
_QUANT = (nn.DataType.S8, nn.DataType.U8, nn.DataType.S16, nn.DataType.U16, nn.DataType.S32)


class Quantize(Layer):
    """float tensor -> integer tensor with the output's SCALE/SHIFT quantisation."""

    def init(self, attrs, inputs, outputs):
        _one_to_one("Quantize", inputs, outputs)
        if inputs[0].dtype not in _FLOAT or outputs[0].dtype not in _QUANT or \
                outputs[0].quant.type == QuantiType.NONE:
            raise errors.InvalidModel("Quantize goes from a float tensor to a quantised integer tensor")

    def forward(self, ctx, inputs, outputs):
        src, dst = inputs[0], outputs[0]
        if ctx.dsp_enabled:
            ctx.wait(nn.quantize(ctx.soc, src, dst, **ctx.rpc_args))
        else:
            ctx.write(dst, ref.quantize(ctx.read(src), dst.props.quant, dst.props.np_dtype))


class Dequantize(Layer):
    """quantised integer tensor -> float tensor."""

    def init(self, attrs, inputs, outputs):
        _one_to_one("Dequantize", inputs, outputs)
        if inputs[0].dtype not in _QUANT or inputs[0].quant.type == QuantiType.NONE or outputs[0].dtype not in _FLOAT:
            raise errors.InvalidModel("Dequantize goes from a quantised integer tensor to a float tensor")

    def forward(self, ctx, inputs, outputs):
        src, dst = inputs[0], outputs[0]
        if ctx.dsp_enabled:
            ctx.wait(nn.dequantize(ctx.soc, src, dst, **ctx.rpc_args))
        else:
            ctx.write(dst, ref.dequantize(ctx.read(src), src.props.quant, dst.props.np_dtype))


class Softmax(Layer):
    """The runtime's own Softmax, on the ARM side; attribute ``axis`` (default -1)."""
    axis = -1

    def init(self, attrs, inputs, outputs):
        _one_to_one("Softmax", inputs, outputs)
        axis = attrs.get("axis", -1)
        ndim = len(inputs[0].valid_shape)
        if not isinstance(axis, int) or isinstance(axis, bool) or not -ndim <= axis < ndim:
            raise errors.InvalidModel(f"Softmax: attribute axis must be in {-ndim}..{ndim - 1}, got {axis!r}")
        if outputs[0].dtype not in (nn.DataType.F32, nn.DataType.F64):
            raise errors.InvalidModel("Softmax writes an F32 or F64 tensor")
        self.axis = axis

    def arm(self, ctx, src, dst) -> None:
        x = ctx.read(src)
        if src.props.quant.type != QuantiType.NONE:
            x = ref.dequantize(x, src.props.quant, np.float32)
        ctx.write(dst, ref.softmax(x, self.axis))

    def forward(self, ctx, inputs, outputs):
        self.arm(ctx, inputs[0], outputs[0])


BUILTIN: dict[str, Callable[[], Layer]] = {"Quantize": Quantize, "Dequantize": Dequantize, "Softmax": Softmax}


class Creators:
    """The layer creators of one runtime: built in, then registered ones on top."""

    def __init__(self, log) -> None:
        self.log = log
        self._registered: dict[str, Callable[[], Layer]] = {}

    def register(self, layer_type: str, creator: Callable[[], Layer]) -> None:
        """hbDNNRegisterLayerCreator. Raises InvalidArgument (bad type name, reserved type,
        not callable, too many)."""
        _check_type(layer_type)
        if not callable(creator):
            raise errors.InvalidArgument(f"layer creator for {layer_type} must be callable, "
                                         f"got {type(creator).__name__}")
        if layer_type in self._registered or layer_type in BUILTIN:
            self.log.warning("Layer", "layer %s has been registered.", layer_type)
        elif len(self._registered) >= MAX_CREATORS:
            raise errors.InvalidArgument(f"at most {MAX_CREATORS} layer creators may be registered")
        self._registered[layer_type] = creator

    def unregister(self, layer_type: str) -> None:
        """hbDNNUnregisterLayerCreator. Raises InvalidArgument if ``layer_type`` was not registered."""
        _check_type(layer_type)
        if layer_type not in self._registered:
            raise errors.InvalidArgument(f"no layer creator is registered for {layer_type}"
                                         + (" (its built-in layer cannot be unregistered)"
                                            if layer_type in BUILTIN else ""))
        del self._registered[layer_type]

    def source(self, layer_type: str) -> str:
        return "registered" if layer_type in self._registered else "built in" if layer_type in BUILTIN else ""

    def make(self, layer_type: str, name: str, attrs: dict, inputs: list, outputs: list) -> Layer:
        """A layer of ``layer_type``, initialised. Raises InvalidModel."""
        creator = self._registered.get(layer_type) or BUILTIN.get(layer_type)
        if creator is None:
            raise errors.InvalidModel(f"layer {name}: no layer creator is registered for type {layer_type} "
                                      "(register_layer_creator)")
        try:
            layer = creator()
        except errors.VdspError:
            raise
        except Exception as exc:
            raise errors.InvalidModel(f"layer {name}: the creator of {layer_type} raised "
                                      f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(layer, Layer):
            raise errors.InvalidModel(f"layer {name}: the creator of {layer_type} returned "
                                      f"{type(layer).__name__}, not a Layer")
        try:
            layer.init(dict(attrs), list(inputs), list(outputs))
        except errors.VdspError:
            raise
        except Exception as exc:
            raise errors.InvalidModel(f"layer {name} ({layer_type}): init raised {type(exc).__name__}: {exc}") from exc
        return layer


def _check_type(layer_type) -> None:
    if not isinstance(layer_type, str) or not 1 <= len(layer_type) <= 64 or not layer_type.isprintable():
        raise errors.InvalidArgument(f"layer type must be 1..64 printable characters, got {str(layer_type)[:60]!r}")
    if layer_type in RESERVED:
        raise errors.InvalidArgument(f"layer type {layer_type} is the BPU's own; it cannot be registered")

"""Typed ARM API of the NN operators: one function per operator, returning the Task.

Each calls the operator's generated stub (``arm_side.stubs.nn``, from ``protocol.contract.nn_ops``),
adding only ARM knowledge: the tensor descriptors come from the Tensors.

A :class:`Tensor` pairs memory with its properties, like hbDNNTensor. ``options`` (a
``TaskOptions``) or its fields as keywords (``core``, ``priority``, ``custom_id``, ``timeout_ms``)
go to the stub and on to ``Soc.rpc`` / ``AsyncSoc.rpc``.
Bad descriptors are refused by the firmware with InvalidArgument (-6000001) when the task is
waited for.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from arm_side.memory import Mem
from arm_side.stubs import nn as stubs
from arm_side.nn.tensor import TensorProperties


@dataclasses.dataclass(frozen=True)
class Tensor:
    """hbDNNTensor: ``mem`` (a Mem or a raw ``(phys_addr, size)`` handle) and its properties."""
    mem: Any
    props: TensorProperties

    @property
    def handle(self):
        return self.mem if isinstance(self.mem, Mem) else tuple(self.mem)


def _io(src: Tensor, dst: Tensor) -> dict:
    return {"input": src.props.to_wire(), "output": dst.props.to_wire()}


def _submit(stub: Callable[..., Any], soc, src: Tensor, dst: Tensor, params: dict, rpc: dict):
    """``stub`` on the tensors' buffers; ``rpc``: the task's options (``options=``, its fields)."""
    return stub(soc, src.handle, dst.handle, **params, **rpc)


def quantize(soc, src: Tensor, dst: Tensor, **rpc):
    """Float ``src`` -> integer ``dst`` with ``dst.props.quant`` (SCALE or SHIFT). A padded ``dst``
    (see ``tensor.aligned``) makes this the BPU feature-map padding fused with quantisation."""
    return _submit(stubs.quantize, soc, src, dst, _io(src, dst), rpc)


def dequantize(soc, src: Tensor, dst: Tensor, **rpc):
    """Integer ``src`` with ``src.props.quant`` -> float ``dst``."""
    return _submit(stubs.dequantize, soc, src, dst, _io(src, dst), rpc)


def softmax(soc, src: Tensor, dst: Tensor, axis: int = -1, **rpc):
    """Softmax along ``axis``; a quantised ``src`` is dequantised first. ``dst`` is F32 or F64."""
    return _submit(stubs.softmax, soc, src, dst, {**_io(src, dst), "axis": int(axis)}, rpc)


def convert_layout(soc, src: Tensor, dst: Tensor, channels: int = -1, platform: str = "", **rpc):
    """NCHW / NHWC / NC1HWC2 conversion (or a repack between strides of one layout).
    ``channels`` is needed only between two NC1HWC2 tensors; ``platform`` makes the
    firmware check C2 against its table."""
    # platform: checked against the declared choices by the firmware (InvalidArgument)
    return _submit(stubs.layout, soc, src, dst,
                   {**_io(src, dst), "channels": int(channels), "platform": platform}, rpc)

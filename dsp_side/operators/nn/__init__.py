"""NN operators (command ids 0x0400-0x05ff): quantize, dequantize, softmax, layout
conversion, Yolov3DetectionOutput and its small-operator chain.

Tensors travel as descriptors (``tensor.parse``) in the params; data stays in DDR.
"""
from __future__ import annotations

from protocol.contract import nn_ops
from dsp_side.operators.nn import layout, quant, softmax, yolo
from dsp_side.registry import Registry


def register(registry: Registry) -> None:
    """Bind the NN kernels to their entries (``protocol.contract.nn_ops``) in ``registry``."""
    for entry, fn in ((nn_ops.QUANTIZE, quant.quantize), (nn_ops.DEQUANTIZE, quant.dequantize),
                      (nn_ops.SOFTMAX, softmax.softmax), (nn_ops.LAYOUT, layout.convert),
                      (nn_ops.YOLOV3_DETECTION_OUTPUT, yolo.detection_output), (nn_ops.YOLO_DECODE, yolo.decode),
                      (nn_ops.YOLO_FILTER, yolo.filter_), (nn_ops.YOLO_NMS, yolo.nms), (nn_ops.YOLO_TOPK, yolo.topk)):
        registry.bind(entry, fn)

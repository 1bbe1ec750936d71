"""NN operators (command ids 0x0400-0x05ff): quantize, dequantize, softmax, layout
conversion, Yolov3DetectionOutput and its small-operator chain.

Tensors travel as descriptors (``tensor.parse``) in the params; data stays in DDR.
"""
from __future__ import annotations

from protocol.contract import nn_ids as ids, tensor_types
from dsp_side.operators.nn import layout, quant, softmax, yolo
from dsp_side.registry import Registry

_TENSOR = {"type": "any", "doc": "tensor descriptor (hbDNNTensorProperties)"}
_BATCH = {"type": "int", "min": 1, "max": 1 << 16, "doc": "batches in this task"}
_THRESH = {"type": "float", "min": 0.0, "max": 1.0}
_CAPACITY = {"type": "int", "min": 1, "max": 1 << 20, "doc": "records per batch block"}
_GEOMETRY = {
    "class_num": {"type": "int", "min": 1, "max": 4096},
    "anchor_num": {"type": "int", "min": 1, "max": 16, "doc": "anchors per map"},
    "map_w": {"type": "int_list", "doc": "W of each map"},
    "map_h": {"type": "int_list", "doc": "H of each map"},
    "net_w": {"type": "int", "min": 1, "max": 1 << 16},
    "net_h": {"type": "int", "min": 1, "max": 1 << 16},
    "biases": {"type": "float_list", "doc": "anchor sizes [map][anchor][w, h] in network pixels"},
    "batch": _BATCH,
}
_MAX_BOX = {"type": "int", "min": 1, "max": 1 << 16}
_OFFSET = {"type": "int", "default": 0, "min": 0, "doc": "batch index written in the records of the first batch"}


def register(registry: Registry) -> None:
    """Add the NN operators to ``registry``."""
    io = {"input": _TENSOR, "output": _TENSOR}
    registry.register(ids.QUANTIZE, "quantize", quant.quantize, inputs=1, outputs=1, params=io)
    registry.register(ids.DEQUANTIZE, "dequantize", quant.dequantize, inputs=1, outputs=1, params=io)
    registry.register(ids.SOFTMAX, "softmax", softmax.softmax, inputs=1, outputs=1,
                      params={**io, "axis": {"type": "int", "default": -1}})
    registry.register(ids.LAYOUT, "layout", layout.convert, inputs=1, outputs=1, params={
        **io, "channels": {"type": "int", "default": -1, "min": -1, "doc": "C; -1 = from the NCHW/NHWC side"},
        "platform": {"type": "str", "default": "", "choices": ["", *tensor_types.C2_TABLE],
                     "doc": "check C2 against this platform's table"}})
    registry.register(ids.YOLOV3_DETECTION_OUTPUT, "yolov3_detection_output", yolo.detection_output,
                      inputs=(1, yolo.MAX_MAPS), outputs=1, params={
                          **_GEOMETRY, "max_box_num": _MAX_BOX, "confidence_thresh": _THRESH,
                          "nms_thresh": _THRESH, "batch_offset": _OFFSET})
    registry.register(ids.YOLO_DECODE, "yolo_decode", yolo.decode, inputs=(1, yolo.MAX_MAPS), outputs=1,
                      params=_GEOMETRY)
    registry.register(ids.YOLO_FILTER, "yolo_filter", yolo.filter_, inputs=1, outputs=1, params={
        "class_num": _GEOMETRY["class_num"], "boxes": {"type": "int", "min": 1}, "confidence_thresh": _THRESH,
        "capacity": _CAPACITY, "batch": _BATCH})
    registry.register(ids.YOLO_NMS, "yolo_nms", yolo.nms, inputs=1, outputs=1, params={
        "nms_thresh": _THRESH, "capacity": _CAPACITY, "batch": _BATCH})
    registry.register(ids.YOLO_TOPK, "yolo_topk", yolo.topk, inputs=1, outputs=1, params={
        "max_box_num": _MAX_BOX, "capacity": _CAPACITY, "batch": _BATCH, "batch_offset": _OFFSET})

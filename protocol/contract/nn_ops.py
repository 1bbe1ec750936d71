"""The NN operator catalog (command ids 0x0400-0x05ff), declared once: one entry per operator.

Tensors travel as descriptors (hbDNNTensorProperties, ``arm_side.nn.TensorProperties.to_wire``)
in the ``input``/``output`` parameters; the data stays in the buffers. The firmware binds its
kernels to these entries (``dsp_side.operators.nn``); ``arm_side.nn`` and the stubs derive from them.
"""
from __future__ import annotations

from protocol.contract import tensor_types
from protocol.contract.operator import OperatorEntry, catalog

MAX_MAPS = 7        # output maps a Yolo operator takes (inputs 1..MAX_MAPS)

_TENSOR = {"type": "any", "doc": "tensor descriptor (hbDNNTensorProperties)"}
_IO = {"input": _TENSOR, "output": _TENSOR}
_BATCH = {"type": "int", "min": 1, "max": 1 << 16, "doc": "batches in this task"}
_THRESH = {"type": "float", "min": 0.0, "max": 1.0}
_CAPACITY = {"type": "int", "min": 1, "max": 1 << 20, "doc": "records per batch block"}
_GEOMETRY: dict[str, dict] = {
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

QUANTIZE = OperatorEntry.declare(
    0x0400, "quantize", _IO, inputs=1, outputs=1, buffers=(("src",), ("dst",)),
    doc="Quantize a float tensor into an integer tensor (SCALE or SHIFT), honouring both descriptors' strides.")
DEQUANTIZE = OperatorEntry.declare(
    0x0401, "dequantize", _IO, inputs=1, outputs=1, buffers=(("src",), ("dst",)),
    doc="Dequantize an integer tensor (SCALE or SHIFT) into a float tensor, honouring both descriptors' strides.")
SOFTMAX = OperatorEntry.declare(
    0x0402, "softmax", {**_IO, "axis": {"type": "int", "default": -1}}, inputs=1, outputs=1,
    buffers=(("src",), ("dst",)),
    doc="Softmax of a float or quantised tensor along ``axis`` (negative counts from the end).")
LAYOUT = OperatorEntry.declare(
    0x0403, "layout", {
        **_IO, "channels": {"type": "int", "default": -1, "min": -1, "doc": "C; -1 = from the NCHW/NHWC side"},
        "platform": {"type": "str", "default": "", "choices": ["", *tensor_types.C2_TABLE],
                     "doc": "check C2 against this platform's table"}}, inputs=1, outputs=1, buffers=(("src",), ("dst",)),
    doc="Convert between NCHW, NHWC and NC1HWC2 (or repack one layout between strides).")
YOLOV3_DETECTION_OUTPUT = OperatorEntry.declare(
    0x0410, "yolov3_detection_output", {
        **_GEOMETRY, "max_box_num": _MAX_BOX, "confidence_thresh": _THRESH, "nms_thresh": _THRESH,
        "batch_offset": _OFFSET}, inputs=(1, MAX_MAPS), outputs=1,
    doc="Yolov3DetectionOutput: decode, filter, per-class NMS and top-k in one task.")
YOLO_DECODE = OperatorEntry.declare(
    0x0411, "yolo_decode", _GEOMETRY, inputs=(1, MAX_MAPS), outputs=1,
    doc="Chain step 1: every box of every map decoded to [batch, boxes, 5 + C] float32.")
YOLO_FILTER = OperatorEntry.declare(
    0x0412, "yolo_filter", {
        "class_num": _GEOMETRY["class_num"], "boxes": {"type": "int", "min": 1}, "confidence_thresh": _THRESH,
        "capacity": _CAPACITY, "batch": _BATCH}, inputs=1, outputs=1,
    doc="Chain step 2: (box, class) candidates past the confidence threshold.")
YOLO_NMS = OperatorEntry.declare(
    0x0413, "yolo_nms", {"nms_thresh": _THRESH, "capacity": _CAPACITY, "batch": _BATCH}, inputs=1, outputs=1,
    doc="Chain step 3: greedy per-class NMS of candidate blocks.")
YOLO_TOPK = OperatorEntry.declare(
    0x0414, "yolo_topk", {"max_box_num": _MAX_BOX, "capacity": _CAPACITY, "batch": _BATCH,
                                 "batch_offset": _OFFSET}, inputs=1, outputs=1,
    doc="Chain step 4: the max_box_num best boxes in the Yolov3DetectionOutput result format.")

ENTRIES = catalog(QUANTIZE, DEQUANTIZE, SOFTMAX, LAYOUT, YOLOV3_DETECTION_OUTPUT, YOLO_DECODE, YOLO_FILTER,
                  YOLO_NMS, YOLO_TOPK)

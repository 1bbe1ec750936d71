"""ARM-side NN API: tensor descriptors (hbDNNTensorProperties), alignment helpers, the typed
operator calls and the Yolov3DetectionOutput helpers. References live in ``arm_side.nn.reference``.

    from arm_side import nn
    props = nn.aligned((1, 64, 56, 56), nn.DataType.S8, nn.Layout.NCHW, quant=nn.Quantization.scale_(0.02))
    src_props = nn.dense((1, 64, 56, 56), nn.DataType.F32, nn.Layout.NCHW)
    nn.quantize(soc, nn.Tensor(src, src_props), nn.Tensor(dst, props)).wait()
"""
from protocol.contract import nn_ids as ids
from arm_side.nn.dtypes import C2_TABLE, DataType, Layout, QuantiType, c2_for, from_numpy
from arm_side.nn.ops import Tensor, convert_layout, dequantize, quantize, softmax
from arm_side.nn.tensor import (BPU_ALIGN, NO_QUANT, Quantization, TensorProperties, aligned, aligned_last_dim,
                                dense, nc1hwc2, read, strides_for, write)
from arm_side.nn.yolo import Chain, Detections, YoloParams, detection_output, parse_output, split

__all__ = ["ids", "C2_TABLE", "DataType", "Layout", "QuantiType", "c2_for", "from_numpy", "Tensor", "convert_layout",
           "dequantize", "quantize", "softmax", "BPU_ALIGN", "NO_QUANT", "Quantization", "TensorProperties",
           "aligned", "aligned_last_dim", "dense", "nc1hwc2", "read", "strides_for", "write", "Chain", "Detections",
           "YoloParams", "detection_output", "parse_output", "split"]

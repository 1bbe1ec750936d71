"""Typed stubs of the stock NN operators (0x0400-0x05ff).

Generated from the operators' declarations by arm_side.stubgen; do not edit.
Each function submits its operator and returns the task (see arm_side.stubs).
"""
from __future__ import annotations

from typing import Any, Literal, Sequence, TypeVar, Unpack  # noqa: F401

from protocol.task_options import TaskKw, TaskOptions
from arm_side.stubs import Buffer, Submitter  # noqa: F401

T = TypeVar("T")

__all__ = [
    'quantize', 'dequantize', 'softmax', 'layout', 'yolov3_detection_output', 'yolo_decode', 'yolo_filter',
    'yolo_nms', 'yolo_topk',
]


def quantize(
        soc: Submitter[T],
        src: Buffer,
        dst: Buffer,
        *,
        input: Any,
        output: Any,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Quantize a float tensor into an integer tensor (SCALE or SHIFT), honouring both descriptors' strides.

    Operator 0x0400 ``quantize``, buffers: 1 in, 1 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - input (any; required): tensor descriptor (hbDNNTensorProperties)
    - output (any; required): tensor descriptor (hbDNNTensorProperties)
    """
    params: dict[str, Any] = {'input': input, 'output': output}
    return soc.rpc(0x0400, [src], [dst], params, options=options, **task)


def dequantize(
        soc: Submitter[T],
        src: Buffer,
        dst: Buffer,
        *,
        input: Any,
        output: Any,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Dequantize an integer tensor (SCALE or SHIFT) into a float tensor, honouring both descriptors' strides.

    Operator 0x0401 ``dequantize``, buffers: 1 in, 1 out. Returns the submitted task (its values come
    from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - input (any; required): tensor descriptor (hbDNNTensorProperties)
    - output (any; required): tensor descriptor (hbDNNTensorProperties)
    """
    params: dict[str, Any] = {'input': input, 'output': output}
    return soc.rpc(0x0401, [src], [dst], params, options=options, **task)


def softmax(
        soc: Submitter[T],
        src: Buffer,
        dst: Buffer,
        *,
        input: Any,
        output: Any,
        axis: int = -1,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Softmax of a float or quantised tensor along ``axis`` (negative counts from the end).

    Operator 0x0402 ``softmax``, buffers: 1 in, 1 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - input (any; required): tensor descriptor (hbDNNTensorProperties)
    - output (any; required): tensor descriptor (hbDNNTensorProperties)
    - axis (int; default -1)
    """
    params: dict[str, Any] = {'input': input, 'output': output, 'axis': axis}
    return soc.rpc(0x0402, [src], [dst], params, options=options, **task)


def layout(
        soc: Submitter[T],
        src: Buffer,
        dst: Buffer,
        *,
        input: Any,
        output: Any,
        channels: int = -1,
        platform: Literal[
            '', 'RK2118', 'RK3566', 'RK3568', 'RK3588', 'RK3576', 'RV1103B', 'RV1106B', 'RV1103', 'RV1106',
            'RK3562'
        ] = '',
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Convert between NCHW, NHWC and NC1HWC2 (or repack one layout between strides).

    Operator 0x0403 ``layout``, buffers: 1 in, 1 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - input (any; required): tensor descriptor (hbDNNTensorProperties)
    - output (any; required): tensor descriptor (hbDNNTensorProperties)
    - channels (int; -1..; default -1): C; -1 = from the NCHW/NHWC side
    - platform (str; one of '', 'RK2118', 'RK3566', 'RK3568', 'RK3588', 'RK3576', 'RV1103B', 'RV1106B',
      'RV1103', 'RV1106', 'RK3562'; default ''): check C2 against this platform's table
    """
    params: dict[str, Any] = {'input': input, 'output': output, 'channels': channels, 'platform': platform}
    return soc.rpc(0x0403, [src], [dst], params, options=options, **task)


def yolov3_detection_output(
        soc: Submitter[T],
        inputs: Sequence[Buffer],
        dst: Buffer,
        *,
        class_num: int,
        anchor_num: int,
        map_w: Sequence[int],
        map_h: Sequence[int],
        net_w: int,
        net_h: int,
        biases: Sequence[float],
        batch: int,
        max_box_num: int,
        confidence_thresh: float,
        nms_thresh: float,
        batch_offset: int = 0,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Yolov3DetectionOutput: decode, filter, per-class NMS and top-k in one task.

    Operator 0x0410 ``yolov3_detection_output``, buffers: 1..7 in, 1 out. Returns the submitted task
    (its values come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - class_num (int; 1..4096; required)
    - anchor_num (int; 1..16; required): anchors per map
    - map_w (int_list; required): W of each map
    - map_h (int_list; required): H of each map
    - net_w (int; 1..65536; required)
    - net_h (int; 1..65536; required)
    - biases (float_list; required): anchor sizes [map][anchor][w, h] in network pixels
    - batch (int; 1..65536; required): batches in this task
    - max_box_num (int; 1..65536; required)
    - confidence_thresh (float; 0.0..1.0; required)
    - nms_thresh (float; 0.0..1.0; required)
    - batch_offset (int; 0..; default 0): batch index written in the records of the first batch
    """
    params: dict[str, Any] = {
        'class_num': class_num,
        'anchor_num': anchor_num,
        'map_w': list(map_w),
        'map_h': list(map_h),
        'net_w': net_w,
        'net_h': net_h,
        'biases': list(biases),
        'batch': batch,
        'max_box_num': max_box_num,
        'confidence_thresh': confidence_thresh,
        'nms_thresh': nms_thresh,
        'batch_offset': batch_offset,
    }
    return soc.rpc(0x0410, list(inputs), [dst], params, options=options, **task)


def yolo_decode(
        soc: Submitter[T],
        inputs: Sequence[Buffer],
        dst: Buffer,
        *,
        class_num: int,
        anchor_num: int,
        map_w: Sequence[int],
        map_h: Sequence[int],
        net_w: int,
        net_h: int,
        biases: Sequence[float],
        batch: int,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Chain step 1: every box of every map decoded to [batch, boxes, 5 + C] float32.

    Operator 0x0411 ``yolo_decode``, buffers: 1..7 in, 1 out. Returns the submitted task (its values
    come from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``,
    ``priority``, ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - class_num (int; 1..4096; required)
    - anchor_num (int; 1..16; required): anchors per map
    - map_w (int_list; required): W of each map
    - map_h (int_list; required): H of each map
    - net_w (int; 1..65536; required)
    - net_h (int; 1..65536; required)
    - biases (float_list; required): anchor sizes [map][anchor][w, h] in network pixels
    - batch (int; 1..65536; required): batches in this task
    """
    params: dict[str, Any] = {
        'class_num': class_num,
        'anchor_num': anchor_num,
        'map_w': list(map_w),
        'map_h': list(map_h),
        'net_w': net_w,
        'net_h': net_h,
        'biases': list(biases),
        'batch': batch,
    }
    return soc.rpc(0x0411, list(inputs), [dst], params, options=options, **task)


def yolo_filter(
        soc: Submitter[T],
        src: Buffer,
        dst: Buffer,
        *,
        class_num: int,
        boxes: int,
        confidence_thresh: float,
        capacity: int,
        batch: int,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Chain step 2: (box, class) candidates past the confidence threshold.

    Operator 0x0412 ``yolo_filter``, buffers: 1 in, 1 out. Returns the submitted task (its values come
    from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - class_num (int; 1..4096; required)
    - boxes (int; 1..; required)
    - confidence_thresh (float; 0.0..1.0; required)
    - capacity (int; 1..1048576; required): records per batch block
    - batch (int; 1..65536; required): batches in this task
    """
    params: dict[str, Any] = {
        'class_num': class_num,
        'boxes': boxes,
        'confidence_thresh': confidence_thresh,
        'capacity': capacity,
        'batch': batch,
    }
    return soc.rpc(0x0412, [src], [dst], params, options=options, **task)


def yolo_nms(
        soc: Submitter[T],
        src: Buffer,
        dst: Buffer,
        *,
        nms_thresh: float,
        capacity: int,
        batch: int,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Chain step 3: greedy per-class NMS of candidate blocks.

    Operator 0x0413 ``yolo_nms``, buffers: 1 in, 1 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - nms_thresh (float; 0.0..1.0; required)
    - capacity (int; 1..1048576; required): records per batch block
    - batch (int; 1..65536; required): batches in this task
    """
    params: dict[str, Any] = {'nms_thresh': nms_thresh, 'capacity': capacity, 'batch': batch}
    return soc.rpc(0x0413, [src], [dst], params, options=options, **task)


def yolo_topk(
        soc: Submitter[T],
        src: Buffer,
        dst: Buffer,
        *,
        max_box_num: int,
        capacity: int,
        batch: int,
        batch_offset: int = 0,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Chain step 4: the max_box_num best boxes in the Yolov3DetectionOutput result format.

    Operator 0x0414 ``yolo_topk``, buffers: 1 in, 1 out. Returns the submitted task (its values come
    from ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - max_box_num (int; 1..65536; required)
    - capacity (int; 1..1048576; required): records per batch block
    - batch (int; 1..65536; required): batches in this task
    - batch_offset (int; 0..; default 0): batch index written in the records of the first batch
    """
    params: dict[str, Any] = {
        'max_box_num': max_box_num,
        'capacity': capacity,
        'batch': batch,
        'batch_offset': batch_offset,
    }
    return soc.rpc(0x0414, [src], [dst], params, options=options, **task)

"""Command ids of the NN operators (0x0400-0x05ff of the NN range 0x0400-0x07ff).

0x0600-0x06ff belongs to the point-cloud operators. These constants are the
contract between the ARM SDK (``arm_side.nn``) and the firmware; they are plain
integers so both sides can import them without numpy or sockets.
"""
QUANTIZE = 0x0400
DEQUANTIZE = 0x0401
SOFTMAX = 0x0402
LAYOUT = 0x0403

YOLOV3_DETECTION_OUTPUT = 0x0410   # the fused "big operator"
YOLO_DECODE = 0x0411               # the same post-processing as a chain of small operators
YOLO_FILTER = 0x0412
YOLO_NMS = 0x0413
YOLO_TOPK = 0x0414

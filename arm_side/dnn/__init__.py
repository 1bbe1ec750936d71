"""The model runtime (hbDNN API): models whose BPU part runs on onnxruntime in this process
and whose other layers run on vdsp0/vdsp1 by RPC (HB_DNN_ENABLE_DSP=1) or on the ARM side.
See docs/dnn.md.

    from arm_side import Soc, dnn
    with Soc() as soc, dnn.Runtime(soc) as rt:
        pack = rt.initialize_from_files([path])
        model = rt.model_handle(pack, rt.model_name_list(pack)[0])
        task = rt.infer([out_tensor], [in_tensor], model)
        rt.wait_task_done(task, 0)
        rt.release_task(task)
"""
from arm_side.nn.ops import Tensor
from arm_side.dnn import container
from arm_side.dnn.layers import BUILTIN, Dequantize, Layer, LayerContext, Quantize, Softmax
from arm_side.dnn.plugin import STOCK_DIR as STOCK_PLUGIN_DIR
from arm_side.dnn.props import ImageProperties, ImageType, nv12
from arm_side.dnn.runtime import ModelHandle, PackedHandle, Runtime, version
from arm_side.dnn.tasks import (BPU_CORE_0, BPU_CORE_1, BPU_CORE_ANY, MAX_BATCH, MAX_TASKS, InferCtrlParam, LayerRun,
                                TaskHandle)

__all__ = ["Tensor", "container", "BUILTIN", "Dequantize", "Layer", "LayerContext", "Quantize", "Softmax",
           "STOCK_PLUGIN_DIR", "ImageProperties", "ImageType", "nv12", "ModelHandle", "PackedHandle", "Runtime",
           "version", "BPU_CORE_0", "BPU_CORE_1", "BPU_CORE_ANY", "MAX_BATCH", "MAX_TASKS", "InferCtrlParam",
           "LayerRun", "TaskHandle"]

"""The DSP NN plugin (the J5's libhb_dsp_nn_plugin.so): a Softmax layer that runs on vdsp0 or
vdsp1 by RPC (operator 0x0402) on the model's tensors in shared memory when HB_DNN_ENABLE_DSP
is 1, and on the ARM side otherwise.

    rt = dnn.Runtime(soc)                       # HB_DNN_PLUGIN_PATH names this file's directory
    rt.register_layer_creator("Softmax", rt.plugin_creators()["Softmax"])
"""
from arm_side import nn
from arm_side.dnn.layers import Softmax


class DspSoftmax(Softmax):
    """Softmax along attribute ``axis``, on a DSP core when the DSP is enabled."""

    def forward(self, ctx, inputs, outputs):
        src, dst = inputs[0], outputs[0]
        if ctx.dsp_enabled:
            ctx.wait(nn.softmax(ctx.soc, src, dst, axis=self.axis, **ctx.rpc_args))
        else:
            self.arm(ctx, src, dst)


LAYER_CREATORS = {"Softmax": DspSoftmax}

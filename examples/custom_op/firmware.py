"""A custom DSP operator: the tutorial of the README.

``saturate_add`` adds a constant to every byte of an image, saturating at 0 and
255 (what a brightness adjustment does). It has command id 0x1400, the first id
of the custom range, takes one input and one output buffer of the same size,
and one parameter.
"""
import numpy as np

from protocol import errors

VERSION = "1.0.0"
SATURATE_ADD = 0x1400


def saturate_add(ctx, inputs, outputs, delta):
    """out[i] = clip(in[i] + delta, 0, 255) for every byte."""
    src, dst = inputs[0], outputs[0]
    if dst.size < src.size:
        raise errors.InvalidArgument(f"saturate_add: output of {dst.size} bytes is smaller than the input ({src.size})")
    np.clip(src.astype(np.int16) + delta, 0, 255, out=dst[:src.size], casting="unsafe")
    return {"bytes": int(src.size)}


def register(registry):
    registry.register(SATURATE_ADD, "saturate_add", saturate_add, inputs=1, outputs=1,
                      params={"delta": {"type": "int", "min": -255, "max": 255,
                                        "doc": "added to every byte, result saturated to 0..255"}})

"""A custom DSP operator: the tutorial of the README.

``saturate_add`` adds a constant to every byte of an image, saturating at 0 and
255 (what a brightness adjustment does). It has command id 0x1400, the first id
of the custom range, takes one input and one output buffer of the same size,
and one parameter.

The operator is declared once, as data (an ``OperatorEntry``: id, name, buffers, typed
parameters with their ranges and docs); ``register`` binds the kernel and its hooks to it.
The image's manifest carries the declaration, so ``vdsp firmware stubs`` makes a typed
Python function of it (``custom_op_stubs.py``, what ``call_it.py`` calls).

It uses the operator lifecycle (as RKNN custom operators have it), with its own
private state in ``ctx.state.priv``:

* ``init`` once when the firmware loads: a 256-entry lookup table (where a real DSP
  operator sets up its TCM buffers);
* ``prepare`` when the buffer sizes or ``delta`` change: fills the table for that delta;
* ``saturate_add`` (compute) per task: one table lookup per byte;
* ``destroy`` when the firmware is unloaded (the core is stopped): frees the table.
"""
import numpy as np

from protocol import errors
from protocol.contract.operator import OperatorEntry

VERSION = "1.0.0"

SATURATE_ADD = OperatorEntry.declare(
    0x1400, "saturate_add", {"delta": {"type": "int", "min": -255, "max": 255,
                                       "doc": "added to every byte, result saturated to 0..255"}},
    inputs=1, outputs=1, doc="out[i] = clip(in[i] + delta, 0, 255) for every byte.")


def init(ctx):
    """Once, when the firmware loads: the lookup table and a task counter."""
    ctx.state.priv = {"lut": np.zeros(256, dtype=np.uint8), "tasks": 0}
    ctx.log.info("saturate_add: init, lookup table of 256 bytes")


def prepare(ctx, inputs, outputs, delta):
    """For a new shape or delta: check the buffers, fill the table."""
    if outputs[0].size < inputs[0].size:
        raise errors.InvalidArgument(f"saturate_add: output of {outputs[0].size} bytes is smaller than the "
                                     f"input ({inputs[0].size})")
    np.clip(np.arange(256) + delta, 0, 255, out=ctx.state.priv["lut"], casting="unsafe")


def saturate_add(ctx, inputs, outputs, delta):
    """out[i] = clip(in[i] + delta, 0, 255) for every byte."""
    src, dst, priv = inputs[0], outputs[0], ctx.state.priv
    np.take(priv["lut"], src, out=dst[:src.size])
    priv["tasks"] += 1
    return {"bytes": int(src.size), "prepares": ctx.state.prepares, "tasks": priv["tasks"]}


def destroy(ctx):
    """When the firmware is unloaded."""
    ctx.log.info("saturate_add: destroy after %d tasks, lookup table freed", ctx.state.priv["tasks"])
    ctx.state.priv = None


def register(registry):
    registry.bind(SATURATE_ADD, saturate_add, init=init, prepare=prepare, destroy=destroy)

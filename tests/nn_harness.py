"""Run NN operators in-process exactly as the firmware calls them (schema check, flat uint8
buffers, read-only inputs) — fast tests of the kernels without a SoC."""
from __future__ import annotations

import numpy as np

from protocol import schema
from dsp_side.operators import nn as dsp_nn
from dsp_side.registry import Registry

_REGISTRY = Registry()
dsp_nn.register(_REGISTRY)


def buffer(nbytes: int, garbage: bool = True, seed: int = 0) -> np.ndarray:
    """A flat uint8 buffer, filled with random garbage so that padding read as data shows."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, nbytes, dtype=np.uint8) if garbage else np.zeros(nbytes, np.uint8)


def run(op_id: int, inputs: list, outputs: list, params: dict) -> dict:
    """Validate like the firmware and call the operator. Raises what it raises."""
    spec = _REGISTRY.get(op_id)
    spec.check_counts(len(inputs), len(outputs))
    checked = schema.validate(spec.name, spec.params, params)
    ro = []
    for a in inputs:
        v = a.view()
        v.flags.writeable = False
        ro.append(v)
    return spec.fn(None, ro, outputs, **checked) or {}

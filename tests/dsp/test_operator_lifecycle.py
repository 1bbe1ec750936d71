"""Operator lifecycle hooks (dsp_side.registry): init once, prepare per shape, compute per task,
destroy at unload, with per-operator private state. The firmware's use of them on a live core
(init when the image loads, destroy when the core stops) is the README tutorial's test in
tests/integration/test_cli_remoteproc.py."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from dsp_side.registry import OperatorState, Registry


class Ctx:
    core = "vdsp9"
    state = None


def make(calls):
    def init(ctx):
        ctx.state.priv = {"scratch": bytearray(64)}
        calls.append("init")

    def prepare(ctx, inputs, outputs, k):
        calls.append(("prepare", inputs[0].size, k))

    def compute(ctx, inputs, outputs, k):
        calls.append(("compute", ctx.state.priv is not None))

    def destroy(ctx):
        calls.append("destroy")
        ctx.state.priv = None

    reg = Registry()
    spec = reg.register(0x1400, "hooked", compute, inputs=1, outputs=1, params={"k": {"type": "int"}},
                        init=init, prepare=prepare, destroy=destroy)
    reg.register(0x1401, "plain", lambda ctx, i, o: None)
    return reg, spec


def run(reg, spec, ctx, size, k):
    reg.prepare(spec, ctx, [np.zeros(size, np.uint8)], [np.zeros(size, np.uint8)], {"k": k})
    spec.fn(ctx, [np.zeros(size, np.uint8)], [np.zeros(size, np.uint8)], k=k)


def test_prepare_runs_once_per_shape_and_the_state_is_the_operators():
    calls = []
    reg, spec = make(calls)
    ctx = Ctx()
    reg.init_all(ctx)
    assert calls == ["init"] and ctx.state is None
    run(reg, spec, ctx, 8, 1)
    run(reg, spec, ctx, 8, 1)           # same shape and parameters: no prepare
    run(reg, spec, ctx, 16, 1)          # a new shape
    run(reg, spec, ctx, 16, 2)          # new parameters
    assert calls[1:] == [("prepare", 8, 1), ("compute", True), ("compute", True), ("prepare", 16, 1),
                         ("compute", True), ("prepare", 16, 2), ("compute", True)]
    assert isinstance(ctx.state, OperatorState) and ctx.state.prepares == 3
    assert reg.state(0x1401).priv is None and reg.state(0x1401).prepares == 0    # one state per operator
    reg.destroy_all(ctx, logging.getLogger("test"))
    assert calls[-1] == "destroy" and reg.state(0x1400).priv is None


def test_a_failing_prepare_is_tried_again_on_the_next_task():
    reg, seen = Registry(), []

    def prepare(ctx, inputs, outputs):
        seen.append(1)
        if len(seen) == 1:
            raise ValueError("no TCM")
    spec = reg.register(0x1400, "p", lambda ctx, i, o: None, inputs=1, outputs=1, prepare=prepare)
    ctx = Ctx()
    with pytest.raises(ValueError):
        reg.prepare(spec, ctx, [np.zeros(4, np.uint8)], [np.zeros(4, np.uint8)], {})
    reg.prepare(spec, ctx, [np.zeros(4, np.uint8)], [np.zeros(4, np.uint8)], {})
    assert len(seen) == 2 and ctx.state.prepares == 1


def test_destroy_errors_are_logged_and_the_others_still_run(caplog):
    reg, order = Registry(), []
    reg.register(0x1400, "a", lambda ctx, i, o: None, destroy=lambda ctx: order.append("a"))
    reg.register(0x1401, "b", lambda ctx, i, o: None, destroy=lambda ctx: 1 / 0)
    with caplog.at_level(logging.ERROR):
        reg.destroy_all(Ctx(), logging.getLogger("test"))
    assert order == ["a"] and "destroy hook of operator b raised" in caplog.text


def test_hooks_must_be_callable():
    with pytest.raises(ValueError, match="init hook must be callable"):
        Registry().register(0x1400, "x", lambda ctx, i, o: None, init="setup")

"""Explicit operator registration: a firmware image is a Registry of operators.

An operator is declared once, as data (a ``protocol.contract.operator.OperatorEntry``: id,
name, buffers, typed parameters); the firmware binds a kernel to it. Nothing is discovered
by introspection::

    registry = Registry()
    registry.bind(cv_ops.GAUSSIAN_BLUR, gaussian_blur)       # a stock entry

A custom firmware may declare its entry in the call (``register``, or its decorator form)::

    @registry.operator(0x1400, "my_scale", inputs=1, outputs=1,
                       params={"factor": {"type": "float", "default": 2.0}})
    def my_scale(ctx, inputs, outputs, factor):
        ...

``inputs``/``outputs`` are lists of numpy uint8 arrays over the DDR (inputs
read-only). An operator returns a small dict (sent back as the task result)
or None. Raising a ``protocol.errors.VdspError`` is an error reply; any other
exception is a crash of the firmware, like a DSP exception.

Lifecycle hooks (optional, as RKNN custom operators have them), each seeing the
operator's private state as ``ctx.state`` (an :class:`OperatorState`; keep what you
like in ``ctx.state.priv``):

* ``init(ctx)``: once, when the firmware loads, before it serves (a real DSP operator
  sets up its TCM buffers here). Raising refuses the image: the core stays offline.
* ``prepare(ctx, inputs, outputs, **params)``: before compute, whenever the task's
  buffer sizes or parameters differ from the previous task's of this operator (a new
  tensor shape); errors as for compute.
* compute, the operator function itself: per task.
* ``destroy(ctx)``: once, when the firmware is unloaded (the core is stopped), not
  after a crash. What it raises is logged.
"""
from __future__ import annotations

import dataclasses
import json
import logging
from typing import Callable

from protocol import errors
from protocol.contract.operator import OperatorEntry


@dataclasses.dataclass(frozen=True)
class OperatorSpec:
    id: int
    name: str
    fn: Callable
    params: dict
    inputs: tuple[int, int]
    outputs: tuple[int, int]
    doc: str = ""
    # Inputs are read-only views unless this is set. OpenCV's Python binding copies a
    # read-only array before using it, so OpenCV-backed operators set it to stay zero-copy.
    inputs_writable: bool = False
    init: Callable | None = None        # lifecycle hooks (module docstring)
    prepare: Callable | None = None
    destroy: Callable | None = None
    entry: OperatorEntry | None = None  # the declaration this kernel is bound to

    def describe(self) -> dict:
        """Plain-data entry of the operator table (READY, manifests, ``vdsp status``)."""
        return {"id": self.id, "name": self.name, "params": self.params,
                "inputs": list(self.inputs), "outputs": list(self.outputs), "doc": self.doc}

    def check_counts(self, n_in: int, n_out: int) -> None:
        """Raises InvalidArgument when the task has the wrong number of buffers."""
        for what, n, (lo, hi) in (("inputs", n_in, self.inputs), ("outputs", n_out, self.outputs)):
            if not lo <= n <= hi:
                want = str(lo) if lo == hi else f"{lo}..{hi}"
                raise errors.InvalidArgument(f"{self.name}: takes {want} {what}, got {n}")


class OperatorState:
    """The private state of one operator in one firmware run: ``priv`` is the operator's
    (RKNN's priv_data); ``shape`` the key of the last prepared shape; ``prepares`` how many
    times prepare ran."""
    __slots__ = ("priv", "shape", "prepares")

    def __init__(self) -> None:
        self.priv: object = None
        self.shape: str | None = None
        self.prepares = 0


def shape_key(inputs: list, outputs: list, params: dict) -> str:
    """What decides whether prepare runs again: the buffer sizes and the parameters."""
    return json.dumps([[int(a.size) for a in inputs], [int(a.size) for a in outputs], params],
                      sort_keys=True, default=repr)


class Registry:
    """The operator table of one firmware image, keyed by command id."""

    def __init__(self) -> None:
        self._ops: dict[int, OperatorSpec] = {}
        self._states: dict[int, OperatorState] = {}

    def register(self, op_id: int, name: str, fn: Callable, *, params: dict | None = None,
                 inputs: int | tuple[int, int] = 0, outputs: int | tuple[int, int] = 0,
                 doc: str = "", inputs_writable: bool = False, init: Callable | None = None,
                 prepare: Callable | None = None, destroy: Callable | None = None) -> OperatorSpec:
        """Declare an operator (``OperatorEntry.declare``; the doc defaults to the first line of
        ``fn``'s docstring) and bind ``fn`` to it. Raises ValueError as :meth:`bind` and for a bad
        declaration (id out of range, bad schema)."""
        entry = OperatorEntry.declare(op_id, name, params, inputs=inputs, outputs=outputs,
                                      doc=doc or (fn.__doc__ or "").strip().split("\n")[0])
        return self.bind(entry, fn, inputs_writable=inputs_writable, init=init, prepare=prepare, destroy=destroy)

    def bind(self, entry: OperatorEntry, fn: Callable, *, inputs_writable: bool = False,
             init: Callable | None = None, prepare: Callable | None = None,
             destroy: Callable | None = None) -> OperatorSpec:
        """Bind kernel ``fn`` (with optional lifecycle hooks) to a declared operator. Raises
        ValueError for a duplicate id or name, or a hook that is not callable."""
        op_id, name = entry.id, entry.name
        if op_id in self._ops:
            raise ValueError(f"operator id 0x{op_id:04x} registered twice ({self._ops[op_id].name}, {name})")
        if any(s.name == name for s in self._ops.values()):
            raise ValueError(f"operator name {name!r} registered twice")
        for hook, value in (("init", init), ("prepare", prepare), ("destroy", destroy)):
            if value is not None and not callable(value):
                raise ValueError(f"operator {name}: {hook} hook must be callable")
        spec = OperatorSpec(op_id, name, fn, dict(entry.params), entry.inputs, entry.outputs, entry.doc,
                            inputs_writable, init, prepare, destroy, entry)
        self._ops[op_id] = spec
        self._states[op_id] = OperatorState()
        return spec

    # --- lifecycle (called by the firmware process) -------------------------------------------
    def state(self, op_id: int) -> OperatorState:
        return self._states[op_id]

    def init_all(self, ctx) -> None:
        """Every operator's init hook, by id. Raises what a hook raises (the image is refused)."""
        for spec in sorted(self._ops.values(), key=lambda s: s.id):
            if spec.init is not None:
                ctx.state = self._states[spec.id]
                spec.init(ctx)
        ctx.state = None

    def prepare(self, spec: OperatorSpec, ctx, inputs: list, outputs: list, params: dict) -> None:
        """``spec``'s prepare hook when this task's shape differs from the last prepared one;
        sets ``ctx.state``. Raises what the hook raises."""
        state = ctx.state = self._states[spec.id]
        if spec.prepare is None:
            return
        key = shape_key(inputs, outputs, params)
        if key != state.shape:
            spec.prepare(ctx, inputs, outputs, **params)
            state.shape = key
            state.prepares += 1

    def destroy_all(self, ctx, log: logging.Logger) -> None:
        """Every operator's destroy hook, in reverse id order; what one raises is logged."""
        for spec in sorted(self._ops.values(), key=lambda s: -s.id):
            if spec.destroy is not None:
                ctx.state = self._states[spec.id]
                try:
                    spec.destroy(ctx)
                except Exception:
                    log.exception("%s: destroy hook of operator %s raised", getattr(ctx, "core", "?"), spec.name)
        ctx.state = None

    def operator(self, op_id: int, name: str, **kw) -> Callable[[Callable], Callable]:
        """Decorator form of :meth:`register`."""
        def deco(fn: Callable) -> Callable:
            self.register(op_id, name, fn, **kw)
            return fn
        return deco

    def defaults(self, **kw) -> "RegistryDefaults":
        """This registry, registering with ``kw`` as default keyword arguments."""
        return RegistryDefaults(self, kw)

    def get(self, op_id: int) -> OperatorSpec:
        """Raises UnknownOperator."""
        try:
            return self._ops[op_id]
        except KeyError:
            raise errors.UnknownOperator(f"no operator 0x{op_id:04x} in this firmware") from None

    def table(self) -> list[dict]:
        return [s.describe() for s in sorted(self._ops.values(), key=lambda s: s.id)]

    def __len__(self) -> int:
        return len(self._ops)


class RegistryDefaults:
    """``registry.defaults(inputs_writable=True).register(...)``: shared registration options."""

    def __init__(self, registry: Registry, kw: dict) -> None:
        self._registry, self._kw = registry, kw

    def register(self, *args, **kw) -> OperatorSpec:
        return self._registry.register(*args, **{**self._kw, **kw})

    def operator(self, op_id: int, name: str, **kw) -> Callable[[Callable], Callable]:
        return self._registry.operator(op_id, name, **{**self._kw, **kw})

    def bind(self, entry: OperatorEntry, fn: Callable, **kw) -> OperatorSpec:
        return self._registry.bind(entry, fn, **{**self._kw, **kw})

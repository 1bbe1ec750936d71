"""Explicit operator registration: a firmware image is a Registry of operators.

Operators are registered by a call (or decorator) with their command id, name,
parameter schema and buffer counts; nothing is discovered by introspection::

    registry = Registry()

    @registry.operator(0x1400, "my_scale", inputs=1, outputs=1,
                       params={"factor": {"type": "float", "default": 2.0}})
    def my_scale(ctx, inputs, outputs, factor):
        ...

``inputs``/``outputs`` are lists of numpy uint8 arrays over the DDR (inputs
read-only). An operator returns a small dict (sent back as the task result)
or None. Raising a ``protocol.errors.VdspError`` is an error reply; any other
exception is a crash of the firmware, like a DSP exception.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from protocol import errors, opids, schema


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


def _count(value: int | tuple[int, int]) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


class Registry:
    """The operator table of one firmware image, keyed by command id."""

    def __init__(self) -> None:
        self._ops: dict[int, OperatorSpec] = {}

    def register(self, op_id: int, name: str, fn: Callable, *, params: dict | None = None,
                 inputs: int | tuple[int, int] = 0, outputs: int | tuple[int, int] = 0,
                 doc: str = "", inputs_writable: bool = False) -> OperatorSpec:
        """Add one operator. Raises ValueError for a duplicate or out-of-range id or bad schema."""
        opids.range_of(op_id)
        if op_id in self._ops:
            raise ValueError(f"operator id 0x{op_id:04x} registered twice ({self._ops[op_id].name}, {name})")
        if any(s.name == name for s in self._ops.values()):
            raise ValueError(f"operator name {name!r} registered twice")
        spec = OperatorSpec(op_id, name, fn, schema.check_schema(dict(params or {})), _count(inputs),
                            _count(outputs), doc or (fn.__doc__ or "").strip().split("\n")[0], inputs_writable)
        self._ops[op_id] = spec
        return spec

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

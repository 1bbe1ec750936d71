"""One operator, declared once, as data: the contract entry both sides derive from.

An :class:`OperatorEntry` holds what the ARM SDK and the firmware must agree on: the command
id (written here only), the registry (wire) name, the J5 sample name, the buffer counts (and,
for typed stubs, the buffers' names), the typed parameters (a :mod:`protocol.schema` schema:
type, default, range, choices, doc), a one-line doc and, for a CV operator, its ARM-side form
(:class:`~protocol.contract.cv_form.CvForm`). From it:

- the firmware binds a kernel (``Registry.bind(entry, fn)``): the parameter schema is
  never written again on the DSP side;
- the operator table (READY, image manifests, ``vdsp status``) is :meth:`OperatorEntry.describe`;
- typed Python stubs (``vdsp firmware stubs``, ``arm_side.stubgen``), the ARM CV functions, the
  C header, the ids modules and the docs' operator tables are generated from entries
  (``python -m vdsp_sim.regen``), or from a table read back with :meth:`OperatorEntry.of_table`.

Pure data, no I/O. The stock catalogs are :mod:`cv_ops`, :mod:`nn_ops`, :mod:`pointcloud_ops`
and :mod:`framework_ops`.
"""
from __future__ import annotations

import dataclasses
import keyword
import re
from typing import Any, Mapping

from protocol import opids, schema
from protocol.contract.cv_form import CvForm

Count = tuple[int, int]


def _count(value: int | tuple[int, int] | list[int]) -> Count:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


@dataclasses.dataclass(frozen=True)
class OperatorEntry:
    """The declaration of one operator (see the module docstring)."""

    id: int
    name: str                           # registry / wire name, e.g. "cv.gaussianBlur"
    params: Mapping[str, dict]          # protocol.schema schema, in declaration order
    inputs: Count = (0, 0)              # (min, max) input buffers
    outputs: Count = (0, 0)
    doc: str = ""                       # one line
    j5: str = ""                        # the J5 sample's name, e.g. "gaussianBlur" ("" if none)
    py_name: str = ""                   # Python function name of the stub ("" = from ``name``)
    buffer_names: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())   # names of fixed-count buffers
    form: CvForm | None = None          # a CV operator's ARM-side form (not on the wire)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", _count(self.inputs))
        object.__setattr__(self, "outputs", _count(self.outputs))

    @classmethod
    def declare(cls, op_id: int, name: str, params: Mapping[str, dict] | None = None, *,
                inputs: int | Count = 0, outputs: int | Count = 0, doc: str = "", j5: str = "",
                py_name: str = "", buffers: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
                form: CvForm | None = None) -> "OperatorEntry":
        """A checked entry. Raises ValueError for an out-of-range id, bad counts, a bad schema or a
        form naming parameters the entry does not declare."""
        opids.range_of(op_id)
        entry = cls(op_id, name, schema.check_schema(dict(params or {})), _count(inputs), _count(outputs), doc,
                    j5, py_name, buffers, form)
        for what, (lo, hi) in (("inputs", entry.inputs), ("outputs", entry.outputs)):
            if not 0 <= lo <= hi:
                raise ValueError(f"operator {name}: {what} count {lo}..{hi} is not a range")
        for names, (lo, hi) in zip(buffers, (entry.inputs, entry.outputs)):
            if names and not (lo == hi == len(names)):
                raise ValueError(f"operator {name}: buffer names {names} need exactly {len(names)} buffers")
        if form is not None:
            unknown = [n for n in form.order if n not in entry.params]
            if unknown:
                raise ValueError(f"operator {name}: form orders undeclared parameters {unknown}")
        return entry

    @classmethod
    def of_table(cls, row: Mapping[str, Any]) -> "OperatorEntry":
        """An entry from a row of an operator table (READY, a firmware manifest). Raises ValueError."""
        try:
            return cls.declare(int(row["id"]), str(row["name"]), dict(row.get("params") or {}),
                               inputs=_count(row.get("inputs", 0)), outputs=_count(row.get("outputs", 0)),
                               doc=str(row.get("doc", "")))
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"not an operator table row: {exc}") from exc

    def describe(self) -> dict:
        """The entry as a row of the operator table (READY, manifests, ``vdsp status``)."""
        return {"id": self.id, "name": self.name, "params": dict(self.params),
                "inputs": list(self.inputs), "outputs": list(self.outputs), "doc": self.doc}

    @property
    def function_name(self) -> str:
        """The stub's Python name: ``py_name``, else ``name`` in snake case ("cv.gaussianBlur" ->
        "cv_gaussian_blur"), suffixed with ``_`` when it is a keyword."""
        if self.py_name:
            return self.py_name
        snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", self.name).lower()
        snake = re.sub(r"\W+", "_", snake).strip("_") or f"op_{self.id:04x}"
        if snake[0].isdigit():
            snake = "op_" + snake
        return snake + "_" if keyword.iskeyword(snake) else snake


def catalog(*entries: OperatorEntry) -> dict[int, OperatorEntry]:
    """Entries by id. Raises ValueError for a duplicate id or name."""
    out: dict[int, OperatorEntry] = {}
    for e in entries:
        if e.id in out or any(o.name == e.name for o in out.values()):
            raise ValueError(f"operator 0x{e.id:04x} {e.name}: id or name declared twice")
        out[e.id] = e
    return out

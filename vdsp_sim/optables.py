"""The docs' operator tables, rendered from the contract entries (``python -m vdsp_sim.regen``
writes them between ``generated`` markers; see :mod:`vdsp_sim.regen`).

- :func:`cv_operators`: docs/cv.md's table (id, name, ARM function, formats, doc, and the
  parameters in the order the ARM function takes them);
- :func:`cv_images`: PROTOCOL.md §7.5's table (each CV operator's images);
- :func:`catalogs`: the README's table of the stock catalogs (id ranges, counts, names);
- :func:`cv_shape_rules`: docs/custom_ops.md's table of the ARM side's numpy-mode shape rules.

Pure: entries in, markdown out.
"""
from __future__ import annotations

from typing import Any, Iterable

from protocol.contract import cv_ops, framework_ops, nn_ops, pointcloud_ops
from protocol.contract.operator import OperatorEntry

_IMAGE = "any"      # a CV operator's parameters of type any are its images (PROTOCOL.md §7.5)


def _num(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e5:
            return str(int(value))
        return f"{value:g}".replace("e+0", "e").replace("e+", "e")
    return str(value)


def _value(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_num(v) for v in value)
    return _num(value)


def param(name: str, spec: dict) -> str:
    """One declared parameter as the table shows it: `name`, its choices or range, odd, a list's
    length, and (its default) or (required)."""
    bits = [f"`{name}`"]
    if spec["type"].endswith("_list"):
        bits.append(f"{spec['len']} values" if "len" in spec else "list")
    if "choices" in spec:
        bits.append("/".join(_num(c) for c in spec["choices"]))
    elif "min" in spec and "max" in spec:
        bits.append(f"{_num(spec['min'])}..{_num(spec['max'])}")
    elif "min" in spec:
        bits.append(f"≥ {_num(spec['min'])}")
    elif "max" in spec:
        bits.append(f"≤ {_num(spec['max'])}")
    if spec.get("odd"):
        bits.append("odd")
    if "default" not in spec:
        bits.append("(required)")
    else:
        bits.append("(none)" if spec["default"] is None else f"({_value(spec['default'])})")
    return " ".join(bits)


def _images(entry: OperatorEntry) -> tuple[list[str], list[str]]:
    """(input images, output images) in declaration order: the destination is ``dst``."""
    names = [n for n, spec in entry.params.items() if spec["type"] == _IMAGE]
    return [n for n in names if n != "dst"], [n for n in names if n == "dst"]


def _table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def cv_operators() -> str:
    """docs/cv.md's operator table."""
    rows = []
    for op_id in sorted(cv_ops.ENTRIES):
        e = cv_ops.ENTRIES[op_id]
        assert e.form is not None
        ins, outs = _images(e)
        fn = e.function_name if ins == ["src"] else f"{e.function_name}(soc, {', '.join(ins + outs)})"
        name = e.j5 or f"{e.name.removeprefix('cv.')} (not in J5)"
        order = e.form.order or [n for n, s in e.params.items() if s["type"] != _IMAGE]
        params = ", ".join(param(n, e.params[n]) for n in order)
        if e.form.result:
            params += f"; returns `{e.form.result}`"
        rows.append([f"0x{op_id:04x}", name, f"`{fn}`", e.form.formats, e.doc, params])
    return _table(["id", "name (J5)", "ARM function", "formats", "what it does", "parameters (default)"], rows)


def cv_images() -> str:
    """PROTOCOL.md §7.5's table: the images of each CV operator."""
    rows = []
    for op_id in sorted(cv_ops.ENTRIES):
        e = cv_ops.ENTRIES[op_id]
        ins, outs = _images(e)
        rows.append([f"`0x{op_id:04x}`", f"`{e.name}`", ", ".join(f"`{n}`" for n in ins),
                     ", ".join(f"`{n}`" for n in outs)])
    return _table(["Id", "Operator", "Input images, in `inputs` order", "Output images"], rows)


CATALOGS = ((framework_ops, "framework (in every image)", ""), (cv_ops, "CV", "docs/cv.md"),
            (nn_ops, "NN", "docs/nn.md"), (pointcloud_ops, "point clouds", "docs/pointcloud.md"))


def catalogs() -> str:
    """The README's table of the stock operator catalogs."""
    rows = []
    for mod, title, doc in CATALOGS:
        ids = sorted(mod.ENTRIES)
        names = ", ".join(f"`{mod.ENTRIES[i].name}`" for i in ids)
        where = f" ([{doc}]({doc}))" if doc else ""
        rows.append([title + where, f"0x{ids[0]:04x}–0x{ids[-1]:04x}", str(len(ids)), names])
    return _table(["catalog", "command ids", "operators", "names"], rows)


def cv_shape_rules() -> str:
    """docs/custom_ops.md's table: the rules a CV entry's ``shape`` may name (arm_side.cv.shapes)."""
    from arm_side.cv.shapes import RULES
    rows = [[f"`{name}`", rule.summary, ", ".join(f"`{k}`" for k, _ in rule.extra)] for name, rule in RULES.items()]
    return _table(["shape", "numpy mode's destination", "numpy-only keywords"], rows)

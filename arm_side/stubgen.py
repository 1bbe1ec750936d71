"""Typed Python stubs from operator declarations, as FastRPC makes them from an IDL.

:func:`generate` turns operator entries (``protocol.contract.operator.OperatorEntry``: the
stock catalogs, or the operator table of any firmware image read back with
``OperatorEntry.of_table``) into the source of a Python module with one real, typed
function per operator::

    def saturate_add(soc: Submitter[T], src: Buffer, dst: Buffer, *, delta: int,
                     options: TaskOptions | None = None, **task: Unpack[TaskKw]) -> T:
        \"\"\"out[i] = clip(in[i] + delta, 0, 255) for every byte. ...\"\"\"

Parameter types follow the schema: int, float, bool, str, bytes; the ``choices`` of a str
become a ``Literal`` (those of an int are listed in the docstring); int_list / float_list a
``Sequence``; ``any`` (descriptors) ``Any``. A parameter with a default is optional with that
default; one without is a required keyword.

Buffers: a fixed count gets one argument per buffer (named by the entry, else ``src`` /
``dst``, ``src0``, ``src1`` ...), a range one sequence (``inputs`` / ``outputs``).

The stock modules in ``arm_side/stubs/`` are this generator's output, checked in
(``python -m vdsp_sim.regen`` rewrites them with everything else derived from the entries; a
test checks they are current); ``vdsp firmware stubs IMAGE -o FILE.py`` writes one for an
image. Pure: text in, text out.
"""
from __future__ import annotations

import keyword
import textwrap
from pathlib import Path
from typing import Any, Iterable

from protocol import task_options
from protocol.contract.operator import OperatorEntry

_PY = {"int": "int", "float": "float", "bool": "bool", "str": "str", "bytes": "bytes",
       "int_list": "Sequence[int]", "float_list": "Sequence[float]", "any": "Any"}
_CONTROL = ("options", "task", *task_options.FIELDS)    # the task's, not the operator's
_RESERVED = {"soc", "params", *_CONTROL}


def _ident(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "_"
    if out[0].isdigit():
        out = "_" + out
    return out + "_" if keyword.iskeyword(out) else out


def _doc_text(text: str) -> str:
    """Text safe inside a triple-quoted docstring."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _literal(value: Any) -> str:
    """A Python literal for a default (lists as tuples: defaults must not be mutable)."""
    if isinstance(value, list):
        inner = ", ".join(_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def _annotation(spec: dict) -> str:
    kind = spec["type"]
    choices = spec.get("choices")
    if choices and kind == "str" and all(isinstance(c, str) for c in choices):
        ann = "Literal[" + ", ".join(repr(c) for c in choices) + "]"
    else:
        ann = _PY[kind]
    if "default" in spec and spec["default"] is None:
        ann += " | None"
    return ann


def _describe_param(name: str, spec: dict) -> str:
    bits = [spec["type"]]
    if "len" in spec:
        bits.append(f"{spec['len']} values")
    if "min" in spec or "max" in spec:
        bits.append(f"{spec.get('min', '')}..{spec.get('max', '')}")
    if spec.get("odd"):
        bits.append("odd")
    if "choices" in spec:
        bits.append("one of " + ", ".join(repr(c) for c in spec["choices"]))
    bits.append(f"default {spec['default']!r}" if "default" in spec else "required")
    doc = f": {spec['doc']}" if spec.get("doc") else ""
    return f"{name} ({'; '.join(bits)}){doc}"


def _buffers(entry: OperatorEntry, taken: set[str]) -> tuple[list[tuple[str, str]], str, str]:
    """(arguments, input list expression, output list expression)."""
    args: list[tuple[str, str]] = []
    lists = []
    for names, (lo, hi), base, seq in zip(entry.buffer_names, (entry.inputs, entry.outputs), ("src", "dst"),
                                          ("inputs", "outputs")):
        if lo != hi:
            arg = seq if seq not in taken else seq + "_buf"
            args.append((arg, "Sequence[Buffer]"))
            lists.append(f"list({arg})")
            continue
        own = list(names) or ([base] if hi == 1 else [f"{base}{i}" for i in range(hi)])
        own = [_ident(n) + ("_buf" if _ident(n) in taken else "") for n in own]
        args += [(n, "Buffer") for n in own]
        lists.append("[" + ", ".join(own) + "]")
    return args, lists[0], lists[1]


def _sig_line(arg: str) -> str:
    """One argument of a signature, its Literal wrapped when the line would be long."""
    if len(arg) <= 110 or "Literal[" not in arg:
        return f"        {arg},"
    head, rest = arg.split("Literal[", 1)
    choices, tail = rest.split("]", 1)
    body = textwrap.wrap(choices, 100, break_long_words=False, break_on_hyphens=False)
    return "\n".join([f"        {head}Literal[", *(f"            {line}" for line in body), f"        ]{tail},"])


def function(entry: OperatorEntry) -> str:
    """The source of one operator's stub function."""
    py_params = {name: _ident(name) for name in entry.params}
    py_params = {name: (py + "_" if py in _RESERVED else py) for name, py in py_params.items()}
    buf_args, ins, outs = _buffers(entry, set(py_params.values()) | _RESERVED)
    sig = ["soc: Submitter[T]"] + [f"{n}: {t}" for n, t in buf_args] + ["*"]
    wire, optional = [], []
    for name, spec in entry.params.items():
        py = py_params[name]
        ann = _annotation(spec)
        sig.append(f"{py}: {ann} = {_literal(spec['default'])}" if "default" in spec else f"{py}: {ann}")
        value = f"list({py})" if spec["type"] in ("int_list", "float_list") else py
        if "default" in spec and spec["default"] is None:
            optional.append((name, py, value))
        else:
            wire.append(f"{name!r}: {value}")
    sig += ["options: TaskOptions | None = None", "**task: Unpack[TaskKw]"]
    doc = [_doc_text(entry.doc or entry.name), ""]
    n_in = f"{entry.inputs[0]}" if entry.inputs[0] == entry.inputs[1] else f"{entry.inputs[0]}..{entry.inputs[1]}"
    n_out = f"{entry.outputs[0]}" if entry.outputs[0] == entry.outputs[1] else \
        f"{entry.outputs[0]}..{entry.outputs[1]}"
    doc += textwrap.wrap(f"Operator 0x{entry.id:04x} ``{_doc_text(entry.name)}``, buffers: {n_in} in, {n_out} out. "
                         "Returns the submitted task (its values come from ``wait()``); ``options`` (a "
                         "TaskOptions) or its fields as keywords (``core``, ``priority``, ``custom_id``, "
                         "``timeout_ms``) as ``Soc.rpc``.", 100)
    if entry.params:
        doc += ["", "Parameters:", ""]
        for name, spec in entry.params.items():
            doc += textwrap.wrap(_doc_text(_describe_param(py_params[name], spec)), 100, initial_indent="- ",
                                 subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
    body = "\n".join(("    " + line).rstrip() for line in doc)
    lines = [f"def {entry.function_name}(", *(_sig_line(s) for s in sig), ") -> T:",
             f'    """{body.strip()}\n    """']
    if len(", ".join(wire)) <= 80:
        lines.append("    params: dict[str, Any] = {" + ", ".join(wire) + "}")
    else:
        lines += ["    params: dict[str, Any] = {", *(f"        {w}," for w in wire), "    }"]
    for name, py, value in optional:
        lines += [f"    if {py} is not None:", f"        params[{name!r}] = {value}"]
    lines.append(f"    return soc.rpc(0x{entry.id:04x}, {ins}, {outs}, params, options=options, **task)")
    return "\n".join(lines) + "\n"


def generate(entries: Iterable[OperatorEntry], title: str) -> str:
    """The source of a typed stub module for ``entries`` (by id); ``title`` opens its docstring.
    Raises ValueError when two operators would get the same function name."""
    entries = sorted(entries, key=lambda e: e.id)
    names = [e.function_name for e in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"operators would share the stub name(s) {', '.join(twice)}")
    head = (f'"""{_doc_text(title)}\n\nGenerated from the operators\' declarations by arm_side.stubgen; do not edit.\n'
            'Each function submits its operator and returns the task (see arm_side.stubs).\n"""\n'
            "from __future__ import annotations\n\n"
            "from typing import Any, Literal, Sequence, TypeVar, Unpack  # noqa: F401\n\n"
            "from protocol.task_options import TaskKw, TaskOptions\n"
            "from arm_side.stubs import Buffer, Submitter  # noqa: F401\n\n"
            'T = TypeVar("T")\n\n'
            "__all__ = [\n" + "\n".join(textwrap.wrap(", ".join(repr(n) for n in names) + ",", 110,
                                                      initial_indent="    ", subsequent_indent="    ",
                                                      break_long_words=False)) + "\n]\n")
    return head + "".join("\n\n" + function(e) for e in entries)


def from_table(table: Iterable[dict], title: str) -> str:
    """:func:`generate` for an operator table (READY, a firmware manifest). Raises ValueError."""
    return generate([OperatorEntry.of_table(row) for row in table], title)


# --- the ARM CV functions (arm_side/cv/functions.py) -------------------------------------------
# The same declarations with the ARM side's knowledge (arm_side.cv.ops.OPERATORS): each function
# has two typed overloads, cv.Image buffers and numpy arrays (OpenCV's positional order), and
# calls arm_side.cv.ops.call_named. OpenCV's keyword names (borderType=...) go through **opencv.

_ARM_TYPES = {"integer": "int", "real": "float", "boolean": "bool", "text": "str", "ksize": "int | Sequence[int]",
              "anchor": "Sequence[int] | None", "rect": "Sequence[int]",
              "values_per_channel": "int | Sequence[int] | None", "floats": "ArrayLike", "kernel2d": "ArrayLike",
              "matrix": "ArrayLike", "ints": "ArrayLike", "morph_kernel": "ArrayLike | None", "border": "int | str",
              "interpolation": "int | str", "threshold_type": "int | str", "threshold_method": "int | str",
              "morph_shape": "int | str", "rotate_code": "int | str", "color_code": "int | str"}
_ARM_CONTROL = {"soc": "Soc | AsyncSoc", "options": "TaskOptions | None",
                **{name: task_options.keyword_type(name) for name in task_options.FIELDS}, "wait": "bool",
                "format": "str | None", "ddepth": "int", "sdepth": "int", "dsize": "Sequence[int] | None",
                "fx": "float", "fy": "float"}


def _arm_overload(spec: Any, sig: Any, numpy: bool, required: Any) -> list[str]:
    import inspect
    converters = {p.name: p.convert.__qualname__.split(".")[0] for p in spec.params}
    image = "np.ndarray" if numpy else "Image"
    out, star = [], False
    for name, p in sig.parameters.items():
        if p.kind == inspect.Parameter.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        if name in spec.inputs:
            ann = image
        elif name == "dst":
            ann = f"{image} | None"
        else:
            ann = _ARM_CONTROL.get(name) or _ARM_TYPES[converters[name]]
        if p.default is inspect.Parameter.empty:
            out.append(f"{name}: {ann}")
        elif p.default is required or (p.default is None and "None" not in ann):
            out.append(f"{name}: {ann} = ...")
        else:
            out.append(f"{name}: {ann} = {_literal(p.default)}")
    out.append("**opencv: Any")
    return out


def cv_functions() -> str:
    """The source of arm_side/cv/functions.py."""
    from protocol.contract import cv_ops
    from arm_side.cv import ops
    parts = ['"""The CV operators as typed functions: cv.Image buffers or numpy arrays (see arm_side.cv.ops).\n\n'
             "Generated by python -m vdsp_sim.regen from the contract entries (protocol.contract.cv_ops,\n"
             'their parameters and ARM forms) through arm_side.cv.ops.OPERATORS; do not edit.\n"""\n'
             "from __future__ import annotations\n\n"
             "from typing import TYPE_CHECKING, Any, Sequence, overload\n\n"
             "import numpy as np\nfrom numpy.typing import ArrayLike\n\n"
             "from protocol.task_options import TaskOptions\n"
             "from arm_side.cv.image import Image\n"
             "from arm_side.cv.ops import call_named\n\n"
             "if TYPE_CHECKING:\n    from arm_side.soc import AsyncSoc, Soc\n\n"
             "__all__ = [\n" + "\n".join(textwrap.wrap(", ".join(repr(o.name) for o in ops.OPERATORS) + ",", 110,
                                                      initial_indent="    ", subsequent_indent="    ",
                                                      break_long_words=False)) + "\n]\n"]
    for spec in ops.OPERATORS:
        entry = cv_ops.ENTRIES[spec.op_id]
        sigs = ops.SIGNATURES[spec.name]
        text = []
        for numpy in (False, True):
            args = _arm_overload(spec, sigs[numpy], numpy, ops.REQUIRED)
            text += ["@overload", f"def {spec.name}(", *(f"        {a}," for a in args), ") -> Any: ..."]
        numpy_sig = str(sigs[1]).replace("(soc, ", f"{spec.name}(soc, ", 1)
        doc = textwrap.wrap(_doc_text(spec.doc), 100) + [""]
        doc += textwrap.wrap(f"Operator 0x{spec.op_id:04x} ({_doc_text(entry.name)}), on cv.Image buffers, or on "
                             "numpy arrays with OpenCV's positional order:", 100)
        doc += ["", *textwrap.wrap(_doc_text(numpy_sig), 96, initial_indent="    ", subsequent_indent="        ",
                                   break_long_words=False, break_on_hyphens=False)]
        declared = [(p.name, entry.params[p.name]) for p in spec.params if p.name in entry.params]
        if declared:
            doc += ["", "Declared parameters (checked again by the firmware):", ""]
            for name, pspec in declared:
                doc += textwrap.wrap(_doc_text(_describe_param(name, pspec)), 100, initial_indent="- ",
                                     subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
        doc += ["", "See the module documentation of arm_side.cv.ops."]
        body = "\n".join(("    " + line).rstrip() for line in doc)
        text += [f"def {spec.name}(*args: Any, **kw: Any) -> Any:", f'    """{body.strip()}\n    """',
                 f"    return call_named({spec.name!r}, args, kw)"]
        parts.append("\n\n" + "\n".join(text) + "\n")
    return "".join(parts)


# --- the stock modules ------------------------------------------------------------------------

STUBS_DIR = Path(__file__).resolve().parent / "stubs"


def stock_sources() -> dict[Path, str]:
    """The generated stock modules: path -> source (the stubs, and the ARM CV functions)."""
    from protocol.contract import cv_ops, framework_ops, nn_ops, pointcloud_ops
    out = {}
    for mod, what in ((framework_ops, "framework operators (0x0000-0x03ff, in every image)"),
                      (cv_ops, "CV operators (0x0800-0x0fff)"), (nn_ops, "NN operators (0x0400-0x05ff)"),
                      (pointcloud_ops, "point-cloud preprocessing operators (0x0600-0x06ff)")):
        name = mod.__name__.rsplit(".", 1)[1].removesuffix("_ops")
        out[STUBS_DIR / f"{name}.py"] = generate(mod.ENTRIES.values(), f"Typed stubs of the stock {what}.")
    out[STUBS_DIR.parent / "cv" / "functions.py"] = cv_functions()
    return out

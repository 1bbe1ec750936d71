"""The C face of the operator contract: operator ids and one parameter struct per operator.

:func:`header` turns the stock operator entries (``protocol.contract``: framework, CV, NN and
point-cloud catalogs) into ``include/hb_dsp_ops.h``: ``HB_DSP_OP_<NAME>`` ids, and for each
operator with parameters a struct ``hbDSP<Name>Param`` with an initializer macro
``HB_DSP_INITIALIZE_<NAME>_PARAM(&p)`` that sets the declared defaults. :func:`cdef` is the same
declarations for cffi, and :data:`OPERATORS` what the bridge needs to turn a struct back into
the operator's parameters (``arm_side.capi.bridge``). ``python -m vdsp_sim.regen`` rewrites
the header with everything else derived from the entries; a test checks it is current.

C types of the schema types (``protocol.schema``):

============  ==========================================================================
int           ``int64_t``
float         ``double``
bool          ``int32_t`` (0 or 1)
str           ``char const *``; NULL: not sent (the operator's default, or "required")
int_list      ``int64_t name[len]`` with a declared length, else ``int64_t const *name``
              and ``int32_t name_count`` (NULL: not sent)
float_list    the same with ``double``
any (image)   ``hbDSPImage``: format, width, height, stride, roi (format 0: not sent)
any (tensor)  ``hbDNNTensorProperties`` (numDimensions of validShape 0: not sent)
============  ==========================================================================

Pure: text in, text out.
"""
from __future__ import annotations

import dataclasses
import functools
import textwrap
from pathlib import Path
from typing import Iterable

from protocol.contract import cv_ops, framework_ops, image_formats, nn_ops, pointcloud_ops
from protocol.contract.operator import OperatorEntry

HEADER = Path(__file__).resolve().parent / "include" / "hb_dsp_ops.h"
CATALOGS = (framework_ops, cv_ops, nn_ops, pointcloud_ops)

# C and C++ keywords a parameter name must not be (suffixed with "_")
_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires restrict return short signed sizeof static static_assert static_cast struct switch
template this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq _Bool _Complex _Imaginary
""".split())
_SCALAR_C = {"int": "int64_t", "float": "double", "bool": "int32_t", "str": "char const *"}
_LIST_C = {"int_list": "int64_t", "float_list": "double"}
IMAGE_FORMATS = {name: i for i, name in enumerate(image_formats.FORMATS, start=1)}   # 0: no image


@dataclasses.dataclass(frozen=True)
class Field:
    """One parameter as a struct member: ``kind`` is a schema type, or ``image`` / ``tensor``
    for an ``any`` descriptor; ``length`` the fixed length of a list (None: pointer + count)."""
    param: str
    cname: str
    kind: str
    length: int | None = None
    spec: dict = dataclasses.field(default_factory=dict, compare=False)

    @property
    def count_name(self) -> str:
        return self.cname + "_count"


@dataclasses.dataclass(frozen=True)
class OpLayout:
    """An operator's C names and fields (``struct`` "" when it has no parameters)."""
    id: int
    name: str
    macro: str
    struct: str
    init_macro: str
    fields: tuple[Field, ...]

    @functools.cached_property
    def pointers(self) -> tuple[Field, ...]:
        """The members that point at data (strings, lists without a fixed length)."""
        return tuple(f for f in self.fields if f.kind == "str" or (f.kind in _LIST_C and f.length is None))


def _camel(snake: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_") if part)


def _any_kind(entry: OperatorEntry, name: str) -> str:
    """What an ``any`` parameter carries: the CV catalog's are image descriptors, the NN
    catalog's tensor descriptors (``protocol.contract.cv_ops`` / ``nn_ops``)."""
    if cv_ops.ENTRIES.get(entry.id) is entry:
        return "image"
    if nn_ops.ENTRIES.get(entry.id) is entry:
        return "tensor"
    raise ValueError(f"operator {entry.name}: parameter {name!r} of type any is neither an image (CV catalog) nor "
                     "a tensor (NN catalog) descriptor: the C face has no struct member for it")


def layout(entry: OperatorEntry) -> OpLayout:
    """The C names of ``entry``. Raises ValueError for a parameter the C face cannot express."""
    base = entry.function_name
    fields = []
    for name, spec in entry.params.items():
        cname = name if name.isidentifier() and name not in _KEYWORDS else (
            "".join(c if c.isalnum() or c == "_" else "_" for c in name) + "_")
        kind = spec["type"]
        if kind == "any":
            kind = _any_kind(entry, name)
        length = spec.get("len") if kind in _LIST_C else None
        if kind in _LIST_C and length is None and isinstance(spec.get("default"), list):
            raise ValueError(f"operator {entry.name}: list {name!r} without a fixed length has a list default")
        fields.append(Field(name, cname, kind, length, dict(spec)))
    names = [f.cname for f in fields] + [f.count_name for f in fields if f.kind in _LIST_C and f.length is None]
    if len(set(names)) != len(names):
        raise ValueError(f"operator {entry.name}: two parameters get the same C member name")
    struct = f"hbDSP{_camel(base)}Param" if fields else ""
    return OpLayout(entry.id, entry.name, f"HB_DSP_OP_{base.upper()}", struct,
                    f"HB_DSP_INITIALIZE_{base.upper()}_PARAM" if fields else "", tuple(fields))


def stock_entries() -> list[OperatorEntry]:
    return sorted((e for mod in CATALOGS for e in mod.ENTRIES.values()), key=lambda e: e.id)


OPERATORS: dict[int, OpLayout] = {e.id: layout(e) for e in stock_entries()}


def _comment(text: str) -> str:
    return text.replace("*/", "* /")


def _c_literal(kind: str, value) -> str:
    if kind == "str":
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if kind in ("bool",):
        return "1" if value else "0"
    if kind in ("float", "float_list"):
        text = repr(float(value))
        return text if ("." in text or "e" in text or "inf" in text or "nan" in text) else text + ".0"
    return str(int(value))


def _member(f: Field) -> list[str]:
    if f.kind in _SCALAR_C:
        ctype = _SCALAR_C[f.kind]
        return [f"{ctype}{'' if ctype.endswith('*') else ' '}{f.cname};"]
    if f.kind in _LIST_C:
        if f.length is not None:
            return [f"{_LIST_C[f.kind]} {f.cname}[{f.length}];"]
        return [f"{_LIST_C[f.kind]} const *{f.cname};", f"int32_t {f.count_name};"]
    return [f"{'hbDSPImage' if f.kind == 'image' else 'hbDNNTensorProperties'} {f.cname};"]


def _describe(f: Field) -> str:
    spec = f.spec
    bits = []
    if spec.get("doc"):
        bits.append(spec["doc"])
    if "min" in spec or "max" in spec:
        bits.append(f"{spec.get('min', '')}..{spec.get('max', '')}")
    if spec.get("odd"):
        bits.append("odd")
    if "choices" in spec:
        bits.append("one of " + ", ".join(f'"{c}"' if isinstance(c, str) else str(c) for c in spec["choices"]))
    if "default" in spec:
        d = spec["default"]
        if d is None:
            bits.append("default: not sent")
        elif isinstance(d, list):
            bits.append("default {" + ", ".join(_c_literal(f.kind, v) for v in d) + "}")
        else:
            bits.append(f"default {_c_literal(f.kind, d)}")
    else:
        bits.append("required")
    if f.kind in _LIST_C and f.length is None:
        bits.append(f"{f.count_name} values; NULL: not sent")
    elif f.kind == "str":
        bits.append("NULL: not sent")
    elif f.kind == "image":
        bits.append("format 0: not sent")
    elif f.kind == "tensor":
        bits.append("validShape.numDimensions 0: not sent")
    return "; ".join(bits)


def _init(op: OpLayout) -> list[str]:
    sets = []
    for f in op.fields:
        default = f.spec.get("default")
        if default is None:
            continue
        if f.kind in _LIST_C and f.length is not None:
            sets += [f"(param)->{f.cname}[{i}] = {_c_literal(f.kind, v)};" for i, v in enumerate(default)]
        elif f.kind in _SCALAR_C:
            sets.append(f"(param)->{f.cname} = {_c_literal(f.kind, default)};")
    body = ["memset((param), 0, sizeof(*(param)));", *sets]
    head = f"#define {op.init_macro}(param)"
    width = max([len(line) + 4 for line in body] + [len(head)])
    lines = [head.ljust(width) + " \\", "  do {".ljust(width) + " \\"]
    lines += [f"    {line}".ljust(width) + " \\" for line in body]
    lines.append("  } while (0)")
    return lines


_IMAGE_TYPES = """\
typedef enum {
  HB_DSP_IMAGE_NONE = 0, /* no image: the parameter is not sent */
%s
} hbDSPImageFormat;

/* A region of interest, inclusive: the operator sees only this rectangle. */
typedef struct {
  int32_t left;
  int32_t top;
  int32_t right;
  int32_t bottom;
} hbDSPRoi;

/* An image in shared memory, as the CV operators take it (see docs/cv.md for the layouts). */
typedef struct {
  int32_t format; /* hbDSPImageFormat */
  int32_t width;
  int32_t height;
  int32_t stride; /* bytes per row; 0: the smallest for the width */
  int32_t hasRoi; /* non-zero: roi applies */
  hbDSPRoi roi;
} hbDSPImage;
"""


def _structs(ops: Iterable[OpLayout], comments: bool) -> list[str]:
    out = []
    for op in ops:
        if not op.struct:
            continue
        if comments:
            entry = _ENTRIES[op.id]
            n_in = f"{entry.inputs[0]}" if entry.inputs[0] == entry.inputs[1] else "%d..%d" % entry.inputs
            n_out = f"{entry.outputs[0]}" if entry.outputs[0] == entry.outputs[1] else "%d..%d" % entry.outputs
            head = f"0x{op.id:04x} {op.name}: {entry.doc or op.name} Buffers: {n_in} in, {n_out} out."
            out += ["", *textwrap.wrap(_comment(head), 100, initial_indent="/* ", subsequent_indent=" * ",
                                       break_long_words=False, break_on_hyphens=False)]
            out[-1] += " */"
        out.append("typedef struct {")
        for f in op.fields:
            members = _member(f)
            for i, m in enumerate(members):
                if comments and i == 0:
                    out += textwrap.wrap(f"{m} /* {_comment(_describe(f))} */", 110, initial_indent="  ",
                                         subsequent_indent="      ", break_long_words=False, break_on_hyphens=False)
                else:
                    out.append(f"  {m}")
        out.append(f"}} {op.struct};")
        if comments:
            out += _init(op)
    return out


_ENTRIES = {e.id: e for e in stock_entries()}


def header() -> str:
    """The text of include/hb_dsp_ops.h."""
    ops = [OPERATORS[i] for i in sorted(OPERATORS)]
    width = max(len(op.macro) for op in ops) + 15
    ids = [f"#define {op.macro} 0x{op.id:04x}".ljust(width) + f" /* {_comment(op.name)} */" for op in ops]
    formats = [f"  HB_DSP_IMAGE_{name} = {value}," for name, value in IMAGE_FORMATS.items()]
    parts = [
        "/*",
        " * hb_dsp_ops.h: the operators of the stock firmware, for hbDSPRpcV2 / hbDSPRpcV2Param.",
        " * Generated from the operator contract (protocol/contract) by python -m vdsp_sim.regen; do not edit.",
        " * Each operator with parameters has a struct hbDSP<Name>Param: initialize it with",
        " * HB_DSP_INITIALIZE_<NAME>_PARAM(&param) (the declared defaults), set what you need, and pass",
        " * it with sizeof(it) to hbDSPRpcV2Param. Ranges and choices are checked by the firmware.",
        " */",
        "#ifndef VDSP_HB_DSP_OPS_H_", "#define VDSP_HB_DSP_OPS_H_", "",
        "#include <stdint.h>", "#include <string.h>", "", '#include "hb_dnn.h"', "",
        "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
        "/* Operator ids (rpcCmd). */", *ids, "",
        _IMAGE_TYPES % "\n".join(formats).rstrip(","),
        *_structs(ops, comments=True), "",
        "#ifdef __cplusplus", "}", "#endif", "", "#endif /* VDSP_HB_DSP_OPS_H_ */", ""]
    return "\n".join(parts)


def cdef() -> str:
    """The declarations of the header for cffi (types only)."""
    formats = [f"  HB_DSP_IMAGE_{name} = {value}," for name, value in IMAGE_FORMATS.items()]
    text = _IMAGE_TYPES % "\n".join(formats).rstrip(",")
    lines = [line.split("/*")[0].rstrip() for line in text.splitlines()]
    return "\n".join(lines + _structs((OPERATORS[i] for i in sorted(OPERATORS)), comments=False)) + "\n"


def pointer_table() -> str:
    """C source (for the library's glue, not for programs): where each parameter struct points
    at data, so that a submission's key holds the strings and lists themselves (glue.c)."""
    rows = []
    for op in (OPERATORS[i] for i in sorted(OPERATORS)):
        for f in op.pointers:
            if f.kind == "str":
                rows.append(f"  {{0x{op.id:04x}, sizeof({op.struct}), offsetof({op.struct}, {f.cname}), 1, 0, 0}},")
            else:
                elem = "int64_t" if f.kind == "int_list" else "double"
                rows.append(f"  {{0x{op.id:04x}, sizeof({op.struct}), offsetof({op.struct}, {f.cname}), 2, "
                            f"offsetof({op.struct}, {f.count_name}), sizeof({elem})}},")
    return ("/* generated by arm_side.capi.opsgen.pointer_table(): the pointer members of the parameter structs */\n"
            "static struct vdsp_pointer_member const vdsp_pointer_members[] = {\n" + "\n".join(rows) + "\n};\n")

"""The C layout of an operator's parameters: one struct ``hbDSP<Name>Param`` per operator.

Both sides derive their C view of an operator from its contract entry here: the ARM side's
``hb_dsp_ops.h`` (``arm_side.capi.opsgen``) and a DSP C kernel's parameter header
(``dsp_side.ckernel``), so a kernel reads the very struct an ARM program fills.
The C types of the schema types are tabled in ``arm_side.capi.opsgen``. Pure: data in, text out.
"""
from __future__ import annotations

import dataclasses
import functools
import textwrap

from protocol.contract import cv_ops, nn_ops
from protocol.contract.operator import OperatorEntry

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


def struct_lines(entry: OperatorEntry, op: OpLayout, comments: bool) -> list[str]:
    """The C declaration of ``op``'s parameter struct (``entry`` its declaration), with its doc
    comments and initializer macro when ``comments``; [] for an operator without parameters."""
    if not op.struct:
        return []
    out: list[str] = []
    if comments:
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

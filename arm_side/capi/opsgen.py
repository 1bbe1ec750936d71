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

from pathlib import Path
from typing import Callable, Iterable

from arm_side.capi import packing
from protocol.contract import cv_ops, framework_ops, image_formats, nn_ops, pointcloud_ops
from protocol.contract.operator import OperatorEntry
from protocol.contract.c_layout import Field, OpLayout, _comment, layout, struct_lines

__all__ = ["Field", "OpLayout", "layout", "header", "cdef", "pointer_table", "OPERATORS", "IMAGE_FORMATS"]

HEADER = Path(__file__).resolve().parent / "include" / "hb_dsp_ops.h"
CATALOGS = (framework_ops, cv_ops, nn_ops, pointcloud_ops)
IMAGE_FORMATS = {name: i for i, name in enumerate(image_formats.FORMATS, start=1)}   # 0: no image


def stock_entries() -> list[OperatorEntry]:
    return sorted((e for mod in CATALOGS for e in mod.ENTRIES.values()), key=lambda e: e.id)


OPERATORS: dict[int, OpLayout] = {e.id: layout(e) for e in stock_entries()}

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
    return [line for op in ops for line in struct_lines(_ENTRIES[op.id], op, comments)]


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


# kinds of vdsp_param_member.kind (arm_side/capi/native/vdsp_hb.c reads the table by these values)
PARAM_KINDS = {"int": 1, "float": 2, "bool": 3, "int_list": 4, "float_list": 5, "str": 6, "image": 7, "tensor": 8}


def param_table() -> str:
    """C source for the native library (vdsp_hb.c): each member of each parameter struct, with
    the parameter it carries, so that C turns a struct into the operator's parameters as
    ``arm_side.capi.bridge`` does (its offset; a fixed list's length, or a pointer list's count)."""
    rows = []
    for op in (OPERATORS[i] for i in sorted(OPERATORS)):
        for f in op.fields:
            count = f"offsetof({op.struct}, {f.count_name})" if f in op.pointers and f.kind != "str" else "0"
            rows.append(f'  {{0x{op.id:04x}, sizeof({op.struct}), "{op.struct}", "{op.name}", "{f.param}", "{f.cname}", '
                        f"{PARAM_KINDS[f.kind]}, offsetof({op.struct}, {f.cname}), {f.length or 0}, {count}}},")
    formats = ", ".join(f'"{name}"' for name in IMAGE_FORMATS)
    counts = [f"  {{0x{op.id:04x}, {_ENTRIES[op.id].inputs[1]}, {_ENTRIES[op.id].outputs[1]}}},"
              for op in (OPERATORS[i] for i in sorted(OPERATORS)) if op.struct]
    return ("/* generated by arm_side.capi.opsgen.param_table(): the members of the parameter structs */\n"
            "static struct vdsp_param_member const vdsp_param_members[] = {\n" + "\n".join(rows) + "\n};\n"
            f"static char const *const vdsp_image_formats[] = {{NULL, {formats}}};\n"
            "/* the most input and output buffers of each operator with a struct (packed parameters: hbDSPRpcV2) */\n"
            "static struct vdsp_op_buffers const vdsp_op_buffers[] = {\n" + "\n".join(counts) + "\n};\n")


def packed(sizeof: Callable[[str], int]) -> list[packing.Packed]:
    """The packed layout (``hbDSPRpcV2``) of each operator with a parameter struct."""
    return [packing.layout(_ENTRIES[i], OPERATORS[i].struct, sizeof) for i in sorted(OPERATORS) if OPERATORS[i].struct]


def host_sizeof() -> Callable[[str], int]:
    """sizeof of the header's structs on this host (LP64: x86-64 and AArch64 agree), by cffi's parser."""
    import cffi
    ffi = cffi.FFI()
    ffi.cdef((HEADER.parent.parent / "capi.cdef").read_text() + cdef())
    return ffi.sizeof


def packed_table() -> str:
    """docs/capi.md's table of each stock operator's packed input (``arm_side.capi.packing``)."""
    plain = [(i, op.name) for i, op in sorted(OPERATORS.items()) if not op.struct]
    return packing.table(packed(host_sizeof()), plain)

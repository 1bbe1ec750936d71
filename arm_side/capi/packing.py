"""Parameters packed into the input buffer: what ``hbDSPRpcV2`` reads, as a J5 program packs it.

The J5 DSP sample passes an operator's parameters inside its one input buffer; the vendor
documents do not print the byte layout, so this module defines it (docs/capi.md, "Parameters
packed into the input"), from the operator contract alone:

- bytes ``0 .. S``: the operator's struct ``hbDSP<Name>Param`` of ``hb_dsp_ops.h`` (``S`` its
  sizeof), as the ARM program wrote it; its pointer members (strings, lists) point into the
  program's own memory, which the library reads at submission;
- an operator whose contract allows more than one input or output buffer has an
  ``hbDSPPackedBuffers`` (``hb_dsp.h``, :data:`TABLE_BYTES` bytes) at byte ``S``: how many
  buffers the input's data and the output hold, and their sizes (counts 0: one buffer, the
  whole data / the whole output);
- the data from byte ``D``, the header rounded up to :data:`ALIGN` (64: one A55 cache line, one
  512-bit vector of the DSP): one input to the end of the input's range, or the inputs of the
  table one after another, each from a 64-byte boundary; the output is the output buffer, or
  the outputs of the table laid out the same way from its byte 0.

An operator without a struct (ping, custom operators) takes its input and output as they are,
with no parameters. :func:`table` is docs/capi.md's table of the layouts; :func:`ranges` is the
split the embedded SDK's bridge makes (``vdsp_hb.c`` makes the same in C, with the same texts).
Pure: numbers in, numbers or text out.
"""
from __future__ import annotations

import dataclasses
import struct
from typing import Callable

from protocol import errors
from protocol.contract.operator import OperatorEntry

ALIGN = 64                      # HB_DSP_PACKED_ALIGN: where the data (and each packed buffer) starts
MAX_BUFFERS = 8                 # HB_DSP_PACKED_MAX_BUFFERS: buffers on one side of the table
TABLE_BYTES = 8 + 8 * MAX_BUFFERS   # sizeof(hbDSPPackedBuffers): two uint32 counts, two uint32 size arrays
TABLE_STRUCT = "hbDSPPackedBuffers"


def align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclasses.dataclass(frozen=True)
class Packed:
    """The packed layout of one operator with a parameter struct (``size``: its sizeof)."""
    id: int
    name: str
    struct: str
    size: int
    inputs: tuple[int, int]         # the contract's (min, max) buffer counts
    outputs: tuple[int, int]

    @property
    def has_table(self) -> bool:
        return self.inputs[1] > 1 or self.outputs[1] > 1

    @property
    def header(self) -> int:
        """Bytes before the data: the struct, and the table where there is one."""
        return self.size + (TABLE_BYTES if self.has_table else 0)

    @property
    def data(self) -> int:
        return align(self.header)

    @property
    def least(self) -> int:
        """The smallest input: the header, and one byte of data where the operator takes inputs."""
        return self.data + 1 if self.inputs[1] else self.header

    def _what(self) -> str:
        table = f", {TABLE_STRUCT} ({TABLE_BYTES} bytes) at byte {self.size}," if self.has_table else ""
        return (f"hbDSPRpcV2: operator 0x{self.id:04x} ({self.name}) takes its parameters packed in its input: "
                f"{self.struct} ({self.size} bytes){table} then its data from byte {self.data}")


def layout(entry: OperatorEntry, struct_name: str, sizeof: Callable[[str], int]) -> Packed:
    return Packed(entry.id, entry.name, struct_name, sizeof(struct_name), entry.inputs, entry.outputs)


def _fail(text: str) -> errors.InvalidArgument:
    return errors.InvalidArgument(text)


def check_input(p: Packed, size: int | None) -> None:
    """Raises InvalidArgument when the input (its memSize; None: NULL) cannot hold the header."""
    if size is None:
        raise _fail(f"{p._what()}: the input is NULL")
    if size < p.header or (p.inputs[1] and size < p.least):
        raise _fail(f"{p._what()}: the input has {size} bytes, at least {p.least} needed")


def _place(p: Packed, side: str, base: int, total: int, sizes: tuple[int, ...]) -> list[tuple[int, int]]:
    out, at = [], base
    for i, n in enumerate(sizes):
        if n == 0:
            raise _fail(f"{p._what()}: {TABLE_STRUCT}.{side}Size[{i}] is 0")
        out.append((at, n))
        at = align(at + n) if i + 1 < len(sizes) else at + n
    if at > total:
        raise _fail(f"{p._what()}: the {len(sizes)} {side}s of {TABLE_STRUCT}.{side}Size end at byte {at}, "
                    f"the {side} has {total} bytes")
    return out


def ranges(p: Packed, table: bytes, in_size: int, out_size: int | None
           ) -> tuple[list[tuple[int, int]], list[tuple[int, int]] | None]:
    """The data's input ranges (offset, bytes) in the input, and the output ranges in the output
    (None: the output as given). ``table``: the input's bytes ``size .. header`` (b"" without a
    table). Raises InvalidArgument naming hbDSPRpcV2, the operator and the sizes."""
    check_input(p, in_size)
    n_in = n_out = 0
    in_sizes: tuple[int, ...] = ()
    out_sizes: tuple[int, ...] = ()
    if p.has_table:
        n_in, n_out = struct.unpack_from("<II", table)
        for side, n, (_lo, hi) in (("input", n_in, p.inputs), ("output", n_out, p.outputs)):
            if n > hi:
                raise _fail(f"{p._what()}: {TABLE_STRUCT}.{side}Count {n} must be in 0..{hi}")
        in_sizes = struct.unpack_from(f"<{n_in}I", table, 8)
        out_sizes = struct.unpack_from(f"<{n_out}I", table, 8 + 4 * MAX_BUFFERS)
    ins: list[tuple[int, int]] = []
    if p.inputs[1]:
        ins = _place(p, "input", p.data, in_size, in_sizes) if n_in else [(p.data, in_size - p.data)]
    if not n_out:
        return ins, None
    if out_size is None:
        raise _fail(f"{p._what()}: {TABLE_STRUCT}.outputCount is {n_out} but the output is NULL")
    return ins, _place(p, "output", 0, out_size, out_sizes)


# --- docs/capi.md ----------------------------------------------------------------------------------

def _buffers(lo: int, hi: int, what: str, table: bool) -> str:
    if hi == 0:
        return "—"
    if not table or hi == 1:
        return f"one {what}" if what == "output" else f"one {what}, bytes {{data}}.. end"
    count = f"{lo}" if lo == hi else f"{lo}–{hi}"
    return f"{count} by the table (count 0: one)"


def table(packed: list[Packed], plain: list[tuple[int, str]]) -> str:
    """docs/capi.md's table: each stock operator's packed input and output (``plain``: the
    operators without a struct, (id, name))."""
    rows = ["| operator | id | bytes 0.. | hbDSPPackedBuffers at | data from byte | input data | output |",
            "|---|---|---|---|---|---|---|"]
    items: list[tuple[int, str]] = [(p.id, "p") for p in packed] + [(i, n) for i, n in plain]
    by_id = {p.id: p for p in packed}
    for op_id, name in sorted(items):
        p = by_id.get(op_id)
        if p is None:
            rows.append(f"| {name} | 0x{op_id:04x} | no parameters: input and output as given | — | — | — | — |")
            continue
        at = str(p.size) if p.has_table else "—"
        ins = _buffers(*p.inputs, "input", p.has_table).replace("{data}", str(p.data))
        if p.inputs[1] == 0:
            ins = "none (the input holds the parameters only)"
        outs = _buffers(*p.outputs, "output", p.has_table)
        rows.append(f"| {p.name} | 0x{p.id:04x} | `{p.struct}` ({p.size}) | {at} | {p.data} | {ins} | {outs} |")
    return "\n".join(rows)

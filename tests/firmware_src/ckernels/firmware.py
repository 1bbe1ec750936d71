"""C kernels that break the board's rules, for tests/dsp/test_ckernel.py and the live tests."""
from protocol.contract.operator import OperatorEntry
from dsp_side import ckernel

VERSION = "1.0.0"

PEEK = OperatorEntry.declare(0x1420, "peek_before_wait", {}, inputs=1, outputs=1,
                             doc="out = the TCM tile read before its IDMA wait, then after it.")
TCM = OperatorEntry.declare(0x1421, "tcm_take", {
    "bank": {"type": "int", "min": 0, "max": 1, "default": 0, "doc": "the bank"},
    "sizes": {"type": "int_list", "doc": "bytes of each allocation, in order"},
    "name": {"type": "str", "default": "scratch", "doc": "the allocations' name"}},
    doc="Allocate TCM; returns nothing.")
SEGV = OperatorEntry.declare(0x1422, "segv", {}, doc="Write through a null pointer.")
ABORT = OperatorEntry.declare(0x1423, "abort_", {}, doc="Call abort().")
NO_WAIT = OperatorEntry.declare(0x1424, "no_wait", {}, inputs=1, outputs=0,
                                doc="Return with an IDMA transfer not waited for.")

SUM = OperatorEntry.declare(0x1425, "sum_u8", {"scale": {"type": "float", "default": 1.0, "doc": "multiplies the sum"}},
                            inputs=1, outputs=1, doc="out (a double) = scale * the sum of the input's bytes (C++).")

CROP = OperatorEntry.declare(0x1426, "crop", {
    "width": {"type": "int", "min": 1, "max": 4096, "doc": "bytes per row of the input image"},
    "roi": {"type": "int_list", "len": 4, "min": 0, "max": 4096, "doc": "x, y, w, h of the rectangle"}},
    inputs=1, outputs=1, doc="out (w*h, packed) = the rectangle of the input, through TCM by 2-D transfers.")
MISUSE = OperatorEntry.declare(0x1427, "misuse", {
    "how": {"type": "str", "choices": ["into_input", "outside_tile", "bank_2", "bad_id"], "doc": "which rule"}},
    inputs=1, outputs=1, doc="Break an IDMA or TCM rule.")

SPIN = OperatorEntry.declare(0x1428, "spin", {}, doc="Loop forever (the watchdog's case).")

OVERFLOW = OperatorEntry.declare(0x1429, "overflow", {"add": {"type": "int", "min": 0, "max": 100, "doc": "added"}},
                                 doc="Add to INT32_MAX - 1 in int32_t: undefined behaviour from add = 2 on.")

PINGPONG = OperatorEntry.declare(0x142A, "pingpong_copy", {
    "pong_bank": {"type": "int", "min": 0, "max": 1, "default": 1, "doc": "the bank of the pong buffer (ping: 0)"}},
    inputs=1, outputs=1, doc="out = in, through TCM in ping-pong tiles of 1024 bytes (a bank conflict when "
                             "pong_bank is 0).")
SCRIBBLE = OperatorEntry.declare(0x142B, "scribble", {
    "where": {"type": "str", "choices": ["output", "input", "tcm"], "doc": "whose byte to write"},
    "offset": {"type": "int", "min": -65536, "max": 1 << 20, "doc": "byte offset from that buffer's start"}},
    inputs=1, outputs=1, doc="Write one byte at a byte offset from output 0, input 0 or a 64-byte TCM allocation.")
HEAP = OperatorEntry.declare(0x142C, "heap_overflow", {
    "index": {"type": "int", "min": 0, "max": 4096, "doc": "the byte written, of a 16-byte malloc'd block"}},
    doc="Write byte `index` of a 16-byte malloc'd block: past it from 16 on (what ASan catches).")

REPEAT_ROW = OperatorEntry.declare(0x142D, "repeat_row", {
    "rows": {"type": "int", "min": 1, "max": 4096, "doc": "copies of the input"},
    "pitch": {"type": "int", "min": 0, "max": 1 << 20, "doc": "bytes from one copy's start to the next in the output"},
    "src_pitch": {"type": "int", "min": 0, "max": 1 << 20, "default": 0,
                  "doc": "the transfer's source pitch (0: one TCM row, repeated)"}},
    inputs=1, outputs=1, doc="out = `rows` copies of the input, `pitch` bytes apart, by one 2-D IDMA transfer "
                             "from one TCM row.")
RESULTS = OperatorEntry.declare(0x142E, "results", {
    "how": {"type": "str", "choices": ["ok", "bad_name", "long_name", "too_many", "then_fail", "none"],
            "doc": "which results to set"}},
    doc="Set named results of the task (vdsp_result), well or against its rules.")


def register(registry):
    ckernel.bind(registry, PEEK, "peek_kernel", __file__)
    ckernel.bind(registry, TCM, "tcm_kernel", __file__)
    ckernel.bind(registry, SEGV, "segv_kernel", __file__)
    ckernel.bind(registry, ABORT, "abort_kernel", __file__)
    ckernel.bind(registry, NO_WAIT, "no_wait_kernel", __file__)
    ckernel.bind(registry, SUM, "sum_kernel", __file__)
    ckernel.bind(registry, CROP, "crop_kernel", __file__)
    ckernel.bind(registry, MISUSE, "misuse_kernel", __file__)
    ckernel.bind(registry, SPIN, "spin_kernel", __file__)
    ckernel.bind(registry, OVERFLOW, "overflow_kernel", __file__)
    ckernel.bind(registry, PINGPONG, "pingpong_kernel", __file__)
    ckernel.bind(registry, SCRIBBLE, "scribble_kernel", __file__)
    ckernel.bind(registry, HEAP, "heap_kernel", __file__)
    ckernel.bind(registry, REPEAT_ROW, "repeat_row_kernel", __file__)
    ckernel.bind(registry, RESULTS, "results_kernel", __file__)

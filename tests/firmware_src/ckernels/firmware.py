"""C kernels that break the board's rules, for tests/test_ckernel.py and the live tests."""
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

"""A C kernel whose work is known by hand, for the board-time counters (tests/dsp/test_board_time.py)."""
from protocol.contract.operator import OperatorEntry
from dsp_side import ckernel

VERSION = "1.0.0"

COUNT = OperatorEntry.declare(0x1450, "board_count", {
    "reps": {"type": "int", "min": 0, "max": 1 << 20, "doc": "IVP_ADDN_2X32 and IVP_DIVN_2XF32 uses"},
    "rows": {"type": "int", "min": 1, "max": 64, "doc": "rows of 64 bytes of the 2-D transfer out"}},
    inputs=1, outputs=1,
    doc="board_count.cc (C++: the vector types broadcast a scalar): a known count of intrinsics and IDMA bytes")


def register(registry):
    ckernel.bind(registry, COUNT, "board_count_kernel", __file__)

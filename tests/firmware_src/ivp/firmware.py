"""IVP kernels for tests/dsp/test_ivp.py: a C++ kernel that gathers at an offset it is given (inside
the 64 kB window it runs, beyond it the task fails naming the intrinsic). (The project's own
point-cloud kernels are the stock image's: dsp_side/firmware_src/stock.)"""
from protocol.contract.operator import OperatorEntry
from dsp_side import ckernel

VERSION = "1.0.0"

WINDOW = OperatorEntry.declare(0x1440, "ivp_window", {
    "offset": {"type": "int", "min": 0, "max": 1 << 20, "doc": "byte offset of every lane's gather"}},
    inputs=1, outputs=1, doc="out (16 floats) = IVP_GATHERAN_2XF32 of the input, staged in TCM, at offset.")


def register(registry):
    ckernel.bind(registry, WINDOW, "ivp_window_kernel", __file__)

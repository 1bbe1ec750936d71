"""The board-time model: every constant of the J5 DSP time estimate, each with its source.

A task's board time is an *estimate* of what the task would take on J5's Vision P6 DSP core,
in cycles at :data:`CLOCK_HZ` (docs/dsp_kernels.md, "Board time"):

- a C kernel (``board_model: "cycles"``): the emulation counts what the kernel does (each IVP
  intrinsic by name, and of the gathers/scatters/stores those outside TCM; the kernel's own
  basic blocks; each IDMA transfer, its rows and bytes, and how long the core waits for it on
  an in-order engine: ``src/vdsp_board.c``) and :func:`cycles` prices the counts here;
- a Python operator (``board_model: "table"``): :data:`TABLE` prices the bytes of its buffers
  with a per-operator entry (an operator without one has no estimate).

Every number of the model is a :class:`Constant` in this file with its source: ``source:`` a
fact of a document (the J5 DSP sample, ``../shared/reference/000_…``, by section), ``derived:``
computed here from other constants, or ``assumed:`` our choice where no document we have gives
the figure (tests/dsp/test_board_time.py checks that no other module-level name is a bare number). Pure: no I/O.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Constant:
    value: float
    unit: str
    source: str         # "source: …", "derived: …" or "assumed: …"


# --- the core ------------------------------------------------------------------------------------
CLOCK = Constant(1.0e9, "Hz", "assumed: the J5 documents we have do not state the DSP's clock; 1 GHz")
SIMD_BYTES = Constant(64, "bytes", "source: J5 DSP sample §10.4.5.3 (the DSP's SIMD is 512 bits)")
TASK_OVERHEAD = Constant(5000, "cycles", "assumed: the firmware's dispatch of one task on the DSP (message, "
                         "parameters, reply), whatever the operator")
BLOCK = Constant(2, "cycles", "assumed: one basic block of a kernel's scalar code (a few instructions, "
                 "some bundled by the VLIW compiler)")

# --- memory ----------------------------------------------------------------------------------------
DMA_BYTES_PER_CYCLE = Constant(16, "bytes/cycle", "assumed: IDMA between DDR and TCM at 128 bits per DSP cycle")
DMA_SETUP = Constant(60, "cycles", "assumed: programming one IDMA descriptor and the first DDR access")
DMA_ROW = Constant(4, "cycles", "assumed: each row of a 2-D transfer after its first")
DDR_ACCESS = Constant(100, "cycles", "assumed: one access of the core to DDR, which it does not cache "
                      "(the sample, §10.4.5.3.2: the DSP has no data cache)")

# --- IVP intrinsics: cycles per use (one issue, pipelined; VLIW co-issue not modelled) -------------
ALU = Constant(1, "cycles", "assumed: a 512-bit ALU, compare, select or shift operation issues once per cycle")
FDIV = Constant(16, "cycles", "assumed: the vector float divide is iterative (the sample, §10.4.5.5, calls "
                "division the costly operation worth replacing by a multiply)")
GATHER_LANE = Constant(0.5, "cycles/lane", "assumed: a gather's address phase reads TCM sub-banks two lanes "
                       "per cycle")
SCATTER_LANE = Constant(0.5, "cycles/lane", "assumed: as a gather")
OUTSIDE_LANE = Constant(DDR_ACCESS.value, "cycles/lane", "derived: a gather or scatter lane outside TCM is one "
                        "DDR access (on the board gathers reach local memory only)")
STORE_OUTSIDE = Constant(DDR_ACCESS.value, "cycles", "derived: a 64-byte store outside TCM is one DDR access")
LOAD_OUTSIDE = Constant(DDR_ACCESS.value, "cycles", "derived: a 64-byte load outside TCM is one DDR access")

_W = int(SIMD_BYTES.value)
N_2, N, TWO_N = _W // 4, _W // 2, _W      # lanes of 32, 16 and 8 bits in a vector

#: cycles of one use of each intrinsic of the subset (the names of <xtensa/tie/xt_ivpn.h>)
IVP: dict[str, float] = {
    "IVP_GATHERAN_2XF32": GATHER_LANE.value * N_2, "IVP_GATHERDN_2XF32": ALU.value,
    "IVP_GATHERAN_2X32": GATHER_LANE.value * N_2, "IVP_GATHERDN_2X32": ALU.value,
    "IVP_GATHERANX8S": GATHER_LANE.value * N, "IVP_GATHERD2NX8_L": ALU.value, "IVP_GATHERD2NX8_H": ALU.value,
    "IVP_SCATTERN_2X32": SCATTER_LANE.value * N_2, "IVP_SCATTERW": ALU.value,
    "IVP_SUBN_2XF32": ALU.value, "IVP_DIVN_2XF32": FDIV.value, "IVP_TRUNCN_2XF32": ALU.value,
    "IVP_SLLN_2X32": ALU.value, "IVP_ADDN_2X32": ALU.value, "IVP_ULEN_2XF32": ALU.value,
    "IVP_ORBN_2": ALU.value, "IVP_MOVN_2X32T": ALU.value, "IVP_SELN_2X32I": ALU.value, "IVP_SELN_2X32": ALU.value,
    "IVP_ZALIGN": ALU.value, "IVP_SA2NX8_IP": ALU.value, "IVP_SAPOS2NX8U_FP": ALU.value,
    "IVP_FIRINTN_2XF32": ALU.value, "IVP_MAXN_2X32": ALU.value, "IVP_MINN_2X32": ALU.value,
    "IVP_SVN_2X32_IP": ALU.value, "IVP_LVN_2X32_IP": ALU.value, "IVP_DSELN_2X32I": ALU.value,
}
#: extra cycles of one use whose memory is outside TCM (the intrinsics that touch memory)
IVP_OUTSIDE: dict[str, float] = {
    "IVP_GATHERAN_2XF32": OUTSIDE_LANE.value * N_2, "IVP_GATHERANX8S": OUTSIDE_LANE.value * N,
    "IVP_GATHERAN_2X32": OUTSIDE_LANE.value * N_2,
    "IVP_SCATTERN_2X32": OUTSIDE_LANE.value * N_2, "IVP_SA2NX8_IP": STORE_OUTSIDE.value,
    "IVP_SVN_2X32_IP": STORE_OUTSIDE.value, "IVP_LVN_2X32_IP": LOAD_OUTSIDE.value,
}


def us(cycles: float) -> float:
    """Microseconds of ``cycles`` at the model's clock."""
    return cycles / CLOCK.value * 1e6


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A task's board time: ``cycles`` (overhead included), how it was got (``model``: "cycles"
    or "table") and its parts in cycles."""
    cycles: float
    model: str
    parts: dict

    @property
    def us(self) -> float:
        return us(self.cycles)


def cycles(ivp: dict[str, int], ivp_outside: dict[str, int], blocks: int, dma_busy: float,
           dma_stall: float) -> Estimate:
    """The estimate of a C kernel's counts: intrinsics by name (and those of them outside TCM),
    basic blocks, and the cycles the core stalled on IDMA (the engine's own ``dma_busy`` cycles
    overlap the compute: they are a part shown, not added). Raises KeyError for an intrinsic
    with no price here."""
    vector = sum(n * IVP[name] for name, n in ivp.items())
    outside = sum(n * IVP_OUTSIDE.get(name, 0.0) for name, n in ivp_outside.items())
    return priced(vector, outside, blocks, dma_busy, dma_stall)


def priced(vector: float, outside: float, blocks: int, dma_busy: float, dma_stall: float) -> Estimate:
    """The estimate of :func:`cycles` from its intrinsics already priced: ``vector`` cycles of
    intrinsics, ``outside`` more for their memory outside TCM."""
    scalar = blocks * BLOCK.value
    parts = {"overhead": TASK_OVERHEAD.value, "ivp": vector, "outside_tcm": outside, "scalar": scalar,
             "dma_stall": dma_stall, "dma_busy": dma_busy}
    return Estimate(TASK_OVERHEAD.value + vector + outside + scalar + dma_stall, "cycles", parts)


# --- Python operators: a table -----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TableEntry:
    """cycles = TASK_OVERHEAD + fixed + in_byte x input bytes + out_byte x output bytes."""
    in_byte: float
    out_byte: float
    source: str
    fixed: float = 0.0


_DMA = 1.0 / DMA_BYTES_PER_CYCLE.value          # cycles per byte moved by IDMA (ping-pong: overlapped)
_VEC = ALU.value / SIMD_BYTES.value             # one ALU operation per byte, 64 bytes a cycle
_DMA_SRC = "derived: the bytes through IDMA at DMA_BYTES_PER_CYCLE"


def _stage1_per_point(dim: int) -> float:
    """Cycles per point of the sample's stage-1 kernel mix (§10.4.5.4.1): per 16 points, per
    dimension a gather (address and data phase), a subtract, a divide, a truncate and a compare;
    the masks, the cell index (shift, add, select) and the scatters of the results."""
    per16 = dim * (IVP["IVP_GATHERAN_2XF32"] + IVP["IVP_GATHERDN_2XF32"] + IVP["IVP_SUBN_2XF32"]
                   + IVP["IVP_DIVN_2XF32"] + IVP["IVP_TRUNCN_2XF32"] + IVP["IVP_ULEN_2XF32"]
                   + IVP["IVP_ORBN_2"] + IVP["IVP_MOVN_2X32T"])
    per16 += IVP["IVP_SLLN_2X32"] + IVP["IVP_ADDN_2X32"] + (dim - 1) * IVP["IVP_SCATTERN_2X32"]
    return per16 / N_2


def _stage2_per_out_byte() -> float:
    """Cycles per output byte of the sample's transpose kernel (§10.4.5.4.3): per 64 bytes, two
    8-bit gathers and their data phases and one aligning store."""
    return (2 * (IVP["IVP_GATHERANX8S"] + IVP["IVP_GATHERD2NX8_L"]) + IVP["IVP_SA2NX8_IP"]) / TWO_N


_ELEMENTWISE = TableEntry(_DMA + _VEC, _DMA, "derived: IDMA in and out, one vector operation per byte")
_FILTER = TableEntry(_DMA, _DMA + 9 * _VEC, "derived: IDMA in and out, a 3x3 window: 9 vector operations per "
                "output byte")

#: per-operator entries of the stock Python operators (an operator not here has no estimate)
TABLE: dict[str, TableEntry] = {
    "ping": TableEntry(0.0, 0.0, "derived: the task's overhead only"),
    "memcpy": TableEntry(_DMA, _DMA, _DMA_SRC),
    "fill": TableEntry(0.0, _DMA, _DMA_SRC),
    "checksum": TableEntry(_DMA + _VEC, 0.0, "derived: IDMA in, one vector operation per byte"),
    "pointcloud_encode": TableEntry(max(_DMA, _stage1_per_point(5) / 20), _DMA,
                               "derived: the sample's stage-1 kernel mix (§10.4.5.4.1) at the IVP prices above, "
                               "per input byte of 5-dimension float points; IDMA overlapped"),
    "pointcloud_transpose": TableEntry(_DMA, max(_DMA, _stage2_per_out_byte()),
                                  "derived: the sample's transpose kernel (§10.4.5.4.3) at the IVP prices above, "
                                  "per output byte; IDMA overlapped"),
    **{name: _ELEMENTWISE for name in ("quantize", "dequantize", "layout", "cv.threshold", "cv.flip",
                                        "cv.transpose", "cv.rotate", "cv.cvtColor")},
    **{name: _FILTER for name in ("cv.gaussianBlur", "cv.boxFilter", "cv.sobel", "cv.dilate", "cv.erode",
                                   "cv.filter2D", "cv.sepFilter2D", "cv.medianBlur")},
}


# per operator: (µs of the overhead and the fixed part, µs per input byte, µs per output byte)
_TABLE_US = {name: (us(TASK_OVERHEAD.value + e.fixed), us(e.in_byte), us(e.out_byte)) for name, e in TABLE.items()}


def table_us(name: str, inputs: list, outputs: list) -> float | None:
    """The table's estimate in µs, to the ns, for operator ``name`` on these buffers (arrays:
    their ``nbytes``), None when it has no entry. Runs on every task of a Python operator: a
    lookup, and for an entry the sizes summed, two multiplications and the rounding."""
    row = _TABLE_US.get(name)
    if row is None:
        return None
    size_in = sum([a.nbytes for a in inputs]) if inputs else 0
    size_out = sum([a.nbytes for a in outputs]) if outputs else 0
    return int((row[0] + row[1] * size_in + row[2] * size_out) * 1000.0 + 0.5) / 1000.0


CONSTANTS: dict[str, Constant] = {k: v for k, v in globals().items() if isinstance(v, Constant)}

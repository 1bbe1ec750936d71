"""The board-time counters of a kernel library (``src/vdsp_board.c``), read through ctypes.

At load, :func:`attach` hands the runtime the prices of :mod:`dsp_side.ckernel.board_model`
(its DMA timeline needs them while the kernel runs) and checks that every intrinsic the
library counts has one; after each task, :meth:`Counters.estimate` reads the counts and prices
them. A library built before the counters existed has none: no estimate (None).
"""
from __future__ import annotations

import ctypes

import numpy as np

from protocol import errors
from dsp_side.ckernel import board_model


class Counters:
    def __init__(self, dll: ctypes.CDLL) -> None:
        n = ctypes.c_int.in_dll(dll, "vdsp_ivp_ids").value
        names = (ctypes.c_char_p * n).in_dll(dll, "vdsp_ivp_names")
        self.names = [(names[i] or b"").decode() for i in range(n)]
        missing = [name for name in self.names if name not in board_model.IVP]
        if missing:
            raise errors.OperatorFailed(f"the kernel library counts {', '.join(missing)}, which "
                                        "dsp_side/ckernel/board_model.py does not price (add it to IVP)")

        class Prices(ctypes.Structure):
            _fields_ = [("ivp", ctypes.c_double * n), ("ivp_outside", ctypes.c_double * n),
                        ("block", ctypes.c_double), ("dma_setup", ctypes.c_double), ("dma_row", ctypes.c_double),
                        ("dma_bytes_per_cycle", ctypes.c_double)]

        class Counts(ctypes.Structure):
            _fields_ = [("ivp", ctypes.c_uint64 * n), ("ivp_outside", ctypes.c_uint64 * n),
                        ("blocks", ctypes.c_uint64), ("dma_transfers", ctypes.c_uint64),
                        ("dma_rows", ctypes.c_uint64), ("dma_bytes", ctypes.c_uint64),
                        ("dma_busy", ctypes.c_double), ("dma_stall", ctypes.c_double)]
        self.counts = Counts()
        self._read = dll.vdsp_board_counts
        self._read.argtypes, self._read.restype = [ctypes.POINTER(Counts)], None
        m = board_model
        prices = Prices((ctypes.c_double * n)(*(m.IVP[k] for k in self.names)),
                        (ctypes.c_double * n)(*(m.IVP_OUTSIDE.get(k, 0.0) for k in self.names)),
                        m.BLOCK.value, m.DMA_SETUP.value, m.DMA_ROW.value, m.DMA_BYTES_PER_CYCLE.value)
        dll.vdsp_board_set_prices.argtypes = [ctypes.POINTER(Prices)]
        dll.vdsp_board_set_prices(ctypes.byref(prices))
        # the prices of the ivp and ivp_outside counts, in the order of the counts (estimate())
        self._prices = np.array(list(prices.ivp) + list(prices.ivp_outside), np.float64)
        self._n = n
        self._summary_out = (ctypes.c_double * 5)()
        self._summary = getattr(dll, "vdsp_board_summary", None)    # (None: a library built before it)
        if self._summary is not None:
            self._summary.argtypes, self._summary.restype = [ctypes.c_double * 5], None

    def read(self) -> dict:
        """The last task's counts: ``ivp`` and ``ivp_outside`` ({name: uses}, used ones only),
        ``blocks``, ``dma_transfers``, ``dma_rows``, ``dma_bytes``, ``dma_busy``, ``dma_stall``."""
        c = self.counts
        self._read(ctypes.byref(c))
        return {"ivp": {k: c.ivp[i] for i, k in enumerate(self.names) if c.ivp[i]},
                "ivp_outside": {k: c.ivp_outside[i] for i, k in enumerate(self.names) if c.ivp_outside[i]},
                **{f: getattr(c, f) for f in ("blocks", "dma_transfers", "dma_rows", "dma_bytes", "dma_busy",
                                              "dma_stall")}}

    def estimate(self) -> board_model.Estimate:
        """The last task's board time: the priced counts (what :func:`board_model.cycles` makes of
        :meth:`read`'s, without building its dicts: after every task)."""
        if self._summary is not None:       # priced by the runtime (the same prices, one call)
            out = self._summary_out
            self._summary(out)
            return board_model.priced(out[0], out[1], int(out[2]), out[3], out[4])
        c, n = self.counts, self._n
        self._read(ctypes.byref(c))
        uses = np.frombuffer(memoryview(c), np.uint64, 2 * n).astype(np.float64)
        vector, outside = float(uses[:n] @ self._prices[:n]), float(uses[n:] @ self._prices[n:])
        return board_model.priced(vector, outside, c.blocks, c.dma_busy, c.dma_stall)


def attach(dll: ctypes.CDLL) -> Counters | None:
    """The counters of ``dll`` (None: a library without them). Raises OperatorFailed for an
    intrinsic without a price."""
    try:
        dll.vdsp_board_counts
    except AttributeError:
        return None
    return Counters(dll)

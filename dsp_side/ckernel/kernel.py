"""Run a C kernel of an image's kernel library on a task (ctypes).

The library is opened by the operator's ``init`` hook, when the firmware loads (a missing
library or symbol refuses the image). A task: its buffers become TileBuffers over the DDR
(zero-copy), its checked parameters the entry's struct (:mod:`dsp_side.ckernel.params`), and the
runtime's ``vdsp_rt_run`` calls the kernel; a trap is raised as its coded error, a non-zero
return as ``OperatorFailed``. A crash in the kernel (SIGSEGV, abort) kills the firmware process
as any DSP exception does: the core reports it and recovers (PROTOCOL.md §10).
"""
from __future__ import annotations

import ctypes
import logging
from pathlib import Path

import numpy as np

from protocol import errors
from protocol.contract.operator import OperatorEntry
from vdsp_board import settings
from dsp_side.ckernel import counters, params as cparams

_LEVELS = {ord("E"): logging.ERROR, ord("W"): logging.WARNING, ord("I"): logging.INFO, ord("D"): logging.DEBUG}
_TRAPS = {1: errors.TcmOverBudget, 2: errors.DmaNotWaited, 3: errors.OperatorFailed}
_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p)


class TileBuffer(ctypes.Structure):
    _fields_ = [("tile_buffer", ctypes.c_void_p), ("data_size", ctypes.c_uint32)]


class CTask(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_char_p), ("num_inputs", ctypes.c_int32), ("num_outputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(TileBuffer)), ("outputs", ctypes.POINTER(TileBuffer)),
                ("param", ctypes.c_void_p), ("param_size", ctypes.c_uint32)]


class Library:
    """One loaded kernel library: its runtime's entry points and its log callback."""

    def __init__(self, path: Path, log: logging.Logger) -> None:
        try:
            self.dll = ctypes.CDLL(str(path))
        except OSError as exc:
            raise errors.OperatorFailed(f"cannot load the kernel library {path.name}: {exc}") from exc
        self.dll.vdsp_rt_run.restype = ctypes.c_int
        self.dll.vdsp_rt_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(CTask), ctypes.c_int,
                                         ctypes.POINTER(ctypes.c_int)]
        self.dll.vdsp_rt_message.restype = ctypes.c_char_p
        self.dll.vdsp_rt_init.argtypes = [_LOG_FN]

        def emit(level: int, file: bytes, line: int, text: bytes) -> None:
            record = log.makeRecord(log.name, _LEVELS.get(level, logging.INFO), file.decode(errors="replace"), line,
                                    text.decode(errors="replace"), (), None)
            log.handle(record)
        self._log_cb = _LOG_FN(emit)       # kept: the library calls it while loaded
        if self.dll.vdsp_rt_init(self._log_cb) != 0:
            raise errors.OperatorFailed(f"{path.name}: the kernel runtime cannot map its TCM")
        self.counters = counters.attach(self.dll)     # the board-time counters (None: an older library)

    def kernel(self, symbol: str) -> int:
        """The address of the C function ``symbol``. Raises OperatorFailed."""
        try:
            return ctypes.cast(getattr(self.dll, symbol), ctypes.c_void_p).value or 0
        except AttributeError:
            raise errors.OperatorFailed(f"the kernel library has no function {symbol!r}") from None


_LIBRARIES: dict[Path, Library] = {}    # one per library file per process (the runtime's state is global)


def _tiles(arrays: list) -> ctypes.Array:
    tiles = (TileBuffer * max(1, len(arrays)))()
    for tile, arr in zip(tiles, arrays):
        tile.tile_buffer, tile.data_size = (arr.ctypes.data if arr.size else None), int(arr.size)
    return tiles


class CKernel:
    """The operator function of a C kernel (bound by :func:`dsp_side.ckernel.bind`)."""

    def __init__(self, entry: OperatorEntry, symbol: str, library: Path) -> None:
        self.entry, self.symbol, self.library = entry, symbol, library
        self.layout = cparams.c_layout(entry)        # ValueError at registration for an impossible struct
        self.struct = cparams.struct_type(self.layout)
        self._fn: int | None = None
        self._lib: Library | None = None
        self.__doc__ = entry.doc
        self.__name__ = symbol

    def load(self, ctx) -> None:
        """The ``init`` hook: open the library and find the kernel."""
        lib = _LIBRARIES.get(self.library)
        if lib is None:
            lib = _LIBRARIES[self.library] = Library(self.library, ctx.log)
        self._lib, self._fn = lib, lib.kernel(self.symbol)

    def __call__(self, ctx, inputs: list, outputs: list, **values) -> dict:
        if self._lib is None or not self._fn:
            self.load(ctx)
        assert self._lib is not None
        ins = [np.asarray(a).reshape(-1) for a in inputs]
        outs = [np.asarray(a).reshape(-1) for a in outputs]
        in_tiles, out_tiles = _tiles(ins), _tiles(outs)
        task = CTask(self.symbol.encode(), len(ins), len(outs), in_tiles, out_tiles, None, 0)
        keep: list = []
        if self.struct is not None:
            struct, keep = cparams.pack(self.layout, self.struct, values)
            task.param, task.param_size = ctypes.addressof(struct), ctypes.sizeof(struct)
            keep.append(struct)
        rc = ctypes.c_int(0)
        trap = self._lib.dll.vdsp_rt_run(self._fn, ctypes.byref(task), int(settings.current().strict_dma),
                                         ctypes.byref(rc))
        del keep
        if trap:
            message = (self._lib.dll.vdsp_rt_message() or b"").decode(errors="replace")
            raise _TRAPS.get(trap, errors.OperatorFailed)(message)
        if rc.value != 0:
            raise errors.OperatorFailed(f"kernel {self.symbol} returned {rc.value}")
        if self._lib.counters is not None:      # the task's board time, for its RESULT (dsp_side.firmware)
            ctx.board = self._lib.counters.estimate()
        return {}

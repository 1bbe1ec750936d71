"""Run a C kernel of an image's kernel library on a task (ctypes).

The library is opened by the operator's ``init`` hook, when the firmware loads (a missing
library or symbol refuses the image). A task: its buffers become TileBuffers over the DDR
(zero-copy), its checked parameters the entry's struct (:mod:`dsp_side.ckernel.params`), and the
runtime's ``vdsp_rt_run`` calls the kernel; a trap is raised as its coded error, a non-zero
return as ``OperatorFailed``. A crash in the kernel (SIGSEGV, abort) kills the firmware process
as any DSP exception does: the core reports it and recovers (PROTOCOL.md §10).

Guard pages (on unless ``VDSP_KERNEL_GUARD=0``): while the kernel runs, the TCM outside its
allocations is inaccessible, and (the firmware's DDR mappings have a PROT_NONE page after
each) a fault there or just past a buffer is ``KernelMemoryFault`` naming the kernel and the
nearest buffer. In strict mode (``VDSP_STRICT_DMA``) its inputs are read-only too, where they
own their pages: that costs a page-table update per page of input per task (~85 µs for 4 MB). Bank conflicts the runtime
counted are a warning in the DSP log and a ``bank_conflict`` event of the task's trace
(``ctx.note``, where the context has it).
"""
from __future__ import annotations

import ctypes
import logging
import mmap
from pathlib import Path

import numpy as np

from protocol import errors
from protocol.contract.operator import OperatorEntry
from vdsp_board.config import settings
from dsp_side.ckernel import counters, params as cparams

_LEVELS = {ord("E"): logging.ERROR, ord("W"): logging.WARNING, ord("I"): logging.INFO, ord("D"): logging.DEBUG}
_TRAPS = {1: errors.TcmOverBudget, 2: errors.DmaNotWaited, 3: errors.OperatorFailed, 4: errors.KernelMemoryFault}
CONFLICT_TEXT = 256      # bytes of the runtime's description of a task's first bank conflict
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
        self.dll.vdsp_rt_guard.argtypes = [ctypes.c_int, ctypes.c_int]
        self.dll.vdsp_rt_bank_conflicts.restype = ctypes.c_int
        self.dll.vdsp_rt_bank_conflicts.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self.conflict = ctypes.create_string_buffer(CONFLICT_TEXT)
        self.dll.vdsp_rt_crash_file.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        self.dll.vdsp_rt_task_info.argtypes = [ctypes.c_longlong, ctypes.c_int, ctypes.c_char_p]
        self.asan = bool(self.dll.vdsp_rt_asan())      # built with --sanitize=address

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


def _owns_pages(arr: np.ndarray) -> bool:
    """Whether ``arr``'s memory is an mmap's (a page of it holds nothing but buffer bytes):
    only such an input may be made read-only while a kernel runs."""
    base: object = arr
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return isinstance(base, mmap.mmap)


def _tiles(arrays: list, tiles: ctypes.Array | None = None) -> ctypes.Array:
    """The TileBuffers of ``arrays``: into ``tiles`` when it has their number of slots, else new."""
    if tiles is None or len(tiles) != max(1, len(arrays)):
        tiles = (TileBuffer * max(1, len(arrays)))()
    for tile, arr in zip(tiles, arrays):
        tile.tile_buffer, tile.data_size = (arr.ctypes.data if arr.size else None), int(arr.size)
    return tiles


class _TaskObjects:
    """The ctypes objects a kernel's task is passed in, reused from task to task (tasks run one
    at a time in a process, the runtime's rule, and the runtime keeps no pointer into them after
    vdsp_rt_run returns): a call builds no ctypes array or struct but the parameter struct."""

    def __init__(self, symbol: str) -> None:
        self.name = symbol.encode()
        self.inputs: ctypes.Array | None = None
        self.outputs: ctypes.Array | None = None
        self.rc = ctypes.c_int(0)


class CKernel:
    """The operator function of a C kernel (bound by :func:`dsp_side.ckernel.bind`)."""

    def __init__(self, entry: OperatorEntry, symbol: str, library: Path) -> None:
        self.entry, self.symbol, self.library = entry, symbol, library
        self.layout = cparams.c_layout(entry)        # ValueError at registration for an impossible struct
        self.struct = cparams.struct_type(self.layout)
        self._fn: int | None = None
        self._lib: Library | None = None
        self._objects = _TaskObjects(symbol)
        self.__doc__ = entry.doc
        self.__name__ = symbol

    def load(self, ctx) -> None:
        """The ``init`` hook: open the library and find the kernel."""
        lib = _LIBRARIES.get(self.library)
        if lib is None:
            lib = _LIBRARIES[self.library] = Library(self.library, ctx.log)
            crash_file = getattr(ctx, "crash_file", None) or ""     # where an ASan stop is reported
            lib.dll.vdsp_rt_crash_file(str(crash_file).encode(), str(ctx.core).encode())
        self._lib, self._fn = lib, lib.kernel(self.symbol)

    def __call__(self, ctx, inputs: list, outputs: list, **values) -> dict:
        if self._lib is None or not self._fn:
            self.load(ctx)
        assert self._lib is not None
        ins = [np.asarray(a).reshape(-1) for a in inputs]
        outs = [np.asarray(a).reshape(-1) for a in outputs]
        objects = self._objects
        objects.inputs, objects.outputs = _tiles(ins, objects.inputs), _tiles(outs, objects.outputs)
        task = CTask(objects.name, len(ins), len(outs), objects.inputs, objects.outputs, None, 0)
        keep: list = []
        if self.struct is not None:
            struct, keep = cparams.pack(self.layout, self.struct, values)
            task.param, task.param_size = ctypes.addressof(struct), ctypes.sizeof(struct)
            keep.append(struct)
        rc = objects.rc
        rc.value = 0
        if self._lib.asan:          # for the crash report ASan's stop would write
            self._lib.dll.vdsp_rt_task_info(ctx.msg_id, self.entry.id, self.entry.name.encode())
        config = settings.current()
        guard, strict = config.kernel_guard, config.strict_dma
        self._lib.dll.vdsp_rt_guard(int(guard), int(guard and strict and all(_owns_pages(a) for a in ins)))
        trap = self._lib.dll.vdsp_rt_run(self._fn, ctypes.byref(task), int(strict),
                                         ctypes.byref(rc))
        del keep
        self._bank_conflicts(ctx)
        if trap:
            message = (self._lib.dll.vdsp_rt_message() or b"").decode(errors="replace")
            raise _TRAPS.get(trap, errors.OperatorFailed)(message)
        if rc.value != 0:
            raise errors.OperatorFailed(f"kernel {self.symbol} returned {rc.value}")
        if self._lib.counters is not None:      # the task's board time, for its RESULT (dsp_side.firmware)
            ctx.board = self._lib.counters.estimate()
        return {}

    def _bank_conflicts(self, ctx) -> None:
        """Report the bank conflicts of the run just ended: a warning in the DSP log, and a
        ``bank_conflict`` trace event of the task (``ctx.note``, when tracing)."""
        assert self._lib is not None
        count = self._lib.dll.vdsp_rt_bank_conflicts(self._lib.conflict, CONFLICT_TEXT)
        if count <= 0:
            return
        first = self._lib.conflict.value.decode(errors="replace")
        ctx.log.warning("kernel %s: %d TCM bank conflicts (ping-pong buffers in one bank); the first: %s",
                        self.symbol, count, first)
        note = getattr(ctx, "note", None)
        if note is not None:
            note("bank_conflict", {"kernel": self.symbol, "count": count, "first": first})

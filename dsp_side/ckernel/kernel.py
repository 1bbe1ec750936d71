"""Run a C kernel of an image's kernel library on a task (ctypes).

The library is opened by the operator's ``init`` hook, when the firmware loads (a missing
library or symbol refuses the image). A task: its buffers become TileBuffers over the DDR
(zero-copy), its checked parameters the entry's struct (:mod:`dsp_side.ckernel.params`), and
one call of the runtime (``vdsp_rt_call``: the guards, the kernel, then the run's bank
conflicts and board summary) runs it; a trap is raised as its coded error, a non-zero return as
``OperatorFailed``. A crash in the kernel (SIGSEGV, abort) kills the firmware process
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
import weakref
from pathlib import Path
from typing import Callable

import numpy as np

from protocol import errors
from protocol.contract.operator import OperatorEntry
from vdsp_board.config import settings
from dsp_side.ckernel import board_model, counters, params as cparams

_LEVELS = {ord("E"): logging.ERROR, ord("W"): logging.WARNING, ord("I"): logging.INFO, ord("D"): logging.DEBUG}
_TRAPS = {1: errors.TcmOverBudget, 2: errors.DmaNotWaited, 3: errors.OperatorFailed, 4: errors.KernelMemoryFault}
_RESULT_NAME = 32        # bytes of a result's name and its NUL (VDSP_RESULT_NAME_MAX + 1)
CONFLICT_TEXT = 256      # bytes of the runtime's description of a task's first bank conflict
_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p)


class TileBuffer(ctypes.Structure):
    _fields_ = [("tile_buffer", ctypes.c_void_p), ("data_size", ctypes.c_uint32)]


class CTask(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_char_p), ("num_inputs", ctypes.c_int32), ("num_outputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(TileBuffer)), ("outputs", ctypes.POINTER(TileBuffer)),
                ("param", ctypes.c_void_p), ("param_size", ctypes.c_uint32)]


class Outcome(ctypes.Structure):
    """What ``vdsp_rt_call`` reports of a task (``struct vdsp_rt_outcome``): the trap, the kernel's
    return value, the bank conflicts, the results the kernel set (``vdsp_result``; read by
    :meth:`Library.results`) and the board summary (``vdsp_board_summary``'s five values)."""
    _fields_ = [("trap", ctypes.c_int), ("rc", ctypes.c_int), ("conflicts", ctypes.c_int), ("results", ctypes.c_int),
                ("vector", ctypes.c_double), ("outside", ctypes.c_double), ("blocks", ctypes.c_double),
                ("dma_busy", ctypes.c_double), ("dma_stall", ctypes.c_double)]


_STRICT, _GUARD_TCM, _GUARD_INPUTS = 1, 2, 4        # vdsp_rt_call's flags


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
        result = getattr(self.dll, "vdsp_rt_result", None)      # (None: a library built before it)
        if result is not None:
            result.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_longlong)]
            result.restype = ctypes.c_int
        self._result: Callable[..., int] | None = result

        def emit(level: int, file: bytes, line: int, text: bytes) -> None:
            record = log.makeRecord(log.name, _LEVELS.get(level, logging.INFO), file.decode(errors="replace"), line,
                                    text.decode(errors="replace"), (), None)
            log.handle(record)
        self._log_cb = _LOG_FN(emit)       # kept: the library calls it while loaded
        if self.dll.vdsp_rt_init(self._log_cb) != 0:
            raise errors.OperatorFailed(f"{path.name}: the kernel runtime cannot map its TCM")
        self.counters = counters.attach(self.dll)     # the board-time counters (None: an older library)
        self.outcome = Outcome()
        self._board_key = b""
        self._board: board_model.Estimate | None = None
        call = getattr(self.dll, "vdsp_rt_call", None)       # (None: a library built before it)
        self.apart = call is None
        if call is not None:
            call.argtypes = [ctypes.c_void_p, ctypes.POINTER(CTask), ctypes.c_int, ctypes.POINTER(Outcome)]
            call.restype = None
        self.call: Callable[[int, CTask, int, Outcome], None] = call or self._call_apart

    def _call_apart(self, fn: int, task: CTask, flags: int, out: Outcome) -> None:
        """``vdsp_rt_call`` in a library built before it: the runtime's calls one by one (its
        board summary: :meth:`board`)."""
        rc = ctypes.c_int(0)
        self.dll.vdsp_rt_guard(int(bool(flags & _GUARD_TCM)), int(bool(flags & _GUARD_INPUTS)))
        out.trap = self.dll.vdsp_rt_run(fn, ctypes.byref(task), flags & _STRICT, ctypes.byref(rc))
        out.rc, out.conflicts = rc.value, self.dll.vdsp_rt_bank_conflicts(None, 0)

    def results(self, count: int) -> dict:
        """The ``count`` results the last task's kernel set (``vdsp_result``): {name: value}."""
        result = self._result
        if result is None:
            return {}
        name, value, got = ctypes.create_string_buffer(_RESULT_NAME), ctypes.c_longlong(0), {}
        for i in range(count):
            if result(i, name, _RESULT_NAME, ctypes.byref(value)) == 0:
                got[name.value.decode("ascii", errors="replace")] = value.value
        return got

    def board(self, out: Outcome) -> board_model.Estimate | None:
        """The board time of the task ``out`` reports (None: a library without counters)."""
        if self.counters is None:
            return None
        if self.apart:
            return self.counters.estimate()
        key = bytes(out)        # the last task's estimate again for the same counts (it is frozen)
        if key != self._board_key:
            self._board_key = key
            self._board = board_model.priced(out.vector, out.outside, int(out.blocks), out.dma_busy, out.dma_stall)
        return self._board

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


def _flat(a) -> np.ndarray:
    """``np.asarray(a).reshape(-1)``: ``a`` itself when it is a 1-D array (reshape's view of it
    has its memory and size)."""
    return a if type(a) is np.ndarray and a.ndim == 1 else np.asarray(a).reshape(-1)


_from_buffer, _addressof = ctypes.c_char.from_buffer, ctypes.addressof


def _address(arr: np.ndarray) -> int:
    """The address of ``arr``'s first byte (``arr.ctypes.data``): through the buffer protocol
    where ``arr`` is writable and contiguous (a quarter of numpy's cost), else numpy's."""
    try:
        return _addressof(_from_buffer(arr))      # type: ignore[arg-type]
    except TypeError:       # read-only or strided
        return arr.ctypes.data


class _Tiles:
    """The TileBuffers of one side of a kernel's tasks (its inputs or its outputs), reused from
    task to task: a slot is rewritten only for an array that is not the one it was last written
    for. The same live array object of the same size has the same memory (an array's data
    pointer changes only with a resize, which changes its size); it is held by a weak reference
    (a task's buffers stay the caller's: a DDR mapping can close)."""

    def __init__(self) -> None:
        self.tiles = (TileBuffer * 1)()
        self.last: list = []        # per slot: (weak reference to its array, the array's size)

    def fill(self, arrays: list) -> ctypes.Array:
        """The TileBuffers of ``arrays`` (1-D)."""
        last = self.last
        if len(arrays) != len(last):
            self.tiles = (TileBuffer * max(1, len(arrays)))()
            last = self.last = [(None, -1)] * len(arrays)
        for i, arr in enumerate(arrays):
            ref, size = last[i]
            if ref is not None and ref() is arr and arr.size == size:
                continue
            size = arr.size
            tile = self.tiles[i]
            tile.tile_buffer, tile.data_size = (_address(arr) if size else None), size
            last[i] = (weakref.ref(arr), size)
        return self.tiles


class _TaskObjects:
    """The ctypes objects a kernel's task is passed in, reused from task to task (tasks run one
    at a time in a process, the runtime's rule, and the runtime keeps no pointer into them after
    vdsp_rt_run returns): a call builds no ctypes object but a parameter struct of new values
    (:class:`dsp_side.ckernel.params.Packer`) and TileBuffers for a new number of buffers."""

    def __init__(self, symbol: str) -> None:
        self.inputs, self.outputs = _Tiles(), _Tiles()
        self.task = CTask(symbol.encode(), 0, 0, None, None, None, 0)
        self.bound: tuple = ()          # (inputs, outputs, their counts) the task points at now


class CKernel:
    """The operator function of a C kernel (bound by :func:`dsp_side.ckernel.bind`)."""

    def __init__(self, entry: OperatorEntry, symbol: str, library: Path) -> None:
        self.entry, self.symbol, self.library = entry, symbol, library
        self.layout = cparams.c_layout(entry)        # ValueError at registration for an impossible struct
        self.struct = cparams.struct_type(self.layout)
        self._packer = None if self.struct is None else cparams.Packer(self.layout, self.struct)
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
        lib, fn = self._lib, self._fn
        assert lib is not None and fn
        ins, outs = [_flat(a) for a in inputs], [_flat(a) for a in outputs]
        objects = self._objects
        task = objects.task
        bound = (objects.inputs.fill(ins), objects.outputs.fill(outs), len(ins), len(outs))
        if bound != objects.bound:
            task.inputs, task.outputs, task.num_inputs, task.num_outputs = objects.bound = bound
        if self._packer is not None:
            struct = self._packer.pack(values)      # kept by the packer while the kernel runs
            task.param, task.param_size = ctypes.addressof(struct), ctypes.sizeof(struct)
        if lib.asan:          # for the crash report ASan's stop would write
            lib.dll.vdsp_rt_task_info(ctx.msg_id, self.entry.id, self.entry.name.encode())
        config = settings.current()
        guard, strict = config.kernel_guard, config.strict_dma
        flags = (_STRICT if strict else 0) | (_GUARD_TCM if guard else 0)
        if guard and strict and all(_owns_pages(a) for a in ins):
            flags |= _GUARD_INPUTS
        out = lib.outcome
        lib.call(fn, task, flags, out)
        if out.conflicts > 0:
            self._bank_conflicts(ctx, out.conflicts)
        if out.trap:
            message = (lib.dll.vdsp_rt_message() or b"").decode(errors="replace")
            raise _TRAPS.get(out.trap, errors.OperatorFailed)(message)
        if out.rc != 0:
            raise errors.OperatorFailed(f"kernel {self.symbol} returned {out.rc}")
        if lib.counters is not None:      # the task's board time, for its RESULT (dsp_side.firmware)
            ctx.board = lib.board(out)
        return lib.results(out.results) if out.results > 0 else {}

    def _bank_conflicts(self, ctx, count: int) -> None:
        """Report the ``count`` bank conflicts of the run just ended: a warning in the DSP log, and a
        ``bank_conflict`` trace event of the task (``ctx.note``, when tracing)."""
        assert self._lib is not None
        self._lib.dll.vdsp_rt_bank_conflicts(self._lib.conflict, CONFLICT_TEXT)
        first = self._lib.conflict.value.decode(errors="replace")
        ctx.log.warning("kernel %s: %d TCM bank conflicts (ping-pong buffers in one bank); the first: %s",
                        self.symbol, count, first)
        note = getattr(ctx, "note", None)
        if note is not None:
            note("bank_conflict", {"kernel": self.symbol, "count": count, "first": first})

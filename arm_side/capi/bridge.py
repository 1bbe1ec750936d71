"""The Python half of libvdsp_hb: what each C function of hb_sys.h, hb_dsp.h and hb_dnn.h does.

``glue.c`` starts the interpreter and calls these functions (declared ``extern "Python"`` in
``capi.cdef``); :func:`install` binds them to the library's ``ffi`` when it starts. They use the
SDK the way ``arm_side.hb`` does, on the same Soc and runtime (``hb.soc()``, ``hb.runtime()``: one
per process, shared with Python code in the same process), so that codes, limits and semantics
are the Python SDK's. What C adds is kept here:

- **Memory.** An ``hbSysMem`` is a plain struct the program may copy (into an ``hbDNNTensor``,
  an array): a buffer is known by ``(phyAddr, virAddr)``, and ``virAddr`` is the address of the
  memory as this process's CPU sees it (``Mem.array()``: the DDR mapping for uncached memory,
  the private cache of cached and registered memory). A struct naming a range inside a live
  buffer (``phyAddr`` + offset) is that range. Freeing sets ``virAddr`` to NULL; a freed or
  never-allocated struct of this process is HB_SYS_INVALID_ARGUMENT, another owner's memory goes
  to the SoC as ``(phyAddr, memSize)``, which checks the grant (HB_DSP_FOREIGN_HANDLE).
- **Handles.** Tasks, packs and models are numbers handed out once (never reused), so a released
  or made-up handle is HB_DNN_INVALID_TASK_HANDLE (..._PACKED_DNN_HANDLE, ..._DNN_HANDLE), a
  double release included.
- **Strings** returned to C (names, versions, error texts) live as long as what they describe,
  error texts in a bounded cache (:data:`TEXTS_KEPT`).
- **Parameters** of an operator come as its struct of ``hb_dsp_ops.h`` (``arm_side.capi.opsgen``
  says how each member maps to a parameter) or as JSON text.

Every function returns 0 (``rpc``: the new task's handle, which glue.c stores) or a negative
code, and never raises into C; each thread's last failure is kept for ``hbDNNGetErrorDesc``.

**Beside the native side.** Where libvdsp_hb's native side serves the hbSys/hbDSP functions
(front.c), this SDK starts at the first hbDNN call and is handed the native side first: it adopts
its DDR owner (``vdsp_board.memory.ddr.adopt_owner``: one owner per process, whose every buffer the SoC
takes as this process's), and a struct it does not know is looked up in the native side's table
(``vdsp_native_find``) and used in place, as a Mem over the native side's DDR mapping and CPU
cache (:meth:`Bridge.native_buffer`).
"""
from __future__ import annotations

import atexit
import collections
import functools
import itertools
import json
import sys
import threading
from typing import Any, Callable

from protocol import errors
from protocol.constants import Core
from protocol.task_options import TaskOptions
from arm_side import hb, nn
from arm_side.capi import opsgen, packing
from arm_side.memory import CLEAN, INVALIDATE, Mem
from arm_side.nn.dtypes import DataType, Layout, QuantiType
from arm_side.nn.tensor import MAX_DIMS, Quantization, TensorProperties
from vdsp_board.memory import ddr

MAX_BUFFERS = 64            # buffers of one task
# The SDK's texts name its Python calls; a C program is told the C function that does the same.
C_SPELLINGS = (("flush(CLEAN)", "hbSysFlushMem(HB_SYS_MEM_CACHE_CLEAN)"),
               ("flush(INVALIDATE)", "hbSysFlushMem(HB_SYS_MEM_CACHE_INVALIDATE)"),
               (": mem.share()", ""))
MAX_HANDLES = 1 << 16       # live task handles of one kind
MAX_TEXT = 1 << 16          # bytes of a name, a path or a string parameter
MAX_JSON = 1 << 20          # bytes of JSON parameters
MAX_LIST = 1 << 20          # values of a list parameter
MAX_MODEL_BYTES = 1 << 30   # one model given by hbDNNInitializeFromDDR
MAX_QUANT = 1 << 16         # quantisation values of one tensor
TEXTS_KEPT = 1024           # error texts returned to C that stay valid
MAX_THREADS_KEPT = 4096     # threads whose last error is remembered
CALL_MEMO = 256             # submissions whose buffers, parameters and options are remembered (by their bytes)
NATIVE_MEMS = 4096          # Mems kept over the native side's buffers
_CORE_IDS = {"vdsp0": int(Core.CORE_0), "vdsp1": int(Core.CORE_1)}
_IMAGE_FORMAT_NAMES = {v: k for k, v in opsgen.IMAGE_FORMATS.items()}


class _Buffer:
    """A live buffer of this process: the Mem, the array whose address is virAddr, and that
    address (an int, and the ``void *`` given to C)."""
    __slots__ = ("mem", "view", "vir", "ptr")

    def __init__(self, mem: Mem, view: Any, vir: int, ptr: Any) -> None:
        self.mem, self.view, self.vir, self.ptr = mem, view, vir, ptr


class _Handles:
    """Objects by the number handed to C as a handle: never 0, never reused. The DSP task
    functions take and give it as an integer (glue.c casts); the others as a pointer cdata."""

    def __init__(self, ffi: Any, ctype: str, error: type[errors.VdspError], what: str) -> None:
        self.ffi, self.ctype, self.error, self.what = ffi, ffi.typeof(ctype), error, what
        self._objects: dict[int, Any] = {}
        self._numbers = itertools.count(0x10010, 16)      # next() is atomic: no lock on the task path
        self._lock = threading.Lock()

    def key(self, handle: Any) -> int:
        return handle if isinstance(handle, int) else int(self.ffi.cast("uintptr_t", handle))

    def add(self, obj: Any) -> int:
        if len(self._objects) >= MAX_HANDLES:
            raise errors.TaskNumExceedLimit(f"{MAX_HANDLES} {self.what} handles are alive: release some")
        number = next(self._numbers)
        self._objects[number] = obj
        return number

    def cdata(self, number: int) -> Any:
        return self.ffi.cast(self.ctype, number)

    def get(self, handle: Any) -> Any:
        obj = self._objects.get(self.key(handle))
        if obj is None:
            raise self.error(f"{self.text(handle)} is not a live {self.what} handle of this process "
                             "(never handed out, or released)")
        return obj

    def pop(self, handle: Any) -> Any:
        obj = self._objects.pop(self.key(handle), None)      # atomic: a handle is released once
        if obj is None:
            raise self.error(f"{self.text(handle)} is not a live {self.what} handle of this process "
                             "(never handed out, or released before)")
        return obj

    def find(self, obj: Any) -> int | None:
        """The number of ``obj`` (None if it has none)."""
        with self._lock:
            return next((k for k, v in list(self._objects.items()) if v is obj), None)

    def drop(self, keep: Callable[[Any], bool]) -> None:
        for k, v in list(self._objects.items()):
            if not keep(v):
                self._objects.pop(k, None)

    def text(self, handle: Any) -> str:
        key = self.key(handle)
        return "NULL" if key == 0 else f"handle 0x{key:x}"


class Bridge:
    """The state of the C face in this process (one, made by :func:`install`)."""

    def __init__(self, ffi: Any) -> None:
        self.ffi = ffi
        self._lock = threading.Lock()
        self.buffers: dict[tuple[int, Any], _Buffer] = {}     # by (phyAddr, virAddr)
        self.dsp_tasks = _Handles(ffi, "hbDSPTask_t", errors.InvalidTaskHandle, "DSP task")
        self.dnn_tasks = _Handles(ffi, "hbDNNTaskHandle_t", errors.InvalidTaskHandle, "DNN task")
        self.packs = _Handles(ffi, "hbPackedDNNHandle_t", errors.InvalidPackedDnnHandle, "packed DNN")
        self.models = _Handles(ffi, "hbDNNHandle_t", errors.InvalidDnnHandle, "DNN model")
        self.kept: dict[int | None, list] = collections.defaultdict(list)     # C data owned by a pack's handle
        self.layers: dict[int, list] = collections.defaultdict(list)          # C layers made for a pack
        self._making: list | None = None                               # C layers of the pack being loaded
        self._texts: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self._last: collections.OrderedDict[int, tuple[int, str]] = collections.OrderedDict()
        self._options: dict[tuple, TaskOptions] = {}
        self._calls: dict[bytes, tuple] = {}        # see rpc()
        self._packed: dict[int, packing.Packed] | None = None   # hbDSPRpcV2's layouts, made at first use
        self._version: Any = None
        self.native: Any = None                     # the library's lib where the native side is attached
        self._native_mems: collections.OrderedDict[tuple[int, int], _Buffer] = collections.OrderedDict()

    # --- codes and texts ------------------------------------------------------------------------------
    def failed(self, exc: BaseException, invalid: int) -> int:
        code = exc.code if isinstance(exc, errors.VdspError) else invalid
        message = exc.message if isinstance(exc, errors.VdspError) else f"{type(exc).__name__}: {exc}"
        for python, c in C_SPELLINGS:
            message = message.replace(python, c)
        tid = threading.get_ident()
        with self._lock:
            self._last[tid] = (code, message)
            self._last.move_to_end(tid)
            while len(self._last) > MAX_THREADS_KEPT:
                self._last.popitem(last=False)
        return code

    def text(self, value: str) -> Any:
        """A C string of ``value`` that stays valid while it is among the last TEXTS_KEPT returned."""
        with self._lock:
            kept = self._texts.get(value)
            if kept is None:
                kept = self._texts[value] = self.ffi.new("char[]", value.encode("utf-8", "replace"))
                while len(self._texts) > TEXTS_KEPT:
                    self._texts.popitem(last=False)
            else:
                self._texts.move_to_end(value)
            return kept

    def error_desc(self, code: int) -> Any:
        text = errors.describe(code)
        last = self._last.get(threading.get_ident())
        if last is not None and last[0] == code and last[1]:
            text = f"{text} ({last[1]})"
        return self.text(text)

    def version(self) -> Any:
        if self._version is None:
            self._version = self.ffi.new("char[]", hb.hbDNNGetVersion().encode())
        return self._version

    def string(self, ptr: Any, what: str) -> str:
        if not ptr:
            raise errors.InvalidArgument(f"{what} is NULL")
        raw = self.ffi.string(ptr, MAX_TEXT + 1)
        if len(raw) > MAX_TEXT:
            raise errors.InvalidArgument(f"{what} is longer than {MAX_TEXT} bytes (or not NUL-terminated)")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise errors.InvalidArgument(f"{what} is not UTF-8: {exc}") from None

    # --- memory ---------------------------------------------------------------------------------------
    def _track(self, mem: Mem, cmem: Any) -> None:
        view = mem.array()
        vir = int(view.ctypes.data)
        ptr = self.ffi.cast("void *", vir)      # hashes and compares as the address
        with self._lock:
            self.buffers[(mem.phys_addr, ptr)] = _Buffer(mem, view, vir, ptr)
        cmem.phyAddr, cmem.virAddr, cmem.memSize = mem.phys_addr, ptr, mem.size

    def _struct(self, cmem: Any, what: str = "mem") -> Any:
        if not cmem:
            raise errors.SysInvalidArgument(f"{what} is NULL")
        return cmem

    def lookup(self, cmem: Any, what: str = "mem") -> tuple[_Buffer | None, int, int]:
        """``(buffer, offset, size)``: the live buffer of this process holding the struct's range
        (None: not this process's memory), the range's offset in it, and its size. Raises
        SysInvalidArgument for memory of this process that is not live (freed, never allocated)."""
        phys, size = cmem.phyAddr, cmem.memSize
        buf = self.buffers.get((phys, cmem.virAddr))
        if buf is not None and not buf.mem.freed and size <= buf.mem.size:
            return buf, 0, size
        vir = int(self.ffi.cast("uintptr_t", cmem.virAddr))
        with self._lock:
            candidates = list(self.buffers.values())
        inside = [b for b in candidates if not b.mem.freed and b.mem.phys_addr <= phys
                  and phys + size <= b.mem.phys_addr + b.mem.size]
        if inside:
            inside.sort(key=lambda b: (b.mem.registered, vir != b.vir + phys - b.mem.phys_addr))
            return inside[0], phys - inside[0].mem.phys_addr, size
        if self.native is not None:
            return self.native_buffer(cmem, what)
        if ddr.parse_phys(phys)[0] == ddr.current_owner().id:
            around = [b for b in candidates if not b.mem.freed and b.mem.phys_addr <= phys < b.mem.phys_addr + b.mem.size]
            if around:
                raise errors.SysInvalidArgument(
                    f"{what} (hbSysMem at 0x{phys:x}, {size} bytes) runs past the end of its buffer "
                    f"(0x{around[0].mem.phys_addr:x}, {around[0].mem.size} bytes): its memSize is too large")
            raise errors.SysInvalidArgument(f"{what} (hbSysMem at 0x{phys:x}, {size} bytes) is not allocated or "
                                            "registered in this process (or was freed)")
        return None, 0, size

    def native_buffer(self, cmem: Any, what: str) -> tuple[_Buffer | None, int, int]:
        """:meth:`lookup` in the native side's table: its buffer as a Mem over the same bytes
        (made once per buffer, kept for the last NATIVE_MEMS used)."""
        ffi, out = self.ffi, self.ffi.new("vdsp_hb_native_buffer *")
        code = self.native.vdsp_native_find(cmem.phyAddr, cmem.virAddr, cmem.memSize, what.encode(), out)
        if code == 1:
            return None, 0, int(cmem.memSize)
        if code != 0:
            text = ffi.new("char[]", 1024)
            self.native.vdsp_native_last(text, 1024)
            raise errors.error_class(code)(ffi.string(text).decode("utf-8", "replace"))
        key = (int(out.phys), int(ffi.cast("uintptr_t", out.vir)))
        with self._lock:
            buf = self._native_mems.get(key)
            if buf is None or buf.mem.freed:
                size = int(out.size)
                ddr_view: Any = memoryview(ffi.buffer(out.ddr, size))
                cache: Any = memoryview(ffi.buffer(out.cache, size)) if out.cache else None
                mem = Mem(hb.soc().mem, key[0], ddr_view, cache=cache, registered=bool(out.registered),
                          on_free=lambda: None)
                buf = self._native_mems[key] = _Buffer(mem, None, key[1], out.vir)
                while len(self._native_mems) > NATIVE_MEMS:
                    self._native_mems.popitem(last=False)
            self._native_mems.move_to_end(key)
        return buf, int(out.offset), int(cmem.memSize)

    def live(self, cmem: Any, what: str = "mem") -> tuple[_Buffer, int, int]:
        buf, offset, size = self.lookup(self._struct(cmem, what), what)
        if buf is None:
            raise errors.SysInvalidArgument(f"{what} (hbSysMem at 0x{int(cmem.phyAddr):x}) is not memory of this "
                                            "process: register it first (hbSysRegisterMem)")
        return buf, offset, size

    def alloc(self, cmem: Any, size: int, cached: int) -> int:
        self._struct(cmem)
        s = hb.soc()
        self._track(s.mem.alloc_cached(size) if cached else s.mem.alloc(size), cmem)
        return 0

    def register(self, cmem: Any) -> int:
        self._struct(cmem)
        self._track(hb.soc().mem.register(int(cmem.phyAddr), int(cmem.memSize)), cmem)
        return 0

    def flush(self, cmem: Any, flag: int) -> int:
        buf, offset, size = self.live(cmem)
        buf.mem.flush(flag, offset, size)
        return 0

    def free(self, cmem: Any, registered: int) -> int:
        self._struct(cmem)
        key = (cmem.phyAddr, cmem.virAddr)
        buf = self.buffers.get(key)
        if buf is None or buf.mem.freed:
            raise errors.SysInvalidArgument(f"hbSysMem at 0x{key[0]:x} is not a buffer this process allocated or "
                                            "registered (freed already, or a copy naming part of one)")
        if registered and not buf.mem.registered:
            raise errors.SysInvalidArgument(f"memory 0x{key[0]:x} was allocated, not registered: free it")
        with self._lock:
            self.buffers.pop(key, None)
        buf.view = None
        buf.mem.free()
        cmem.virAddr = self.ffi.NULL
        return 0

    def write(self, dest: Any, src: Any, size: int) -> int:
        buf, offset, span = self.live(dest, "dest")
        if not src:
            raise errors.SysInvalidArgument("src is NULL")
        if size > span:
            raise errors.SysInvalidArgument(f"size {size} is larger than dest's memSize {span}")
        buf.mem.write(self.ffi.buffer(src, size), offset)
        return 0

    def read(self, dest: Any, src: Any, size: int) -> int:
        buf, offset, span = self.live(src, "src")
        if not dest:
            raise errors.SysInvalidArgument("dest is NULL")
        if size > span:
            raise errors.SysInvalidArgument(f"size {size} is larger than src's memSize {span}")
        self.ffi.memmove(dest, buf.mem.read(size, offset), size)
        return 0

    # --- DSP tasks ------------------------------------------------------------------------------------
    def task_buffers(self, array: Any, count: int, what: str) -> list:
        if count < 0 or count > MAX_BUFFERS:
            raise errors.InvalidArgument(f"{what}Count {count} must be in 0..{MAX_BUFFERS}")
        if count and not array:
            raise errors.InvalidArgument(f"{what}s is NULL but {what}Count is {count}")
        out: list = []
        for i in range(count):
            cmem = array[i]
            buf, offset, size = self.lookup(cmem, f"{what}[{i}]")
            if buf is not None and offset == 0 and size == buf.mem.size:
                out.append(buf.mem)
            else:
                out.append((int(cmem.phyAddr), size))
        return out

    def options(self, ctrl: Any) -> TaskOptions | None:
        if not ctrl:
            return None         # the SDK's defaults (Soc.rpc's quickest path)
        key = (int(ctrl.dspCoreId), int(ctrl.priority), int(ctrl.customId))
        opts = self._options.get(key)
        if opts is None:
            opts = TaskOptions(core=key[0], priority=key[1], custom_id=key[2])
            if len(self._options) < 256:
                self._options[key] = opts
        return opts

    def params(self, cmd: int, param: Any, size: int, text: Any) -> dict | None:
        if text:
            raw = self.ffi.string(text, MAX_JSON + 1)
            if len(raw) > MAX_JSON:
                raise errors.InvalidArgument(f"paramJson is longer than {MAX_JSON} bytes")
            try:
                value = json.loads(raw)
            except ValueError as exc:
                raise errors.InvalidArgument(f"paramJson is not JSON: {exc}") from None
            if not isinstance(value, dict):
                raise errors.InvalidArgument(f"paramJson must be a JSON object, got {type(value).__name__}")
            return value
        if not param:
            return None
        op = opsgen.OPERATORS.get(cmd)
        if op is None or not op.struct:
            raise errors.InvalidArgument(f"operator 0x{cmd & 0xffffffff:04x} has no parameter struct in hb_dsp_ops.h: "
                                         "pass its parameters with hbDSPRpcV2Json")
        want = self.ffi.sizeof(op.struct)
        if size != want:
            raise errors.InvalidArgument(f"paramSize {size} is not sizeof({op.struct}) = {want}: pass the struct of "
                                         f"operator 0x{cmd:04x} ({op.name})")
        return self.struct_params(op, self.ffi.cast(op.struct + " *", param))


    def pointed(self, op: opsgen.OpLayout, p: Any) -> tuple:
        """What the pointer members of a struct of ``op`` point at (strings, lists; None for NULL)."""
        ffi = self.ffi
        pointed: list = []
        for f in op.pointers:
            value = getattr(p, f.cname)
            if not value:
                pointed.append(None)
            elif f.kind == "str":
                pointed.append(self.string(value, f"{op.struct}.{f.cname}"))
            else:
                count = int(getattr(p, f.count_name))
                if not 0 <= count <= MAX_LIST:
                    raise errors.InvalidArgument(f"{op.struct}.{f.count_name} {count} must be in 0..{MAX_LIST}")
                pointed.append(tuple(ffi.unpack(value, count)))
        return tuple(pointed)

    def struct_params(self, op: opsgen.OpLayout, p: Any) -> dict:
        """The parameters a struct of ``op`` holds. Callers must not change the nested values of
        what they get (Soc.rpc copies the outer dict; :meth:`rpc` gives the same dict to every
        submission of the same bytes)."""
        return self._convert(op, p, iter(self.pointed(op, p)))

    def _convert(self, op: opsgen.OpLayout, p: Any, pointed: Any) -> dict:
        out: dict[str, Any] = {}
        for f in op.fields:
            kind = f.kind
            if f in op.pointers:
                value = next(pointed)
                if value is not None:
                    out[f.param] = value if kind == "str" else list(value)
                continue
            value = getattr(p, f.cname)
            if kind == "int":
                out[f.param] = int(value)
            elif kind == "float":
                out[f.param] = float(value)
            elif kind == "bool":
                out[f.param] = bool(value)
            elif kind in ("int_list", "float_list"):
                out[f.param] = list(value)
            elif kind == "image":
                if value.format:
                    out[f.param] = self.image(value, f"{op.struct}.{f.cname}")
            elif value.validShape.numDimensions:       # a tensor descriptor
                out[f.param] = self.props_from_c(value, f"{op.struct}.{f.cname}").to_wire()
        return out

    def image(self, img: Any, what: str) -> dict:
        fmt = _IMAGE_FORMAT_NAMES.get(int(img.format))
        if fmt is None:
            raise errors.InvalidArgument(f"{what}.format {int(img.format)} is not an hbDSPImageFormat")
        desc: dict[str, Any] = {"format": fmt, "width": int(img.width), "height": int(img.height)}
        if img.stride:
            desc["stride"] = int(img.stride)
        if img.hasRoi:
            desc["roi"] = [int(img.roi.left), int(img.roi.top), int(img.roi.right), int(img.roi.bottom)]
        return desc

    def rpc(self, task: Any, inputs: Any, n_in: int, outputs: Any, n_out: int, cmd: int, param: Any,
            size: int, text: Any, ctrl: Any, key: Any, key_length: int) -> int:
        """The task's handle (glue.c stores it in ``*task``); what the structs made is remembered
        by the submission's bytes for ``rpc_again`` (see _install_task_path)."""
        if not task:
            raise errors.InvalidArgument("task is NULL: pass the address of an hbDSPTask_t")
        ins = self.task_buffers(inputs, n_in, "input")
        outs = self.task_buffers(outputs, n_out, "output")
        params, opts = self.params(cmd, param, size, text), self.options(ctrl)
        if key_length:
            with self._lock:
                if len(self._calls) >= CALL_MEMO:
                    del self._calls[next(iter(self._calls))]        # the oldest
                self._calls[self.ffi.buffer(key, key_length)[:]] = (
                    cmd, ins, outs, params, opts, [b for b in ins + outs if isinstance(b, Mem)])
        t = hb.soc().rpc(cmd, ins, outs, params, options=opts)
        return self.dsp_tasks.add(t)

    def rpc_packed(self, task: Any, cinput: Any, coutput: Any, cmd: int, ctrl: Any) -> int:
        """hbDSPRpcV2: an operator with a struct of hb_dsp_ops.h reads its parameters packed in
        the input (``arm_side.capi.packing``: the struct's bytes as the DSP would read them, from
        the DDR; the data and the outputs as ranges of the buffers), one without takes the buffers
        as they are."""
        ffi = self.ffi
        op = opsgen.OPERATORS.get(cmd)
        if op is None or not op.struct:
            return self.rpc(task, cinput, 1 if cinput else 0, coutput, 1 if coutput else 0, cmd, ffi.NULL, 0,
                            ffi.NULL, ctrl, ffi.NULL, 0)
        if not task:
            raise errors.InvalidArgument("task is NULL: pass the address of an hbDSPTask_t")
        if self._packed is None:
            self._packed = {p.id: p for p in opsgen.packed(ffi.sizeof)}
        p = self._packed[cmd]
        packing.check_input(p, int(cinput.memSize) if cinput else None)
        buf, offset, size = self.live(cinput, "input")
        if offset == 0 and size == buf.mem.size:
            hb.soc().mem.check_before_submit(buf.mem)       # strict mode: the data goes as a range
        head = bytes(buf.mem.ddr_array()[offset:offset + p.header])
        out_size = int(coutput.memSize) if coutput else None
        ins, outs = packing.ranges(p, head[p.size:], size, out_size)
        params = self.struct_params(op, ffi.cast(p.struct + " *", ffi.from_buffer(head)))
        phys_in = int(cinput.phyAddr)
        in_bufs: list = [(phys_in + at, n) for at, n in ins]
        if outs is None:
            out_bufs = self.task_buffers(coutput, 1 if coutput else 0, "output")
        else:
            self.lookup(coutput, "output")      # live, or another owner's (its grant is the SoC's to judge)
            out_bufs = [(int(coutput.phyAddr) + at, n) for at, n in outs]
        t = hb.soc().rpc(cmd, in_bufs, out_bufs, params, options=self.options(ctrl))
        return self.dsp_tasks.add(t)

    @staticmethod
    def _live(mems: list) -> bool:
        for m in mems:
            if m.freed:
                return False
        return True

    def _values(self, task: Any) -> dict:
        t = self.dsp_tasks.get(task)
        if not t.done() or t.error is not None:
            raise errors.InvalidArgument("the task has no values: it has not ended, or it failed "
                                         "(hbDSPWaitTaskDone returns its code)")
        return t.values

    def dsp_value(self, task: Any, name: Any, ival: Any, dval: Any) -> int:
        values = self._values(task)
        key = self.string(name, "name")
        if key not in values:
            raise errors.InvalidArgument(f"the task has no value {key!r}; it has {sorted(map(str, values))}")
        value = values[key]
        if ival:
            if not isinstance(value, int) or not -(1 << 63) <= value < (1 << 63):
                raise errors.InvalidArgument(f"value {key!r} is not a 64-bit integer: {value!r:.60}")
            ival[0] = value
        elif dval:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise errors.InvalidArgument(f"value {key!r} is not a number: {value!r:.60}")
            dval[0] = float(value)
        else:
            raise errors.InvalidArgument("value is NULL")
        return 0

    def dsp_values_json(self, task: Any, out: Any, size: int) -> int:
        values = self._values(task)
        if not out:
            raise errors.InvalidArgument("buf is NULL")
        data = json.dumps(values, default=lambda o: o.hex() if isinstance(o, (bytes, bytearray)) else str(o),
                          sort_keys=True).encode()
        if len(data) + 1 > size:
            raise errors.InvalidArgument(f"bufSize {size} is too small: the values take {len(data) + 1} bytes")
        self.ffi.memmove(out, data + b"\0", len(data) + 1)
        return 0

    def dsp_core(self, task: Any, out: Any) -> int:
        if not out:
            raise errors.InvalidArgument("dspCoreId is NULL")
        t = self.dsp_tasks.get(task)
        if not t.done():
            raise errors.InvalidArgument("the task has not ended: wait for it first")
        out[0] = _CORE_IDS.get(t.core, 0)
        return 0

    def dsp_board(self, task: Any, us_out: Any, counted_out: Any) -> int:
        if not us_out:
            raise errors.InvalidArgument("boardUs is NULL")
        t = self.dsp_tasks.get(task)
        if not t.done() or t.error is not None:
            raise errors.InvalidArgument("the task has no board time: it has not ended, or it failed "
                                         "(hbDSPWaitTaskDone returns its code)")
        if t.board_us is None:
            raise errors.InvalidArgument("the task has no board-time estimate (its operator has no table entry)")
        us_out[0] = t.board_us
        if counted_out:
            counted_out[0] = int(t.board_model == "cycles")
        return 0

    # --- tensors --------------------------------------------------------------------------------------
    def props_from_c(self, cp: Any, what: str) -> Any:
        n = int(cp.validShape.numDimensions)
        if not 1 <= n <= MAX_DIMS:
            raise errors.InvalidArgument(f"{what}.validShape.numDimensions {n} must be in 1..{MAX_DIMS}")
        na = int(cp.alignedShape.numDimensions)
        if na != n:
            raise errors.InvalidArgument(f"{what}.alignedShape.numDimensions {na} differs from validShape's {n}")
        valid = tuple(cp.validShape.dimensionSize[0:n])
        aligned = tuple(cp.alignedShape.dimensionSize[0:n])
        stride = tuple(cp.stride[0:n])
        from arm_side.dnn.props import ImageProperties, ImageType     # the model runtime's (imported on use)
        try:
            layout = Layout(int(cp.tensorLayout))
            ttype = int(cp.tensorType)
            if ttype <= max(ImageType):
                return ImageProperties(ImageType(ttype), layout, valid, aligned, stride)
            return TensorProperties(DataType(ttype), layout, valid, aligned, stride, self.quant_from_c(cp, what))
        except ValueError as exc:
            raise errors.InvalidArgument(f"{what}: {exc}") from None

    def quant_from_c(self, cp: Any, what: str) -> Quantization:
        kind = QuantiType(int(cp.quantiType))
        if kind == QuantiType.NONE:
            return Quantization()
        axis = int(cp.quantizeAxis)
        if kind == QuantiType.SHIFT:
            return Quantization(kind, shift=self._array(cp.shift.shiftData, cp.shift.shiftLen, f"{what}.shift"),
                                axis=axis)
        scale = self._array(cp.scale.scaleData, cp.scale.scaleLen, f"{what}.scale")
        zp = self._array(cp.scale.zeroPointData, cp.scale.zeroPointLen, f"{what}.scale.zeroPoint") or (0,) * len(scale)
        return Quantization(kind, scale=scale, zero_point=zp, axis=axis)

    def _array(self, ptr: Any, count: int, what: str) -> tuple:
        if not 0 <= count <= MAX_QUANT:
            raise errors.InvalidArgument(f"{what} length {count} must be in 0..{MAX_QUANT}")
        if count and not ptr:
            raise errors.InvalidArgument(f"{what} data is NULL but its length is {count}")
        return tuple(self.ffi.unpack(ptr, count)) if count else ()

    def props_to_c(self, props: Any, cp: Any, keep: list) -> None:
        ffi = self.ffi
        n = len(props.valid_shape)
        for shape, values in ((cp.validShape, props.valid_shape), (cp.alignedShape, props.aligned_shape)):
            shape.numDimensions = n
            for i in range(MAX_DIMS):
                shape.dimensionSize[i] = values[i] if i < n else 0
        for i in range(MAX_DIMS):
            cp.stride[i] = props.stride[i] if i < n else 0
        cp.tensorLayout, cp.tensorType = int(props.layout), int(props.dtype)
        q = props.quant
        cp.quantiType, cp.quantizeAxis, cp.alignedByteSize = int(q.type), int(q.axis), int(props.aligned_byte_size)
        cp.shift.shiftLen, cp.shift.shiftData = 0, ffi.NULL
        cp.scale.scaleLen, cp.scale.scaleData, cp.scale.zeroPointLen, cp.scale.zeroPointData = 0, ffi.NULL, 0, ffi.NULL
        if q.type == QuantiType.SHIFT:
            data = ffi.new("uint8_t[]", list(q.shift))
            keep.append(data)
            cp.shift.shiftLen, cp.shift.shiftData = len(q.shift), data
        elif q.type == QuantiType.SCALE:
            if any(not -128 <= z <= 127 for z in q.zero_point):
                raise errors.InvalidArgument("a zero point of this tensor does not fit hbDNNQuantiScale's int8_t")
            scale, zp = ffi.new("float[]", list(q.scale)), ffi.new("int8_t[]", list(q.zero_point))
            keep += [scale, zp]
            cp.scale.scaleLen, cp.scale.scaleData = len(q.scale), scale
            cp.scale.zeroPointLen, cp.scale.zeroPointData = len(q.zero_point), zp

    def tensor(self, ct: Any, what: str) -> nn.Tensor:
        buf, offset, size = self.live(ct.sysMem[0], f"{what}.sysMem[0]")
        if offset or size != buf.mem.size:
            raise errors.InvalidArgument(f"{what}.sysMem[0] must be a whole buffer of hbSysAlloc*Mem, not a part")
        return nn.Tensor(buf.mem, self.props_from_c(ct.properties, f"{what}.properties"))

    # --- the model runtime ----------------------------------------------------------------------------
    def _load(self, out: Any, load: Callable[[], Any]) -> int:
        if not out:
            raise errors.InvalidArgument("packedDNNHandle is NULL")
        self._making = []
        try:
            pack = load()
            made, self._making = self._making, None
        finally:
            self._making = None
        number = self.packs.add(pack)
        self.layers[number] = made
        out[0] = self.packs.cdata(number)
        return 0

    def from_files(self, out: Any, names: Any, count: int) -> int:
        if not names or count < 1 or count > MAX_BUFFERS:
            raise errors.InvalidArgument(f"modelFileNames must hold 1..{MAX_BUFFERS} names (count {count})")
        paths = [self.string(names[i], f"modelFileNames[{i}]") for i in range(count)]
        return self._load(out, lambda: hb.runtime().initialize_from_files(paths))

    def from_ddr(self, out: Any, data: Any, lengths: Any, count: int) -> int:
        if not data or not lengths or count < 1 or count > MAX_BUFFERS:
            raise errors.InvalidArgument(f"modelData and modelDataLengths must hold 1..{MAX_BUFFERS} models "
                                         f"(count {count})")
        items = []
        for i in range(count):
            n = int(lengths[i])
            if not data[i] or not 0 < n <= MAX_MODEL_BYTES:
                raise errors.InvalidArgument(f"modelData[{i}] must be a model of 1..{MAX_MODEL_BYTES} bytes "
                                             f"(length {n})")
            items.append(bytes(self.ffi.buffer(data[i], n)))
        return self._load(out, lambda: hb.runtime().initialize_from_ddr(items))

    def release(self, pack: Any) -> int:
        p = self.packs.get(pack)
        hb.runtime().release(p)
        number = self.packs.key(pack)
        self.packs.pop(pack)
        self.models.drop(lambda m: m.pack is not p)
        self.kept.pop(number, None)
        for layer in self.layers.pop(number, []):
            layer.destroy()
        return 0

    def model_names(self, out: Any, count: Any, pack: Any) -> int:
        if not out or not count:
            raise errors.InvalidArgument("modelNameList and modelNameCount must not be NULL")
        p = self.packs.get(pack)
        names = hb.runtime().model_name_list(p)
        strings = [self.ffi.new("char[]", n.encode()) for n in names]
        array = self.ffi.new("char const *[]", strings + [self.ffi.NULL])
        self.kept[self.packs.key(pack)] += [strings, array]
        out[0], count[0] = array, len(names)
        return 0

    def model_handle(self, out: Any, pack: Any, name: Any) -> int:
        if not out:
            raise errors.InvalidArgument("dnnHandle is NULL")
        model = hb.runtime().model_handle(self.packs.get(pack), self.string(name, "modelName"))
        number = self.models.find(model)
        out[0] = self.models.cdata(number if number is not None else self.models.add(model))
        return 0

    def _keep_for(self, model: Any) -> list:
        return self.kept[self.packs.find(model.pack)]

    def count(self, out: Any, model: Any, outputs: int) -> int:
        if not out:
            raise errors.InvalidArgument("the count pointer is NULL")
        m, rt = self.models.get(model), hb.runtime()
        out[0] = rt.output_count(m) if outputs else rt.input_count(m)
        return 0

    def name(self, out: Any, model: Any, index: int, outputs: int) -> int:
        if not out:
            raise errors.InvalidArgument("name is NULL")
        m, rt = self.models.get(model), hb.runtime()
        text = self.ffi.new("char[]", (rt.output_name(m, index) if outputs else rt.input_name(m, index)).encode())
        self._keep_for(m).append(text)
        out[0] = text
        return 0

    def properties(self, out: Any, model: Any, index: int, outputs: int) -> int:
        if not out:
            raise errors.InvalidArgument("properties is NULL")
        m, rt = self.models.get(model), hb.runtime()
        props = rt.output_tensor_properties(m, index) if outputs else rt.input_tensor_properties(m, index)
        self.props_to_c(props, out, self._keep_for(m))
        return 0

    def infer(self, task: Any, output: Any, inputs: Any, model: Any, ctrl: Any) -> int:
        if not task:
            raise errors.InvalidArgument("taskHandle is NULL: pass the address of an hbDNNTaskHandle_t")
        m, rt = self.models.get(model), hb.runtime()
        n_in, n_out = rt.input_count(m), rt.output_count(m)
        if n_out and (not output or not output[0]):
            raise errors.InvalidArgument("output is NULL: pass the address of an array of the model's output tensors")
        if n_in and not inputs:
            raise errors.InvalidArgument("input is NULL: pass an array of the model's input tensors")
        outs = [self.tensor(output[0][i], f"output[{i}]") for i in range(n_out)]
        ins = [self.tensor(inputs[i], f"input[{i}]") for i in range(n_in)]
        from arm_side import dnn       # the model runtime (imported on the first hbDNN call)
        c = dnn.InferCtrlParam() if not ctrl else dnn.InferCtrlParam(
            bpu_core_id=int(ctrl.bpuCoreId), priority=int(ctrl.priority), more=bool(ctrl.more),
            custom_id=int(ctrl.customId))
        existing = task[0]
        given = self.dnn_tasks.get(existing) if existing else None
        t = rt.infer(outs, ins, m, c, task=given)
        if given is None:
            task[0] = self.dnn_tasks.cdata(self.dnn_tasks.add(t))
        return 0

    def dnn_wait(self, task: Any, timeout: int) -> int:
        hb.runtime().wait_task_done(self.dnn_tasks.get(task), timeout)
        return 0

    def dnn_release_task(self, task: Any) -> int:
        t = self.dnn_tasks.get(task)
        hb.runtime().release_task(t)
        self.dnn_tasks.pop(task)
        return 0

    def set_done_cb(self, task: Any, cb: Any, userdata: Any) -> int:
        if not cb:
            raise errors.InvalidArgument("cb is NULL")
        t = self.dnn_tasks.get(task)
        handle = task

        def done(_task: Any, status: int, _userdata: Any) -> None:
            cb(handle, status, userdata)
        hb.runtime().set_task_done_callback(t, done)
        return 0

    def register_layer(self, layer_type: Any, creator: Any) -> int:
        if not creator:
            raise errors.InvalidArgument("layerCreator is NULL")
        name = self.string(layer_type, "layerType")
        layer_class = c_layer_class()
        hb.runtime().register_layer_creator(name, lambda: layer_class(self, creator, name))
        return 0

    def unregister_layer(self, layer_type: Any) -> int:
        hb.runtime().unregister_layer_creator(self.string(layer_type, "layerType"))
        return 0


@functools.cache
def c_layer_class() -> type:
    """The class of layers made by a C hbDNNLayerCreator (built on first use: its base class is
    the model runtime's, which imports onnxruntime)."""
    from arm_side.dnn import layers as dnn_layers

    class CLayer(dnn_layers.Layer):
        """A layer whose forward is C code (hbDNNLayer, made by a C hbDNNLayerCreator)."""

        def __init__(self, bridge: Bridge, creator: Any, layer_type: str) -> None:
            self.bridge, self.layer_type = bridge, layer_type
            self.ptr = creator()
            if not self.ptr or not self.ptr.forward:
                raise errors.InvalidModel(f"the layer creator of {layer_type} returned NULL or a layer without forward")
            self.destroyed = False
            if bridge._making is not None:
                bridge._making.append(self)

        def forward(self, ctx: Any, inputs: list, outputs: list) -> None:
            ffi = self.bridge.ffi
            keep: list = []
            cin, cout = ffi.new("hbDNNTensor[]", max(1, len(inputs))), ffi.new("hbDNNTensor[]", max(1, len(outputs)))
            for array, tensors, inputs_side in ((cin, inputs, True), (cout, outputs, False)):
                for i, t in enumerate(tensors):
                    if inputs_side and t.mem.cached:
                        t.mem.flush(INVALIDATE)
                    view = t.mem.array()
                    keep.append(view)
                    array[i].sysMem[0].phyAddr, array[i].sysMem[0].memSize = t.mem.phys_addr, t.mem.size
                    array[i].sysMem[0].virAddr = ffi.cast("void *", int(view.ctypes.data))
                    self.bridge.props_to_c(t.props, array[i].properties, keep)
            code = int(self.ptr.forward(self.ptr, cin, len(inputs), cout, len(outputs)))
            if code != 0:
                cls = errors.error_class(code)
                raise (cls if cls is not errors.VdspError else errors.RunTaskFailed)(
                    f"layer {self.layer_type}: forward returned {code}")
            for t in outputs:
                if t.mem.cached:
                    t.mem.flush(CLEAN)

        def destroy(self) -> None:
            if not self.destroyed and self.ptr.destroy:
                self.ptr.destroy(self.ptr)
            self.destroyed = True

    return CLayer


def _exit() -> None:
    """The C program's exit: the SDK's exit handlers (close the Soc, free this process's memory)."""
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass


def _install_task_path(ffi: Any, bridge: Bridge) -> None:
    """The functions every DSP task calls (submit again, wait, release) without the generic
    wrapper: one Python frame each, the same codes (they replace the wrapped ones)."""
    tasks, calls, live, invalid = bridge.dsp_tasks._objects, bridge._calls, bridge._live, errors.InvalidArgument.code

    def rpc_again(key: Any, key_length: int) -> int:
        """A submission whose bytes (glue.c's key) were seen before, with its buffers still live:
        the new task's handle; 0 when they were not (glue.c then calls Bridge.rpc)."""
        try:
            call = calls.get(ffi.buffer(key, key_length)[:])
            if call is None or not live(call[5]):
                return 0
            return bridge.dsp_tasks.add(hb.soc().rpc(call[0], call[1], call[2], call[3], options=call[4]))
        except Exception as exc:
            return bridge.failed(exc, invalid)

    def dsp_wait(task: int, timeout: int) -> int:
        try:
            t = tasks.get(task)
            if t is None:
                return bridge.failed(bridge.dsp_tasks.error(f"{bridge.dsp_tasks.text(task)} is not a live DSP task "
                                                            "handle of this process (never handed out, or released)"),
                                     invalid)
            t.wait(timeout if timeout > 0 else 0)
            return 0
        except Exception as exc:
            return bridge.failed(exc, invalid)

    def dsp_release(task: int) -> int:
        try:
            t = tasks.pop(task, None)
            if t is None:
                return bridge.failed(bridge.dsp_tasks.error(f"{bridge.dsp_tasks.text(task)} is not a live DSP task "
                                                            "handle of this process (never handed out, or released "
                                                            "before)"), invalid)
            t.release()
            return 0
        except Exception as exc:
            return bridge.failed(exc, invalid)

    for fn in (rpc_again, dsp_wait, dsp_release):
        ffi.def_extern(name="vdsp_py_" + fn.__name__, error=invalid)(fn)


def _attach_native(ffi: Any, lib: Any, bridge: Bridge) -> None:
    """Adopt the native side's DDR owner and look buffers up there, if the front attached it."""
    owner, lock_fd, directory = ffi.new("uint32_t *"), ffi.new("int *"), ffi.new("char[]", 4096)
    if lib is None or lib.vdsp_native_attached(owner, lock_fd, directory, 4096) != 0:
        return
    ddr.adopt_owner(ffi.string(directory).decode(), int(owner[0]), int(lock_fd[0]))
    bridge.native = lib


def install(ffi: Any, lib: Any = None) -> Bridge:
    """Bind the ``extern "Python"`` functions of capi.cdef to a new :class:`Bridge` (``lib``:
    the library's, to find the native side where the front attached it)."""
    bridge = Bridge(ffi)
    _attach_native(ffi, lib, bridge)
    sys_invalid, dnn_invalid = errors.SysInvalidArgument.code, errors.InvalidArgument.code

    def code(name: str, fn: Callable[..., int], invalid: int) -> None:
        def call(*args: Any) -> int:
            try:
                return fn(*args)
            except Exception as exc:        # every failure is a code, never an exception into C
                return bridge.failed(exc, invalid)
        ffi.def_extern(name="vdsp_py_" + name, error=invalid)(call)

    b = bridge
    functions: list[tuple[str, Callable[..., int], int]] = [
        ("alloc", b.alloc, sys_invalid), ("flush", b.flush, sys_invalid), ("free", b.free, sys_invalid),
        ("write", b.write, sys_invalid), ("read", b.read, sys_invalid), ("register", b.register, sys_invalid),
        ("rpc", b.rpc, dnn_invalid), ("rpc_packed", b.rpc_packed, dnn_invalid),
        ("dsp_value", b.dsp_value, dnn_invalid), ("dsp_values_json", b.dsp_values_json, dnn_invalid),
        ("dsp_core", b.dsp_core, dnn_invalid), ("dsp_board", b.dsp_board, dnn_invalid),
        ("dnn_from_files", b.from_files, dnn_invalid),
        ("dnn_from_ddr", b.from_ddr, dnn_invalid), ("dnn_release", b.release, dnn_invalid),
        ("dnn_model_names", b.model_names, dnn_invalid), ("dnn_model_handle", b.model_handle, dnn_invalid),
        ("dnn_count", b.count, dnn_invalid), ("dnn_name", b.name, dnn_invalid),
        ("dnn_properties", b.properties, dnn_invalid), ("dnn_infer", b.infer, dnn_invalid),
        ("dnn_wait", b.dnn_wait, dnn_invalid), ("dnn_release_task", b.dnn_release_task, dnn_invalid),
        ("dnn_set_done_cb", b.set_done_cb, dnn_invalid), ("dnn_register_layer", b.register_layer, dnn_invalid),
        ("dnn_unregister_layer", b.unregister_layer, dnn_invalid)]
    for name, fn, invalid in functions:
        code(name, fn, invalid)
    _install_task_path(ffi, bridge)

    ffi.def_extern(name="vdsp_py_start", error=0)(lambda: 1)
    ffi.def_extern(name="vdsp_py_exit")(_exit)
    ffi.def_extern(name="vdsp_py_error_desc", error=ffi.NULL)(bridge.error_desc)
    ffi.def_extern(name="vdsp_py_version", error=ffi.NULL)(bridge.version)
    return bridge


"""Horizon's C names over the Pythonic SDK, for porting J5 samples line by line.

::

    from arm_side import hb, opids
    src, dst = hb.hbSysMem(), hb.hbSysMem()
    hb.hbSysAllocCachedMem(src, 4096)              # 0, or a negative HB_* code
    hb.hbSysAllocMem(dst, 4096)
    src.virAddr[:] = 7
    hb.hbSysFlushMem(src, hb.HB_SYS_MEM_CACHE_CLEAN)
    task, ctrl = hb.hbDSPTask_t(), hb.hbDSPRpcCtrlParam()
    hb.HB_DSP_INITIALIZE_RPC_CTRL_PARAM(ctrl)
    hb.hbDSPRpcV2(task, src, dst, opids.MEMCPY, ctrl)
    ret = hb.hbDSPWaitTaskDone(task, 1000)         # hb.hbDNNGetErrorDesc(ret) says what went wrong
    hb.hbDSPReleaseTask(task)

Conventions, as in C: every ``int32_t`` function returns 0 on success or the negative code
of the error (``protocol.errors``: HB_DNN_* -6000001.., HB_SYS_* -6000129.., HB_DSP_*
-6000257..), never raises; ``hb.last_error()`` is the exception behind the last non-zero code
of this thread. Out-parameters (``T *out`` in C) are objects the call fills: an
:class:`hbSysMem` for memory, a :class:`Ref` (alias ``hbDSPTask_t``, ``hbDNNTaskHandle_t``,
``hbPackedDNNHandle_t``, ``hbDNNHandle_t``) whose ``value`` receives a handle, count, name or
properties. Arguments of the wrong kind give HB_SYS_INVALID_ARGUMENT (memory functions) or
HB_DNN_INVALID_ARGUMENT (the others).

The functions work on one SoC connection per process: the one given to :func:`use`, else a
``Soc()`` opened at the first call and closed at exit (or by :func:`close`); the hbDNN
functions on one ``arm_side.dnn.Runtime`` of it (``use(soc, runtime=...)`` to pass one
configured otherwise than by the ``HB_DNN_*`` variables). docs/hb.md lists each name beside
its Pythonic equivalent.

The hbSys* and hbDNN* signatures and codes are those of the BPU SDK API manual. The manual
does not cover the DSP RPC; ``hbDSPRpcV2``, ``hbDSPWaitTaskDone``, ``hbDSPReleaseTask`` and
``hbDSPRpcCtrlParam`` follow the J5 DSP SDK's names, with the operator's parameters as an
optional ``params`` dict (what the J5 sample packs into its input buffer, and C's hbDSPRpcV2
reads packed there: docs/capi.md; Python has no struct to pack) and any number of input and
output buffers (a list, or one hbSysMem as in C).
"""
from __future__ import annotations

import atexit
import dataclasses
import functools
import importlib
import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from protocol import errors
from protocol.constants import Core
from protocol.task_options import TaskOptions
from arm_side import nn
from arm_side.memory import CLEAN, INVALIDATE, Mem
from arm_side.soc import Soc
from arm_side.task import Task
from vdsp_board.memory import ddr

if TYPE_CHECKING:
    from arm_side import dnn


def _dnn():
    """arm_side.dnn, imported at the first hbDNN call: it loads onnxruntime (a third of a second,
    tens of MB), which code using only hbSys*/hbDSP* (the C face's DSP programs) never needs."""
    return importlib.import_module("arm_side.dnn")


# --- constants -----------------------------------------------------------------------------------
HB_SYS_MEM_CACHE_INVALIDATE = INVALIDATE        # hbSysMemFlushFlag
HB_SYS_MEM_CACHE_CLEAN = CLEAN
HB_BPU_CORE_ANY, HB_BPU_CORE_0, HB_BPU_CORE_1 = 0, 1, 2         # hbBPUCore (arm_side.dnn.tasks: the same)
HB_DSP_CORE_ANY, HB_DSP_CORE_0, HB_DSP_CORE_1 = int(Core.ANY), int(Core.CORE_0), int(Core.CORE_1)
HB_DNN_PRIORITY_LOWEST, HB_DNN_PRIORITY_HIGHEST = 0, 255                    # hbDNNTaskPriority
HB_DNN_PRIORITY_PREEMP = HB_DNN_PRIORITY_HIGHEST
HB_DSP_PRIORITY_LOWEST, HB_DSP_PRIORITY_HIGHEST = 0, 255
HB_DNN_SUCCESS = HB_SYS_SUCCESS = 0
HB_DNN_MULTI_PROGRESS_USE_ERROR = -6000016
# Every error code of protocol.errors by its C name (tests/integration/test_hb.py checks that none is missing).
HB_DNN_INVALID_ARGUMENT: int = errors.InvalidArgument.code
HB_DNN_INVALID_MODEL: int = errors.InvalidModel.code
HB_DNN_MODEL_NUMBER_EXCEED_LIMIT: int = errors.ModelNumberExceedLimit.code
HB_DNN_INVALID_PACKED_DNN_HANDLE: int = errors.InvalidPackedDnnHandle.code
HB_DNN_INVALID_DNN_HANDLE: int = errors.InvalidDnnHandle.code
HB_DNN_CAN_NOT_OPEN_FILE: int = errors.FileNotFound.code
HB_DNN_OUT_OF_MEMORY: int = errors.OutOfMemory.code
HB_DNN_TIMEOUT: int = errors.TaskTimeout.code
HB_DNN_TASK_NUM_EXCEED_LIMIT: int = errors.TaskNumExceedLimit.code
HB_DNN_TASK_BATCH_SIZE_EXCEED_LIMIT: int = errors.TaskBatchSizeExceedLimit.code
HB_DNN_INVALID_TASK_HANDLE: int = errors.InvalidTaskHandle.code
HB_DNN_RUN_TASK_FAILED: int = errors.RunTaskFailed.code
HB_DNN_MODEL_IS_RUNNING: int = errors.ModelIsRunning.code
HB_DNN_INCOMPATIBLE_MODEL: int = errors.IncompatibleModel.code
HB_DNN_API_USE_ERROR: int = errors.ApiUseError.code
HB_SYS_INVALID_ARGUMENT: int = errors.SysInvalidArgument.code
HB_SYS_OUT_OF_MEMORY: int = errors.SysOutOfMemory.code
HB_SYS_REGISTER_MEM_FAILED: int = errors.SysRegisterMemFailed.code
HB_SYS_CACHE_NOT_FLUSHED: int = errors.CacheCoherencyError.code
HB_DSP_PROTOCOL_ERROR: int = errors.ProtocolError.code
HB_DSP_BAD_MAGIC: int = errors.BadMagic.code
HB_DSP_MESSAGE_TOO_LARGE: int = errors.MessageTooLarge.code
HB_DSP_UNKNOWN_OPERATOR: int = errors.UnknownOperator.code
HB_DSP_INVALID_CORE: int = errors.InvalidCore.code
HB_DSP_UNKNOWN_COMMAND: int = errors.UnknownCommand.code
HB_DSP_OPERATOR_FAILED: int = errors.OperatorFailed.code
HB_DSP_TASK_CANCELLED: int = errors.TaskCancelled.code
HB_DSP_TCM_OVER_BUDGET: int = errors.TcmOverBudget.code
HB_DSP_DMA_NOT_WAITED: int = errors.DmaNotWaited.code
HB_DSP_KERNEL_MEMORY_FAULT: int = errors.KernelMemoryFault.code
HB_DSP_UNKNOWN_HANDLE: int = errors.UnknownHandle.code
HB_DSP_FREED_HANDLE: int = errors.FreedHandle.code
HB_DSP_HANDLE_OUT_OF_BOUNDS: int = errors.HandleOutOfBounds.code
HB_DSP_FOREIGN_HANDLE: int = errors.ForeignHandle.code
HB_DSP_CLAIM_REFUSED: int = errors.ClaimRefused.code
HB_DSP_CORE_OFFLINE: int = errors.CoreOffline.code
HB_DSP_CORE_CRASHED: int = errors.CoreCrashed.code
HB_DSP_CORE_DEAD: int = errors.CoreDead.code
HB_DSP_BUSY: int = errors.CoreBusy.code
HB_DSP_RELAY_UNAVAILABLE: int = errors.RelayUnavailable.code
HB_DSP_KEY_REFUSED: int = errors.KeyRefused.code


# --- the SoC and runtime these functions use -------------------------------------------------------
_lock = threading.RLock()
_state: dict[str, Any] = {"soc": None, "owned": False, "runtime": None, "owned_runtime": False}
_last = threading.local()


def use(soc: Soc, runtime: dnn.Runtime | None = None) -> None:
    """Make the hb functions use ``soc`` (and ``runtime`` for hbDNN*) from now on."""
    close()
    with _lock:
        _state.update(soc=soc, owned=False, runtime=runtime, owned_runtime=False)


def soc() -> Soc:
    """The Soc in use (opened on first use: ``Soc()``, closed at exit)."""
    s = _state["soc"]
    if s is not None:       # the common case, without the lock (a dict read is atomic)
        return s
    with _lock:
        if _state["soc"] is None:
            _state.update(soc=Soc(), owned=True)
        return _state["soc"]


def runtime() -> dnn.Runtime:
    """The hbDNN runtime in use (``dnn.Runtime(soc())`` on first use, configured by HB_DNN_*)."""
    with _lock:
        if _state["runtime"] is None:
            _state.update(runtime=_dnn().Runtime(soc()), owned_runtime=True)
        return _state["runtime"]


def close() -> None:
    """Close what this module opened itself (a runtime, a Soc); forget what ``use`` gave it."""
    with _lock:
        rt, s = _state["runtime"] if _state["owned_runtime"] else None, _state["soc"] if _state["owned"] else None
        _state.update(soc=None, owned=False, runtime=None, owned_runtime=False)
    if rt is not None:
        rt.close()
    if s is not None:
        s.close()


atexit.register(close)


def last_error() -> BaseException | None:
    """The exception behind this thread's last non-zero return code (None after a success)."""
    return getattr(_last, "error", None)


def _returns_code(invalid: int) -> Callable:
    """0 on success, the error's code on a VdspError, ``invalid`` for arguments of the wrong kind."""
    def deco(fn: Callable) -> Callable[..., int]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kw: Any) -> int:
            try:
                fn(*args, **kw)
            except errors.VdspError as exc:
                _last.error = exc
                return int(exc.code)
            except (TypeError, ValueError, AttributeError, IndexError, KeyError, BufferError) as exc:
                _last.error = exc
                return invalid
            _last.error = None
            return 0
        return wrapper
    return deco


_sys_api = _returns_code(errors.SysInvalidArgument.code)
_dnn_api = _returns_code(errors.InvalidArgument.code)


class Ref:
    """An out-parameter: the call stores its result in ``value`` (C's ``T *``)."""

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Ref({self.value!r})"


hbDSPTask_t = hbDNNTaskHandle_t = hbPackedDNNHandle_t = hbDNNHandle_t = Ref


def _deref(handle: Any) -> Any:
    return handle.value if isinstance(handle, Ref) else handle


def _out(ref: Any, what: str) -> Ref:
    if not isinstance(ref, Ref):
        raise errors.InvalidArgument(f"{what} must be an hb.Ref (the C out-pointer), got {type(ref).__name__}")
    return ref


# --- memory: hbSys* -------------------------------------------------------------------------------
class hbSysMem:
    """hbSysMem: ``phyAddr``, ``virAddr`` (a numpy uint8 view of the memory as the CPU sees it),
    ``memSize``. ``mem`` is the :class:`arm_side.Mem` behind it (None until allocated or registered)."""

    def __init__(self, phyAddr: int = 0, memSize: int = 0) -> None:
        self.phyAddr, self.memSize = phyAddr, memSize
        self.virAddr: np.ndarray | None = None
        self.mem: Mem | None = None

    def _fill(self, mem: Mem) -> None:
        self.mem, self.phyAddr, self.memSize, self.virAddr = mem, mem.phys_addr, mem.size, mem.array()

    def _clear(self) -> None:
        self.mem, self.virAddr = None, None

    def _live(self) -> Mem:
        if self.mem is None or self.mem.freed:
            raise errors.SysInvalidArgument(f"hbSysMem at 0x{self.phyAddr:x} is not allocated or registered "
                                            "(or was freed)")
        return self.mem

    def _task_buffer(self, what: str) -> Mem | tuple[int, int]:
        """What a task gets for this struct, as in C (docs/capi.md, ``hbSysMem``): its buffer; the
        range ``phyAddr``/``memSize`` name inside it, as a ``(phys, size)`` handle; another owner's
        memory (a struct with no ``mem``: ``hbSysMem(phyAddr, memSize)``) as ``(phyAddr, memSize)``,
        which the SoC checks against that owner's grants. Raises SysInvalidArgument for memory of
        this process that is not live, and for a range that runs past the end of its buffer."""
        mem, phys, size = self.mem, self.phyAddr, self.memSize
        if mem is None or mem.freed:
            if mem is None and ddr.parse_phys(phys)[0] != ddr.current_owner().id:
                return phys, size
            raise errors.SysInvalidArgument(f"{what} (hbSysMem at 0x{phys:x}, {size} bytes) is not allocated or "
                                            "registered in this process (or was freed)")
        if phys == mem.phys_addr and size == mem.size:
            return mem
        if mem.phys_addr <= phys and phys + size <= mem.phys_addr + mem.size:
            return phys, size
        raise errors.SysInvalidArgument(f"{what} (hbSysMem at 0x{phys:x}, {size} bytes) runs past the end of its "
                                        f"buffer (0x{mem.phys_addr:x}, {mem.size} bytes): its memSize is too large")

    def __repr__(self) -> str:
        return f"hbSysMem(phyAddr=0x{self.phyAddr:x}, memSize={self.memSize}, mem={self.mem!r})"


def _sysmem(mem: Any) -> hbSysMem:
    if not isinstance(mem, hbSysMem):
        raise errors.SysInvalidArgument(f"mem must be an hb.hbSysMem, got {type(mem).__name__}")
    return mem


@_sys_api
def hbSysAllocMem(mem: hbSysMem, size: int) -> None:
    """Uncached memory (``soc.mem.alloc``)."""
    _sysmem(mem)._fill(soc().mem.alloc(size))


@_sys_api
def hbSysAllocCachedMem(mem: hbSysMem, size: int) -> None:
    """Cached memory (``soc.mem.alloc_cached``): flush CLEAN after CPU writes, INVALIDATE before reads."""
    _sysmem(mem)._fill(soc().mem.alloc_cached(size))


@_sys_api
def hbSysFlushMem(mem: hbSysMem, flag: int) -> None:
    """``mem.flush(flag)``: HB_SYS_MEM_CACHE_CLEAN or HB_SYS_MEM_CACHE_INVALIDATE."""
    _sysmem(mem)._live().flush(flag)


@_sys_api
def hbSysFreeMem(mem: hbSysMem) -> None:
    """``mem.free()``."""
    m = _sysmem(mem)
    m._live().free()
    m._clear()


@_sys_api
def hbSysWriteMem(dest: hbSysMem, src: Any, size: int) -> None:
    """Copy ``size`` bytes of ``src`` (bytes-like) in (``mem.write``)."""
    data = memoryview(src).cast("B")
    if not isinstance(size, int) or not 0 <= size <= data.nbytes:
        raise errors.SysInvalidArgument(f"size {size!r} must be 0..{data.nbytes} (the bytes src holds)")
    _sysmem(dest)._live().write(data[:size])


@_sys_api
def hbSysReadMem(dest: Any, src: hbSysMem, size: int) -> None:
    """Copy ``size`` bytes out into ``dest`` (a writable bytes-like: bytearray, numpy array)."""
    out = memoryview(dest).cast("B")
    if out.readonly:
        raise errors.SysInvalidArgument("dest must be writable (a bytearray or a numpy array)")
    if not isinstance(size, int) or not 0 <= size <= out.nbytes:
        raise errors.SysInvalidArgument(f"size {size!r} must be 0..{out.nbytes} (the bytes dest holds)")
    out[:size] = _sysmem(src)._live().read(size)


@_sys_api
def hbSysRegisterMem(mem: hbSysMem) -> None:
    """Map ``mem.memSize`` bytes at ``mem.phyAddr`` (this process's, or granted to it) as cached
    memory (``soc.mem.register``); fills ``virAddr``."""
    m = _sysmem(mem)
    m._fill(soc().mem.register(m.phyAddr, m.memSize))


@_sys_api
def hbSysUnregisterMem(mem: hbSysMem) -> None:
    """``soc.mem.unregister(mem)``."""
    m = _sysmem(mem)
    soc().mem.unregister(m._live())
    m._clear()


# --- DSP tasks: hbDSP* ----------------------------------------------------------------------------
@dataclasses.dataclass
class hbDSPRpcCtrlParam:
    """Where and how urgently a DSP task runs: ``dspCoreId`` (HB_DSP_CORE_ANY/_0/_1), ``priority``
    0..255 (255 = pre-emptive), ``customId`` (smaller first among equal priorities)."""
    dspCoreId: int = HB_DSP_CORE_ANY
    priority: int = HB_DSP_PRIORITY_LOWEST
    customId: int = 0
    reserved1: int = 0
    reserved2: int = 0

    def options(self) -> TaskOptions:
        """The SDK's value for the same. Raises InvalidCore / InvalidArgument."""
        return TaskOptions(core=self.dspCoreId, priority=self.priority, custom_id=self.customId)


def HB_DSP_INITIALIZE_RPC_CTRL_PARAM(param: hbDSPRpcCtrlParam) -> None:
    """Reset ``param`` to the defaults (any core, lowest priority)."""
    for f in dataclasses.fields(hbDSPRpcCtrlParam):
        setattr(param, f.name, f.default)


def _mems(value: Any, what: str) -> list[Mem | tuple[int, int]]:
    if value is None:
        return []
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, hbSysMem):
            raise errors.InvalidArgument(f"{what}[{i}] must be an hb.hbSysMem, got {type(item).__name__}")
        out.append(item._task_buffer(f"{what}[{i}]"))
    return out


def _dsp_task(handle: Any) -> Task:
    task = _deref(handle)
    if not isinstance(task, Task):
        raise errors.InvalidTaskHandle(f"not a DSP task handle: {task!r}")
    return task


@_dnn_api
def hbDSPRpcV2(taskHandle: Ref, input: Any, output: Any, rpcCmd: int, ctrlParam: hbDSPRpcCtrlParam | None = None,
               params: dict | None = None) -> None:
    """Submit operator ``rpcCmd`` (``soc.rpc``) on ``input`` and ``output`` (an hbSysMem, a list of
    them, or None); ``taskHandle.value`` receives the task. The operator's result values are
    ``taskHandle.value.values`` after hbDSPWaitTaskDone."""
    out = _out(taskHandle, "taskHandle")
    ctrl = ctrlParam if ctrlParam is not None else hbDSPRpcCtrlParam()
    if not isinstance(ctrl, hbDSPRpcCtrlParam):
        raise errors.InvalidArgument(f"ctrlParam must be an hb.hbDSPRpcCtrlParam, got {type(ctrl).__name__}")
    out.value = soc().rpc(rpcCmd, _mems(input, "input"), _mems(output, "output"), params, options=ctrl.options())


@_dnn_api
def hbDSPWaitTaskDone(taskHandle: Any, timeout: int) -> None:
    """``task.wait(timeout)``: > 0 waits that many ms (HB_DNN_TIMEOUT after; the task goes on),
    <= 0 for ever; a failed task returns its error's code."""
    _dsp_task(taskHandle).wait(timeout)


@_dnn_api
def hbDSPReleaseTask(taskHandle: Any) -> None:
    """``task.release()``: a queued task never runs, a running one's result is dropped; the
    handle is invalid after, as in C (a second release: HB_DNN_INVALID_TASK_HANDLE)."""
    task = _dsp_task(taskHandle)
    if task.released:
        raise errors.InvalidTaskHandle(f"task {task.msg_id} was released already")
    task.release()


# --- model runtime: hbDNN* ------------------------------------------------------------------------
def hbDNNGetVersion() -> str:
    """``dnn.version()``."""
    return _dnn().version()


def hbDNNGetErrorDesc(errorCode: int) -> str:
    """``errors.describe(code)``: the code's name and meaning."""
    return errors.describe(errorCode)


@dataclasses.dataclass
class hbDNNInferCtrlParam:
    """hbDNNInferCtrlParam with the C field names (see ``dnn.InferCtrlParam``)."""
    bpuCoreId: int = HB_BPU_CORE_ANY
    priority: int = HB_DNN_PRIORITY_LOWEST
    more: int = 0
    customId: int = 0
    reserved1: int = 0
    reserved2: int = 0

    def to_dnn(self) -> dnn.InferCtrlParam:
        return _dnn().InferCtrlParam(bpu_core_id=self.bpuCoreId, priority=self.priority, more=bool(self.more),
                                  custom_id=self.customId)


def HB_DNN_INITIALIZE_INFER_CTRL_PARAM(param: hbDNNInferCtrlParam) -> None:
    """Reset ``param`` to the manual's defaults (any core, lowest priority, no more, customId 0)."""
    for f in dataclasses.fields(hbDNNInferCtrlParam):
        setattr(param, f.name, f.default)


@dataclasses.dataclass
class hbDNNTensor:
    """hbDNNTensor: ``sysMem`` (a list of hbSysMem; the first holds the tensor) and ``properties``
    (``nn.TensorProperties`` / ``dnn.ImageProperties``, as hbDNNGet*TensorProperties gives them)."""
    sysMem: list = dataclasses.field(default_factory=lambda: [hbSysMem()])
    properties: Any = None

    def to_nn(self) -> nn.Tensor:
        if not self.sysMem or not isinstance(self.sysMem[0], hbSysMem):
            raise errors.InvalidArgument("hbDNNTensor.sysMem[0] must be an hb.hbSysMem")
        return nn.Tensor(self.sysMem[0]._live(), self.properties)


def _tensors(values: Any, what: str) -> list[nn.Tensor]:
    items = list(values) if isinstance(values, (list, tuple)) else [values]
    out = []
    for i, t in enumerate(items):
        if not isinstance(t, hbDNNTensor):
            raise errors.InvalidArgument(f"{what}[{i}] must be an hb.hbDNNTensor, got {type(t).__name__}")
        out.append(t.to_nn())
    return out


@_dnn_api
def hbDNNInitializeFromFiles(packedDNNHandle: Ref, modelFileNames: Sequence[str], modelFileCount: int) -> None:
    """``rt.initialize_from_files(names)``."""
    _out(packedDNNHandle, "packedDNNHandle").value = runtime().initialize_from_files(
        list(modelFileNames)[:modelFileCount])


@_dnn_api
def hbDNNInitializeFromDDR(packedDNNHandle: Ref, modelData: Sequence[Any], modelDataLengths: Sequence[int],
                           modelDataCount: int) -> None:
    """``rt.initialize_from_ddr(buffers)``: each model's bytes (or an hbSysMem holding them)."""
    items = []
    for data, length in list(zip(modelData, modelDataLengths))[:modelDataCount]:
        if isinstance(data, hbSysMem):
            data = data._live().read(length)
        items.append(bytes(memoryview(data).cast("B")[:length]))
    _out(packedDNNHandle, "packedDNNHandle").value = runtime().initialize_from_ddr(items)


@_dnn_api
def hbDNNRelease(packedDNNHandle: Any) -> None:
    """``rt.release(pack)``."""
    runtime().release(_deref(packedDNNHandle))


@_dnn_api
def hbDNNGetModelNameList(modelNameList: Ref, modelNameCount: Ref, packedDNNHandle: Any) -> None:
    """``rt.model_name_list(pack)`` and its length."""
    names = runtime().model_name_list(_deref(packedDNNHandle))
    _out(modelNameList, "modelNameList").value = names
    _out(modelNameCount, "modelNameCount").value = len(names)


@_dnn_api
def hbDNNGetModelHandle(dnnHandle: Ref, packedDNNHandle: Any, modelName: str) -> None:
    """``rt.model_handle(pack, name)``."""
    _out(dnnHandle, "dnnHandle").value = runtime().model_handle(_deref(packedDNNHandle), modelName)


@_dnn_api
def hbDNNGetInputCount(inputCount: Ref, dnnHandle: Any) -> None:
    _out(inputCount, "inputCount").value = runtime().input_count(_deref(dnnHandle))


@_dnn_api
def hbDNNGetOutputCount(outputCount: Ref, dnnHandle: Any) -> None:
    _out(outputCount, "outputCount").value = runtime().output_count(_deref(dnnHandle))


@_dnn_api
def hbDNNGetInputName(name: Ref, dnnHandle: Any, inputIndex: int) -> None:
    _out(name, "name").value = runtime().input_name(_deref(dnnHandle), inputIndex)


@_dnn_api
def hbDNNGetOutputName(name: Ref, dnnHandle: Any, outputIndex: int) -> None:
    _out(name, "name").value = runtime().output_name(_deref(dnnHandle), outputIndex)


@_dnn_api
def hbDNNGetInputTensorProperties(properties: Ref, dnnHandle: Any, inputIndex: int) -> None:
    _out(properties, "properties").value = runtime().input_tensor_properties(_deref(dnnHandle), inputIndex)


@_dnn_api
def hbDNNGetOutputTensorProperties(properties: Ref, dnnHandle: Any, outputIndex: int) -> None:
    _out(properties, "properties").value = runtime().output_tensor_properties(_deref(dnnHandle), outputIndex)


@_dnn_api
def hbDNNInfer(taskHandle: Ref, output: Any, input: Any, dnnHandle: Any,
               inferCtrlParam: hbDNNInferCtrlParam | None = None) -> None:
    """``rt.infer(outputs, inputs, model, ctrl, task)``: ``taskHandle.value`` None makes a new task;
    a handle from an earlier call with ``more`` set appends to it (as in C)."""
    ref = _out(taskHandle, "taskHandle")
    ctrl = inferCtrlParam if inferCtrlParam is not None else hbDNNInferCtrlParam()
    if not isinstance(ctrl, hbDNNInferCtrlParam):
        raise errors.InvalidArgument(f"inferCtrlParam must be an hb.hbDNNInferCtrlParam, got {type(ctrl).__name__}")
    ref.value = runtime().infer(_tensors(output, "output"), _tensors(input, "input"), _deref(dnnHandle),
                                ctrl.to_dnn(), task=ref.value)


@_dnn_api
def hbDNNWaitTaskDone(taskHandle: Any, timeout: int) -> None:
    """``rt.wait_task_done(task, timeout)``: > 0 ms, <= 0 for ever."""
    runtime().wait_task_done(_deref(taskHandle), timeout)


@_dnn_api
def hbDNNReleaseTask(taskHandle: Any) -> None:
    """``rt.release_task(task)``."""
    runtime().release_task(_deref(taskHandle))


@_dnn_api
def hbDNNSetTaskDoneCb(taskHandle: Any, cb: Callable, userdata: Any = None) -> None:
    """``rt.set_task_done_callback(task, cb, userdata)``: ``cb(task, status, userdata)``."""
    runtime().set_task_done_callback(_deref(taskHandle), cb, userdata)


@_dnn_api
def hbDNNRegisterLayerCreator(layerType: str, layerCreator: Callable) -> None:
    """``rt.register_layer_creator(type, creator)``."""
    runtime().register_layer_creator(layerType, layerCreator)


@_dnn_api
def hbDNNUnregisterLayerCreator(layerType: str) -> None:
    """``rt.unregister_layer_creator(type)``."""
    runtime().unregister_layer_creator(layerType)



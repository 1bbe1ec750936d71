"""The one exception tree of vdsp-sim, each class with a stable numeric code.

Codes follow the Horizon style: HB_DNN_* from -6000001, HB_SYS_* from
-6000129, and vdsp-specific HB_DSP_* from -6000257 (protocol, handles, cores).
The same codes travel on the wire as ``{code, name, message}``.

::

    VdspError                               (base; code -6000012 run task failed)
    ├── InvalidArgument         -6000001    HB_DNN_INVALID_ARGUMENT
    │   ├── UnknownOperator     -6000260    HB_DSP_UNKNOWN_OPERATOR
    │   └── InvalidCore         -6000261    HB_DSP_INVALID_CORE
    ├── InvalidModel            -6000002    HB_DNN_INVALID_MODEL (model file/data, arm_side.dnn)
    ├── ModelNumberExceedLimit  -6000003    HB_DNN_MODEL_NUMBER_EXCEED_LIMIT
    ├── InvalidPackedDnnHandle  -6000004    HB_DNN_INVALID_PACKED_DNN_HANDLE
    ├── InvalidDnnHandle        -6000005    HB_DNN_INVALID_DNN_HANDLE
    ├── FileNotFound            -6000006    HB_DNN_CAN_NOT_OPEN_FILE
    ├── OutOfMemory             -6000007    HB_DNN_OUT_OF_MEMORY
    ├── TaskTimeout             -6000008    HB_DNN_TIMEOUT
    ├── TaskNumExceedLimit      -6000009    HB_DNN_TASK_NUM_EXCEED_LIMIT
    ├── TaskBatchSizeExceedLimit -6000010   HB_DNN_TASK_BATCH_SIZE_EXCEED_LIMIT (``more``)
    ├── InvalidTaskHandle       -6000011    HB_DNN_INVALID_TASK_HANDLE
    ├── RunTaskFailed           -6000012    HB_DNN_RUN_TASK_FAILED
    │   ├── OperatorFailed      -6000270    HB_DSP_OPERATOR_FAILED
    │   ├── TaskCancelled       -6000271    HB_DSP_TASK_CANCELLED
    │   ├── TcmOverBudget       -6000272    HB_DSP_TCM_OVER_BUDGET (C kernel)
    │   ├── DmaNotWaited        -6000273    HB_DSP_DMA_NOT_WAITED (C kernel, strict mode)
    │   └── KernelMemoryFault   -6000274    HB_DSP_KERNEL_MEMORY_FAULT (C kernel)
    ├── ModelIsRunning          -6000013    HB_DNN_MODEL_IS_RUNNING
    ├── IncompatibleModel       -6000014    HB_DNN_INCOMPATIBLE_MODEL
    ├── ApiUseError             -6000015    HB_DNN_API_USE_ERROR
    ├── SysError                            (memory API, hbSys*)
    │   ├── SysInvalidArgument  -6000129    HB_SYS_INVALID_ARGUMENT
    │   ├── SysOutOfMemory      -6000130    HB_SYS_OUT_OF_MEMORY
    │   ├── SysRegisterMemFailed -6000131   HB_SYS_REGISTER_MEM_FAILED
    │   └── CacheCoherencyError -6000132    HB_SYS_CACHE_NOT_FLUSHED (strict mode)
    ├── ProtocolError           -6000257    HB_DSP_PROTOCOL_ERROR (malformed frame)
    │   ├── BadMagic            -6000258    HB_DSP_BAD_MAGIC (magic or version)
    │   ├── MessageTooLarge     -6000259    HB_DSP_MESSAGE_TOO_LARGE
    │   └── UnknownCommand      -6000262    HB_DSP_UNKNOWN_COMMAND
    ├── HandleError                         (a buffer handle the DSP refuses)
    │   ├── UnknownHandle       -6000280    HB_DSP_UNKNOWN_HANDLE
    │   ├── FreedHandle         -6000281    HB_DSP_FREED_HANDLE
    │   ├── HandleOutOfBounds   -6000282    HB_DSP_HANDLE_OUT_OF_BOUNDS
    │   └── ForeignHandle       -6000283    HB_DSP_FOREIGN_HANDLE
    ├── ClaimRefused            -6000284    HB_DSP_CLAIM_REFUSED (HELLO: an owner or role not held)
    ├── CoreError                           (the core cannot serve)
    │   ├── CoreOffline         -6000290    HB_DSP_CORE_OFFLINE
    │   ├── CoreCrashed         -6000291    HB_DSP_CORE_CRASHED
    │   ├── CoreDead            -6000292    HB_DSP_CORE_DEAD (process exited, or hung)
    │   └── CoreBusy            -6000293    HB_DSP_BUSY (queue full)
    ├── RelayUnavailable        -6000300    HB_DSP_RELAY_UNAVAILABLE
    ├── KeyRefused              -6000301    HB_DSP_KEY_REFUSED (tcp: the server refused our CURVE key)
    └── RemoteprocError                     (sysfs-style attribute writes, errno)
        ├── RemoteprocBusy      -16         EBUSY
        ├── RemoteprocNoEnt     -2          ENOENT (firmware image missing)
        ├── RemoteprocInvalid   -22         EINVAL (also a corrupt image)
        └── RemoteprocDenied    -13         EACCES (a write over tcp without an admin key)
"""
from __future__ import annotations

_BY_CODE: dict[int, type["VdspError"]] = {}


class VdspError(Exception):
    """Base of every vdsp-sim error; ``code`` is stable and travels on the wire."""

    code = -6000012
    name = "HB_DNN_RUN_TASK_FAILED"
    description = "run task failed"

    def __init__(self, message: str = "", *, code: int | None = None) -> None:
        super().__init__(message or self.description)
        self.message = message or self.description
        if code is not None:
            self.code = code

    def __init_subclass__(cls, **kw: object) -> None:
        super().__init_subclass__(**kw)
        if "code" in cls.__dict__:
            if cls.code in _BY_CODE:
                raise TypeError(f"duplicate error code {cls.code}")
            _BY_CODE[cls.code] = cls

    def __str__(self) -> str:
        return f"[{self.code} {self.name}] {self.message}"

    def to_wire(self) -> dict:
        """The ``{code, name, message}`` map sent in an ERROR message."""
        return {"code": int(self.code), "name": self.name, "message": self.message}

    def with_wire_extras(self, body: dict) -> "VdspError":
        """Take the fields of an ERROR ``body`` this class defines beyond ``{code, name, message}``."""
        return self


class InvalidArgument(VdspError):
    """HB_DNN_INVALID_ARGUMENT (-6000001): invalid argument."""
    code = -6000001
    name = "HB_DNN_INVALID_ARGUMENT"
    description = "invalid argument"


class UnknownOperator(InvalidArgument):
    """HB_DSP_UNKNOWN_OPERATOR (-6000260): unknown operator."""
    code = -6000260
    name = "HB_DSP_UNKNOWN_OPERATOR"
    description = "unknown operator"


class InvalidCore(InvalidArgument):
    """HB_DSP_INVALID_CORE (-6000261): invalid core id."""
    code = -6000261
    name = "HB_DSP_INVALID_CORE"
    description = "invalid core id"


class InvalidModel(VdspError):
    """HB_DNN_INVALID_MODEL (-6000002): invalid model."""
    code = -6000002
    name = "HB_DNN_INVALID_MODEL"
    description = "invalid model"


class ModelNumberExceedLimit(VdspError):
    """HB_DNN_MODEL_NUMBER_EXCEED_LIMIT (-6000003): model number exceeds limit."""
    code = -6000003
    name = "HB_DNN_MODEL_NUMBER_EXCEED_LIMIT"
    description = "model number exceeds limit"


class InvalidPackedDnnHandle(VdspError):
    """HB_DNN_INVALID_PACKED_DNN_HANDLE (-6000004): invalid packed DNN handle."""
    code = -6000004
    name = "HB_DNN_INVALID_PACKED_DNN_HANDLE"
    description = "invalid packed DNN handle"


class InvalidDnnHandle(VdspError):
    """HB_DNN_INVALID_DNN_HANDLE (-6000005): invalid DNN handle."""
    code = -6000005
    name = "HB_DNN_INVALID_DNN_HANDLE"
    description = "invalid DNN handle"


class FileNotFound(VdspError):
    """HB_DNN_CAN_NOT_OPEN_FILE (-6000006): file does not exist."""
    code = -6000006
    name = "HB_DNN_CAN_NOT_OPEN_FILE"
    description = "file does not exist"


class OutOfMemory(VdspError):
    """HB_DNN_OUT_OF_MEMORY (-6000007): not enough memory."""
    code = -6000007
    name = "HB_DNN_OUT_OF_MEMORY"
    description = "not enough memory"


class TaskTimeout(VdspError):
    """HB_DNN_TIMEOUT (-6000008): timeout."""
    code = -6000008
    name = "HB_DNN_TIMEOUT"
    description = "timeout"


class TaskNumExceedLimit(VdspError):
    """HB_DNN_TASK_NUM_EXCEED_LIMIT (-6000009): task number exceeds limit."""
    code = -6000009
    name = "HB_DNN_TASK_NUM_EXCEED_LIMIT"
    description = "task number exceeds limit"


class TaskBatchSizeExceedLimit(VdspError):
    """HB_DNN_TASK_BATCH_SIZE_EXCEED_LIMIT (-6000010): task batch size exceeds limit."""
    code = -6000010
    name = "HB_DNN_TASK_BATCH_SIZE_EXCEED_LIMIT"
    description = "task batch size exceeds limit"


class InvalidTaskHandle(VdspError):
    """HB_DNN_INVALID_TASK_HANDLE (-6000011): invalid task handle."""
    code = -6000011
    name = "HB_DNN_INVALID_TASK_HANDLE"
    description = "invalid task handle"


class ModelIsRunning(VdspError):
    """HB_DNN_MODEL_IS_RUNNING (-6000013): model is running."""
    code = -6000013
    name = "HB_DNN_MODEL_IS_RUNNING"
    description = "model is running"


class IncompatibleModel(VdspError):
    """HB_DNN_INCOMPATIBLE_MODEL (-6000014): incompatible model."""
    code = -6000014
    name = "HB_DNN_INCOMPATIBLE_MODEL"
    description = "incompatible model"


class ApiUseError(VdspError):
    """HB_DNN_API_USE_ERROR (-6000015): API used wrongly."""
    code = -6000015
    name = "HB_DNN_API_USE_ERROR"
    description = "API used wrongly"




class RunTaskFailed(VdspError):
    code = -6000012
    name = "HB_DNN_RUN_TASK_FAILED"
    description = "run task failed"


class OperatorFailed(RunTaskFailed):
    """HB_DSP_OPERATOR_FAILED (-6000270): operator raised an error."""
    code = -6000270
    name = "HB_DSP_OPERATOR_FAILED"
    description = "operator raised an error"


class TaskCancelled(RunTaskFailed):
    """HB_DSP_TASK_CANCELLED (-6000271): task was released before it ran."""
    code = -6000271
    name = "HB_DSP_TASK_CANCELLED"
    description = "task was released before it ran"


class TcmOverBudget(RunTaskFailed):
    """HB_DSP_TCM_OVER_BUDGET (-6000272): a C kernel allocated more TCM than the operator's budget."""
    code = -6000272
    name = "HB_DSP_TCM_OVER_BUDGET"
    description = "a C kernel allocated more TCM than the operator's budget of the bank"


class DmaNotWaited(RunTaskFailed):
    """HB_DSP_DMA_NOT_WAITED (-6000273): a C kernel used an IDMA destination before the transfer's wait (strict)."""
    code = -6000273
    name = "HB_DSP_DMA_NOT_WAITED"
    description = "a C kernel used an IDMA destination before the transfer's wait"


class KernelMemoryFault(RunTaskFailed):
    """HB_DSP_KERNEL_MEMORY_FAULT (-6000274): a C kernel touched memory outside its buffers (a guard page)."""
    code = -6000274
    name = "HB_DSP_KERNEL_MEMORY_FAULT"
    description = "a C kernel touched memory outside its buffers and TCM allocations, or wrote to an input"




class SysError(VdspError):
    """Errors of the hbSys* memory API."""


class SysInvalidArgument(SysError):
    """HB_SYS_INVALID_ARGUMENT (-6000129): invalid memory argument."""
    code = -6000129
    name = "HB_SYS_INVALID_ARGUMENT"
    description = "invalid memory argument"


class SysOutOfMemory(SysError):
    """HB_SYS_OUT_OF_MEMORY (-6000130): out of memory."""
    code = -6000130
    name = "HB_SYS_OUT_OF_MEMORY"
    description = "out of memory"


class SysRegisterMemFailed(SysError):
    """HB_SYS_REGISTER_MEM_FAILED (-6000131): register memory failed."""
    code = -6000131
    name = "HB_SYS_REGISTER_MEM_FAILED"
    description = "register memory failed"


class CacheCoherencyError(SysError):
    """HB_SYS_CACHE_NOT_FLUSHED (-6000132): cached memory used without the flush it needs."""
    code = -6000132
    name = "HB_SYS_CACHE_NOT_FLUSHED"
    description = "cached memory used without the flush it needs"



class ProtocolError(VdspError):
    """HB_DSP_PROTOCOL_ERROR (-6000257): malformed message."""
    code = -6000257
    name = "HB_DSP_PROTOCOL_ERROR"
    description = "malformed message"


class BadMagic(ProtocolError):
    """HB_DSP_BAD_MAGIC (-6000258): wrong magic or protocol version."""
    code = -6000258
    name = "HB_DSP_BAD_MAGIC"
    description = "wrong magic or protocol version"
    version: int | None = None      # the refused request's protocol version, when that was the fault


class MessageTooLarge(ProtocolError):
    """HB_DSP_MESSAGE_TOO_LARGE (-6000259): message exceeds a size limit."""
    code = -6000259
    name = "HB_DSP_MESSAGE_TOO_LARGE"
    description = "message exceeds a size limit"


class UnknownCommand(ProtocolError):
    """HB_DSP_UNKNOWN_COMMAND (-6000262): unknown command."""
    code = -6000262
    name = "HB_DSP_UNKNOWN_COMMAND"
    description = "unknown command"




class HandleError(VdspError):
    """A buffer handle that the DSP side refuses to map."""


class UnknownHandle(HandleError):
    """HB_DSP_UNKNOWN_HANDLE (-6000280): no memory at this physical address."""
    code = -6000280
    name = "HB_DSP_UNKNOWN_HANDLE"
    description = "no memory at this physical address"


class FreedHandle(HandleError):
    """HB_DSP_FREED_HANDLE (-6000281): memory was freed."""
    code = -6000281
    name = "HB_DSP_FREED_HANDLE"
    description = "memory was freed"


class HandleOutOfBounds(HandleError):
    """HB_DSP_HANDLE_OUT_OF_BOUNDS (-6000282): handle exceeds its memory segment."""
    code = -6000282
    name = "HB_DSP_HANDLE_OUT_OF_BOUNDS"
    description = "handle exceeds its memory segment"


class ForeignHandle(HandleError):
    """HB_DSP_FOREIGN_HANDLE (-6000283): memory belongs to another owner and is not granted to this connection's
    owner."""
    code = -6000283
    name = "HB_DSP_FOREIGN_HANDLE"
    description = "memory belongs to another owner and is not granted to this connection's owner"

    def __init__(self, message: str = "", *, code: int | None = None, unbound: bool = False) -> None:
        super().__init__(message, code=code)
        self.unbound = unbound      # the connection has no verified owner (PROTOCOL.md §6.6 rule 1)

    def to_wire(self) -> dict:
        body = super().to_wire()
        if self.unbound:
            body["unbound"] = True
        return body

    def with_wire_extras(self, body: dict) -> "VdspError":
        self.unbound = body.get("unbound") is True
        return self


class ClaimRefused(VdspError):
    """HB_DSP_CLAIM_REFUSED (-6000284): the peer does not hold the DDR owner or the role its HELLO claims."""
    code = -6000284
    name = "HB_DSP_CLAIM_REFUSED"
    description = "the peer does not hold the DDR owner or the role its HELLO claims"




class CoreError(VdspError):
    """The addressed DSP core cannot serve the request."""


class CoreOffline(CoreError):
    """HB_DSP_CORE_OFFLINE (-6000290): DSP core is not running."""
    code = -6000290
    name = "HB_DSP_CORE_OFFLINE"
    description = "DSP core is not running"


class CoreCrashed(CoreError):
    """HB_DSP_CORE_CRASHED (-6000291): DSP core crashed while the task was in flight."""
    code = -6000291
    name = "HB_DSP_CORE_CRASHED"
    description = "DSP core crashed while the task was in flight"


class CoreDead(CoreError):
    """HB_DSP_CORE_DEAD (-6000292): DSP core process exited, or hung (silent past the deadline)."""
    code = -6000292
    name = "HB_DSP_CORE_DEAD"
    description = "DSP core process exited, or hung (silent past the deadline)"


class CoreBusy(CoreError):
    """HB_DSP_BUSY (-6000293): queue is full, try again later."""
    code = -6000293
    name = "HB_DSP_BUSY"
    description = "queue is full, try again later"


class RelayUnavailable(VdspError):
    """HB_DSP_RELAY_UNAVAILABLE (-6000300): relay server is not reachable."""
    code = -6000300
    name = "HB_DSP_RELAY_UNAVAILABLE"
    description = "relay server is not reachable"


class KeyRefused(VdspError):
    """HB_DSP_KEY_REFUSED (-6000301): the server did not accept this client key (CURVE handshake refused)."""
    code = -6000301
    name = "HB_DSP_KEY_REFUSED"
    description = "the server did not accept this client key"




class RemoteprocError(VdspError):
    """A remoteproc attribute write refused with a Linux errno (negated)."""


class RemoteprocBusy(RemoteprocError):
    """EBUSY (-16): device or resource busy."""
    code = -16
    name = "EBUSY"
    description = "device or resource busy"


class RemoteprocNoEnt(RemoteprocError):
    """ENOENT (-2): no such file or directory."""
    code = -2
    name = "ENOENT"
    description = "no such file or directory"


class RemoteprocInvalid(RemoteprocError):
    """EINVAL (-22): invalid argument."""
    code = -22
    name = "EINVAL"
    description = "invalid argument"


class RemoteprocDenied(RemoteprocError):
    """EACCES (-13): permission denied."""
    code = -13
    name = "EACCES"
    description = "permission denied"



_DNN_ONLY = {  # codes of the SDK that have no class here but must still be described
    0: ("HB_DNN_SUCCESS", "success"),
    -6000016: ("HB_DNN_MULTI_PROGRESS_USE_ERROR", "multi-process use error"),
}


def error_class(code: int) -> type[VdspError]:
    """The class for ``code``; unknown codes map to :class:`VdspError`."""
    return _BY_CODE.get(code, VdspError)


def known_codes() -> list[int]:
    """Every code :func:`describe` knows by name, from 0 down (the C library's table of them)."""
    return sorted({*_BY_CODE, *_DNN_ONLY}, reverse=True)


def describe(code: int) -> str:
    """Natural-language description of an error code (like hbDNNGetErrorDesc)."""
    cls = _BY_CODE.get(code)
    if cls is not None:
        return f"{cls.name}: {cls.description}"
    if code in _DNN_ONLY:
        name, desc = _DNN_ONLY[code]
        return f"{name}: {desc}"
    return f"unknown error code {code}"


def from_wire(body: dict) -> VdspError:
    """Rebuild the exception an ERROR message carries (``{code, name, message}``)."""
    code = body.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        return ProtocolError(f"error reply without an integer code: {body!r:.200}")
    cls = error_class(code)
    message = body.get("message")
    if not isinstance(message, str):
        message = cls.description
    exc = cls(message, code=code).with_wire_extras(body)
    if cls is VdspError:  # a code with no class of its own: keep the name the peer sent
        name = body.get("name")
        exc.name = name if isinstance(name, str) and name else _DNN_ONLY.get(code, ("HB_DSP_UNKNOWN_ERROR",))[0]
    return exc


def all_codes() -> dict[int, type[VdspError]]:
    """Every registered code and its class (for docs and tests)."""
    return dict(_BY_CODE)

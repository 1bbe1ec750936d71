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
    │   └── TaskCancelled       -6000271    HB_DSP_TASK_CANCELLED
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
    │   ├── CoreDead            -6000292    HB_DSP_CORE_DEAD (heartbeats lost)
    │   └── CoreBusy            -6000293    HB_DSP_BUSY (queue full)
    ├── RelayUnavailable        -6000300    HB_DSP_RELAY_UNAVAILABLE
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


def _error(cls_name: str, base: type[VdspError], code: int, name: str, desc: str) -> type[VdspError]:
    return type(cls_name, (base,), {"code": code, "name": name, "description": desc,
                                    "__doc__": f"{name} ({code}): {desc}."})


InvalidArgument = _error("InvalidArgument", VdspError, -6000001, "HB_DNN_INVALID_ARGUMENT", "invalid argument")
UnknownOperator = _error("UnknownOperator", InvalidArgument, -6000260, "HB_DSP_UNKNOWN_OPERATOR", "unknown operator")
InvalidCore = _error("InvalidCore", InvalidArgument, -6000261, "HB_DSP_INVALID_CORE", "invalid core id")
InvalidModel = _error("InvalidModel", VdspError, -6000002, "HB_DNN_INVALID_MODEL", "invalid model")
ModelNumberExceedLimit = _error("ModelNumberExceedLimit", VdspError, -6000003, "HB_DNN_MODEL_NUMBER_EXCEED_LIMIT",
                                "model number exceeds limit")
InvalidPackedDnnHandle = _error("InvalidPackedDnnHandle", VdspError, -6000004, "HB_DNN_INVALID_PACKED_DNN_HANDLE",
                                "invalid packed DNN handle")
InvalidDnnHandle = _error("InvalidDnnHandle", VdspError, -6000005, "HB_DNN_INVALID_DNN_HANDLE", "invalid DNN handle")
FileNotFound = _error("FileNotFound", VdspError, -6000006, "HB_DNN_CAN_NOT_OPEN_FILE", "file does not exist")
OutOfMemory = _error("OutOfMemory", VdspError, -6000007, "HB_DNN_OUT_OF_MEMORY", "not enough memory")
TaskTimeout = _error("TaskTimeout", VdspError, -6000008, "HB_DNN_TIMEOUT", "timeout")
TaskNumExceedLimit = _error("TaskNumExceedLimit", VdspError, -6000009, "HB_DNN_TASK_NUM_EXCEED_LIMIT",
                            "task number exceeds limit")
TaskBatchSizeExceedLimit = _error("TaskBatchSizeExceedLimit", VdspError, -6000010,
                                  "HB_DNN_TASK_BATCH_SIZE_EXCEED_LIMIT", "task batch size exceeds limit")
InvalidTaskHandle = _error("InvalidTaskHandle", VdspError, -6000011, "HB_DNN_INVALID_TASK_HANDLE",
                           "invalid task handle")
ModelIsRunning = _error("ModelIsRunning", VdspError, -6000013, "HB_DNN_MODEL_IS_RUNNING", "model is running")
IncompatibleModel = _error("IncompatibleModel", VdspError, -6000014, "HB_DNN_INCOMPATIBLE_MODEL", "incompatible model")
ApiUseError = _error("ApiUseError", VdspError, -6000015, "HB_DNN_API_USE_ERROR", "API used wrongly")


class RunTaskFailed(VdspError):
    code = -6000012
    name = "HB_DNN_RUN_TASK_FAILED"
    description = "run task failed"


OperatorFailed = _error("OperatorFailed", RunTaskFailed, -6000270, "HB_DSP_OPERATOR_FAILED",
                        "operator raised an error")
TaskCancelled = _error("TaskCancelled", RunTaskFailed, -6000271, "HB_DSP_TASK_CANCELLED",
                       "task was released before it ran")


class SysError(VdspError):
    """Errors of the hbSys* memory API."""


SysInvalidArgument = _error("SysInvalidArgument", SysError, -6000129, "HB_SYS_INVALID_ARGUMENT",
                            "invalid memory argument")
SysOutOfMemory = _error("SysOutOfMemory", SysError, -6000130, "HB_SYS_OUT_OF_MEMORY", "out of memory")
SysRegisterMemFailed = _error("SysRegisterMemFailed", SysError, -6000131, "HB_SYS_REGISTER_MEM_FAILED",
                              "register memory failed")
CacheCoherencyError = _error("CacheCoherencyError", SysError, -6000132, "HB_SYS_CACHE_NOT_FLUSHED",
                             "cached memory used without the flush it needs")

ProtocolError = _error("ProtocolError", VdspError, -6000257, "HB_DSP_PROTOCOL_ERROR", "malformed message")
BadMagic = _error("BadMagic", ProtocolError, -6000258, "HB_DSP_BAD_MAGIC", "wrong magic or protocol version")
MessageTooLarge = _error("MessageTooLarge", ProtocolError, -6000259, "HB_DSP_MESSAGE_TOO_LARGE",
                         "message exceeds a size limit")
UnknownCommand = _error("UnknownCommand", ProtocolError, -6000262, "HB_DSP_UNKNOWN_COMMAND", "unknown command")


class HandleError(VdspError):
    """A buffer handle that the DSP side refuses to map."""


UnknownHandle = _error("UnknownHandle", HandleError, -6000280, "HB_DSP_UNKNOWN_HANDLE",
                       "no memory at this physical address")
FreedHandle = _error("FreedHandle", HandleError, -6000281, "HB_DSP_FREED_HANDLE", "memory was freed")
HandleOutOfBounds = _error("HandleOutOfBounds", HandleError, -6000282, "HB_DSP_HANDLE_OUT_OF_BOUNDS",
                           "handle exceeds its memory segment")
ForeignHandle = _error("ForeignHandle", HandleError, -6000283, "HB_DSP_FOREIGN_HANDLE",
                       "memory belongs to another owner and is not granted to this connection's owner")
ClaimRefused = _error("ClaimRefused", VdspError, -6000284, "HB_DSP_CLAIM_REFUSED",
                      "the peer does not hold the DDR owner or the role its HELLO claims")


class CoreError(VdspError):
    """The addressed DSP core cannot serve the request."""


CoreOffline = _error("CoreOffline", CoreError, -6000290, "HB_DSP_CORE_OFFLINE", "DSP core is not running")
CoreCrashed = _error("CoreCrashed", CoreError, -6000291, "HB_DSP_CORE_CRASHED",
                     "DSP core crashed while the task was in flight")
CoreDead = _error("CoreDead", CoreError, -6000292, "HB_DSP_CORE_DEAD", "DSP core stopped answering heartbeats")
CoreBusy = _error("CoreBusy", CoreError, -6000293, "HB_DSP_BUSY", "queue is full, try again later")
RelayUnavailable = _error("RelayUnavailable", VdspError, -6000300, "HB_DSP_RELAY_UNAVAILABLE",
                          "relay server is not reachable")


class RemoteprocError(VdspError):
    """A remoteproc attribute write refused with a Linux errno (negated)."""


RemoteprocBusy = _error("RemoteprocBusy", RemoteprocError, -16, "EBUSY", "device or resource busy")
RemoteprocNoEnt = _error("RemoteprocNoEnt", RemoteprocError, -2, "ENOENT", "no such file or directory")
RemoteprocInvalid = _error("RemoteprocInvalid", RemoteprocError, -22, "EINVAL", "invalid argument")
RemoteprocDenied = _error("RemoteprocDenied", RemoteprocError, -13, "EACCES", "permission denied")

_DNN_ONLY = {  # codes of the SDK that have no class here but must still be described
    0: ("HB_DNN_SUCCESS", "success"),
    -6000016: ("HB_DNN_MULTI_PROGRESS_USE_ERROR", "multi-process use error"),
}


def error_class(code: int) -> type[VdspError]:
    """The class for ``code``; unknown codes map to :class:`VdspError`."""
    return _BY_CODE.get(code, VdspError)


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
    exc = cls(message, code=code)
    if cls is VdspError:  # a code with no class of its own: keep the name the peer sent
        name = body.get("name")
        exc.name = name if isinstance(name, str) and name else _DNN_ONLY.get(code, ("HB_DSP_UNKNOWN_ERROR",))[0]
    return exc


def all_codes() -> dict[int, type[VdspError]]:
    """Every registered code and its class (for docs and tests)."""
    return dict(_BY_CODE)

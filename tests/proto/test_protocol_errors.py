"""protocol.errors: stable numeric codes, descriptions, the wire form and the class tree.

The HB_DNN_* / HB_SYS_* numbers are the published Horizon SDK values (hb_dnn_status.h,
hb_sys.h); the HB_DSP_* and errno numbers are the ones documented in errors.py. They are
written out here so that a renumbering in the product breaks a test.
"""
from __future__ import annotations

import pytest

from protocol import errors

PUBLISHED = {
    # HB_DNN_*
    "InvalidArgument": (-6000001, "HB_DNN_INVALID_ARGUMENT"),
    "InvalidModel": (-6000002, "HB_DNN_INVALID_MODEL"),
    "ModelNumberExceedLimit": (-6000003, "HB_DNN_MODEL_NUMBER_EXCEED_LIMIT"),
    "InvalidPackedDnnHandle": (-6000004, "HB_DNN_INVALID_PACKED_DNN_HANDLE"),
    "InvalidDnnHandle": (-6000005, "HB_DNN_INVALID_DNN_HANDLE"),
    "FileNotFound": (-6000006, "HB_DNN_CAN_NOT_OPEN_FILE"),
    "OutOfMemory": (-6000007, "HB_DNN_OUT_OF_MEMORY"),
    "TaskTimeout": (-6000008, "HB_DNN_TIMEOUT"),
    "TaskNumExceedLimit": (-6000009, "HB_DNN_TASK_NUM_EXCEED_LIMIT"),
    "TaskBatchSizeExceedLimit": (-6000010, "HB_DNN_TASK_BATCH_SIZE_EXCEED_LIMIT"),
    "InvalidTaskHandle": (-6000011, "HB_DNN_INVALID_TASK_HANDLE"),
    "RunTaskFailed": (-6000012, "HB_DNN_RUN_TASK_FAILED"),
    "ModelIsRunning": (-6000013, "HB_DNN_MODEL_IS_RUNNING"),
    "IncompatibleModel": (-6000014, "HB_DNN_INCOMPATIBLE_MODEL"),
    "ApiUseError": (-6000015, "HB_DNN_API_USE_ERROR"),
    # HB_SYS_*
    "SysInvalidArgument": (-6000129, "HB_SYS_INVALID_ARGUMENT"),
    "SysOutOfMemory": (-6000130, "HB_SYS_OUT_OF_MEMORY"),
    "SysRegisterMemFailed": (-6000131, "HB_SYS_REGISTER_MEM_FAILED"),
    "CacheCoherencyError": (-6000132, "HB_SYS_CACHE_NOT_FLUSHED"),
    # HB_DSP_*
    "ProtocolError": (-6000257, "HB_DSP_PROTOCOL_ERROR"),
    "BadMagic": (-6000258, "HB_DSP_BAD_MAGIC"),
    "MessageTooLarge": (-6000259, "HB_DSP_MESSAGE_TOO_LARGE"),
    "UnknownOperator": (-6000260, "HB_DSP_UNKNOWN_OPERATOR"),
    "InvalidCore": (-6000261, "HB_DSP_INVALID_CORE"),
    "UnknownCommand": (-6000262, "HB_DSP_UNKNOWN_COMMAND"),
    "OperatorFailed": (-6000270, "HB_DSP_OPERATOR_FAILED"),
    "TaskCancelled": (-6000271, "HB_DSP_TASK_CANCELLED"),
    "TcmOverBudget": (-6000272, "HB_DSP_TCM_OVER_BUDGET"),
    "DmaNotWaited": (-6000273, "HB_DSP_DMA_NOT_WAITED"),
    "KernelMemoryFault": (-6000274, "HB_DSP_KERNEL_MEMORY_FAULT"),
    "UnknownHandle": (-6000280, "HB_DSP_UNKNOWN_HANDLE"),
    "FreedHandle": (-6000281, "HB_DSP_FREED_HANDLE"),
    "HandleOutOfBounds": (-6000282, "HB_DSP_HANDLE_OUT_OF_BOUNDS"),
    "ForeignHandle": (-6000283, "HB_DSP_FOREIGN_HANDLE"),
    "ClaimRefused": (-6000284, "HB_DSP_CLAIM_REFUSED"),
    "CoreOffline": (-6000290, "HB_DSP_CORE_OFFLINE"),
    "CoreCrashed": (-6000291, "HB_DSP_CORE_CRASHED"),
    "CoreDead": (-6000292, "HB_DSP_CORE_DEAD"),
    "CoreBusy": (-6000293, "HB_DSP_BUSY"),
    "RelayUnavailable": (-6000300, "HB_DSP_RELAY_UNAVAILABLE"),
    "KeyRefused": (-6000301, "HB_DSP_KEY_REFUSED"),
    # errno, negated
    "RemoteprocBusy": (-16, "EBUSY"),
    "RemoteprocNoEnt": (-2, "ENOENT"),
    "RemoteprocInvalid": (-22, "EINVAL"),
    "RemoteprocDenied": (-13, "EACCES"),
}


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


@pytest.mark.parametrize("cls_name", sorted(PUBLISHED))
def test_published_code_and_name(cls_name):
    code, name = PUBLISHED[cls_name]
    cls = getattr(errors, cls_name)
    assert cls.code == code
    assert cls.name == name
    exc = cls("boom")
    assert exc.code == code
    assert errors.error_class(code) is cls


def test_code_table_is_exactly_the_published_one():
    assert {c: cls.__name__ for c, cls in errors.all_codes().items()} == \
        {code: name for name, (code, _) in PUBLISHED.items()}


def test_codes_are_unique_across_concrete_classes():
    concrete = [c for c in _all_subclasses(errors.VdspError)
                if "code" in c.__dict__ and c.__module__ == errors.__name__]
    codes = [c.code for c in concrete]
    assert len(codes) == len(set(codes))
    assert len(concrete) == len(PUBLISHED)


def test_duplicate_code_is_refused_at_class_creation():
    with pytest.raises(TypeError):
        type("Clash", (errors.VdspError,), {"code": -6000001})
    assert errors.error_class(-6000001) is errors.InvalidArgument


@pytest.mark.parametrize("sub, base", [
    ("UnknownOperator", "InvalidArgument"), ("InvalidCore", "InvalidArgument"),
    ("OperatorFailed", "RunTaskFailed"), ("TaskCancelled", "RunTaskFailed"),
    ("SysInvalidArgument", "SysError"), ("SysOutOfMemory", "SysError"),
    ("SysRegisterMemFailed", "SysError"), ("CacheCoherencyError", "SysError"),
    ("BadMagic", "ProtocolError"), ("MessageTooLarge", "ProtocolError"), ("UnknownCommand", "ProtocolError"),
    ("UnknownHandle", "HandleError"), ("FreedHandle", "HandleError"),
    ("HandleOutOfBounds", "HandleError"), ("ForeignHandle", "HandleError"),
    ("CoreOffline", "CoreError"), ("CoreCrashed", "CoreError"), ("CoreDead", "CoreError"),
    ("CoreBusy", "CoreError"),
    ("RemoteprocBusy", "RemoteprocError"), ("RemoteprocInvalid", "RemoteprocError"),
    ("RemoteprocNoEnt", "RemoteprocError"),
])
def test_subclass_relations(sub, base):
    assert issubclass(getattr(errors, sub), getattr(errors, base))
    assert issubclass(getattr(errors, sub), errors.VdspError)


@pytest.mark.parametrize("a, b", [("CoreCrashed", "InvalidArgument"), ("BadMagic", "InvalidArgument"),
                                  ("SysInvalidArgument", "InvalidArgument"), ("UnknownOperator", "ProtocolError"),
                                  ("TaskTimeout", "RunTaskFailed"), ("CoreBusy", "TaskNumExceedLimit")])
def test_unrelated_classes(a, b):
    assert not issubclass(getattr(errors, a), getattr(errors, b))


def test_every_error_is_an_exception():
    assert issubclass(errors.VdspError, Exception)
    with pytest.raises(errors.InvalidArgument):
        raise errors.UnknownOperator("x")


# --- describe ----------------------------------------------------------------------------------

@pytest.mark.parametrize("code, text", [
    (-6000001, "HB_DNN_INVALID_ARGUMENT"), (-6000008, "HB_DNN_TIMEOUT"),
    (-6000009, "HB_DNN_TASK_NUM_EXCEED_LIMIT"), (-6000011, "HB_DNN_INVALID_TASK_HANDLE"),
    (-6000012, "HB_DNN_RUN_TASK_FAILED"), (-6000129, "HB_SYS_INVALID_ARGUMENT"),
    (-6000130, "HB_SYS_OUT_OF_MEMORY"), (-6000131, "HB_SYS_REGISTER_MEM_FAILED"),
    (-6000260, "HB_DSP_UNKNOWN_OPERATOR"), (-22, "EINVAL"),
])
def test_describe_known_code(code, text):
    assert errors.describe(code).startswith(text + ": ")
    assert len(errors.describe(code)) > len(text) + 2


def test_describe_known_code_exact_text():
    assert errors.describe(-6000001) == "HB_DNN_INVALID_ARGUMENT: invalid argument"
    assert errors.describe(-6000008) == "HB_DNN_TIMEOUT: timeout"


@pytest.mark.parametrize("code, text", [(0, "HB_DNN_SUCCESS"), (-6000016, "HB_DNN_MULTI_PROGRESS_USE_ERROR")])
def test_describe_dnn_only_code(code, text):
    assert errors.describe(code).startswith(text + ": ")
    assert errors.error_class(code) is errors.VdspError  # no class, but described


@pytest.mark.parametrize("code, name, cls", [
    (-6000002, "HB_DNN_INVALID_MODEL", "InvalidModel"),
    (-6000003, "HB_DNN_MODEL_NUMBER_EXCEED_LIMIT", "ModelNumberExceedLimit"),
    (-6000004, "HB_DNN_INVALID_PACKED_DNN_HANDLE", "InvalidPackedDnnHandle"),
    (-6000005, "HB_DNN_INVALID_DNN_HANDLE", "InvalidDnnHandle"),
    (-6000010, "HB_DNN_TASK_BATCH_SIZE_EXCEED_LIMIT", "TaskBatchSizeExceedLimit"),
    (-6000013, "HB_DNN_MODEL_IS_RUNNING", "ModelIsRunning"),
    (-6000014, "HB_DNN_INCOMPATIBLE_MODEL", "IncompatibleModel"),
])
def test_the_model_runtime_codes_have_classes_with_the_manuals_numbers(code, name, cls):
    """The ARM-side model runtime (arm_side.dnn) raises these: each is a class with the manual's number."""
    assert errors.error_class(code) is getattr(errors, cls)
    assert getattr(errors, cls).name == name
    assert errors.describe(code).startswith(name + ": ")


@pytest.mark.parametrize("code", [1, -1, -6000000, -6000017, -6000128, -6000999, 123456])
def test_describe_unknown_code(code):
    text = errors.describe(code)
    assert "unknown" in text.lower()
    assert str(code) in text
    assert errors.error_class(code) is errors.VdspError


# --- str / wire form ---------------------------------------------------------------------------

def test_str_carries_code_name_and_message():
    assert str(errors.TaskTimeout("waited 5 ms")) == "[-6000008 HB_DNN_TIMEOUT] waited 5 ms"


def test_default_message_is_the_description():
    exc = errors.CoreBusy()
    assert exc.message == "queue is full, try again later"


def test_to_wire_shape():
    assert errors.InvalidCore("core 7").to_wire() == {"code": -6000261, "name": "HB_DSP_INVALID_CORE",
                                                      "message": "core 7"}


@pytest.mark.parametrize("code", sorted(errors.all_codes()))
def test_wire_round_trip_keeps_class_code_and_message(code):
    cls = errors.all_codes()[code]
    original = cls(f"message for {code} ünïcode")
    back = errors.from_wire(original.to_wire())
    assert type(back) is cls
    assert back.code == code
    assert back.message == f"message for {code} ünïcode"
    assert back.name == original.name


def test_from_wire_without_message_uses_description():
    back = errors.from_wire({"code": -6000291})
    assert type(back) is errors.CoreCrashed
    assert back.message == "DSP core crashed while the task was in flight"


def test_from_wire_non_str_message_uses_description():
    back = errors.from_wire({"code": -6000001, "message": 17})
    assert type(back) is errors.InvalidArgument and back.message == "invalid argument"


@pytest.mark.parametrize("body", [{}, {"code": "-6000001"}, {"code": None}, {"code": -6000001.0},
                                  {"code": [1]}, {"message": "no code"}])
def test_from_wire_without_int_code_is_protocol_error(body):
    back = errors.from_wire(body)
    assert type(back) is errors.ProtocolError
    assert back.code == -6000257


def test_from_wire_bool_code_is_protocol_error():
    back = errors.from_wire({"code": True, "message": "x"})
    assert type(back) is errors.ProtocolError
    assert back.code == -6000257


def test_from_wire_unknown_code_keeps_code_and_message():
    back = errors.from_wire({"code": -6000999, "name": "HB_FUTURE", "message": "from a newer peer"})
    assert type(back) is errors.VdspError
    assert back.code == -6000999
    assert back.message == "from a newer peer"


def test_from_wire_dnn_only_code_keeps_its_name():
    back = errors.from_wire({"code": -6000002, "name": "HB_DNN_INVALID_MODEL", "message": "bad model"})
    assert back.code == -6000002
    assert back.name == "HB_DNN_INVALID_MODEL"
    assert "HB_DNN_RUN_TASK_FAILED" not in str(back)


def test_foreign_handle_says_on_the_wire_whether_the_connection_has_no_owner_at_all():
    """Rule 1 of PROTOCOL.md §6.6 (no verified owner) travels as ``unbound: true``: a client that
    had its HELLO verified learns from it that the server no longer knows that HELLO."""
    unbound = errors.ForeignHandle("no verified owner", unbound=True)
    assert unbound.to_wire()["unbound"] is True
    assert errors.from_wire(unbound.to_wire()).unbound is True
    assert "unbound" not in errors.ForeignHandle("not granted").to_wire()
    assert errors.from_wire(errors.ForeignHandle("not granted").to_wire()).unbound is False
    assert errors.from_wire({"code": errors.ForeignHandle.code, "unbound": 1}).unbound is False   # true only

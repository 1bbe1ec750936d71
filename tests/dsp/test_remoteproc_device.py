"""dsp_side.remoteproc.Device and protocol.remoteproc: Linux remoteproc sysfs semantics.

Expected errnos follow drivers/remoteproc/remoteproc_sysfs.c: EBUSY = 16, EINVAL = 22
(negated, as the kernel returns them).
"""
from __future__ import annotations

import pytest

from dsp_side.remoteproc import Device
from protocol import errors
from protocol.remoteproc import Action, State, state_write

EBUSY, EINVAL = -16, -22


@pytest.fixture
def dev():
    return Device("vdsp0", "vdsp_fw.bin")


def in_state(state):
    d = Device("vdsp0", "vdsp_fw.bin")
    d.set_state(state)
    return d


def refused(d, attr, value, exc_cls, errno):
    before = d.snapshot()
    with pytest.raises(exc_cls) as info:
        d.write(attr, value)
    assert type(info.value) is exc_cls
    assert info.value.code == errno
    assert d.snapshot() == before  # a refused write changes nothing
    return info.value


def test_errno_classes():
    assert errors.RemoteprocBusy.code == EBUSY
    assert errors.RemoteprocInvalid.code == EINVAL
    assert issubclass(errors.RemoteprocBusy, errors.RemoteprocError)


# --- reads ---------------------------------------------------------------------------------------

def test_initial_reads(dev):
    assert dev.read("name") == "vdsp0"
    assert dev.read("firmware") == "vdsp_fw.bin"
    assert dev.read("state") == "offline"
    assert dev.read("recovery") == "enabled"
    assert dev.read("coredump") == "disabled"


@pytest.mark.parametrize("state, text", [(State.OFFLINE, "offline"), (State.RUNNING, "running"),
                                         (State.CRASHED, "crashed")])
def test_state_reads_plain_word(state, text):
    d = in_state(state)
    assert d.read("state") == text
    assert type(d.read("state")) is str


@pytest.mark.parametrize("attr", ["State", "power", "", "crash_count", "lock", "busy", "snapshot"])
def test_read_unknown_attribute_is_einval(dev, attr):
    with pytest.raises(errors.RemoteprocInvalid) as info:
        dev.read(attr)
    assert info.value.code == EINVAL


# --- state writes --------------------------------------------------------------------------------

def test_start_when_offline_returns_boot_and_leaves_state(dev):
    assert dev.write("state", "start") is Action.BOOT
    assert dev.read("state") == "offline"  # only set_state (end of boot) changes it
    dev.set_state(State.RUNNING)
    assert dev.read("state") == "running"


def test_start_with_trailing_newline(dev):
    assert dev.write("state", "start\n") is Action.BOOT


def test_start_when_running_is_ebusy():
    refused(in_state(State.RUNNING), "state", "start", errors.RemoteprocBusy, EBUSY)


def test_stop_when_running_returns_shutdown_and_leaves_state():
    d = in_state(State.RUNNING)
    assert d.write("state", "stop\n") is Action.SHUTDOWN
    assert d.read("state") == "running"


def test_stop_when_offline_is_einval(dev):
    refused(dev, "state", "stop", errors.RemoteprocInvalid, EINVAL)


def test_stop_when_crashed_is_einval():
    refused(in_state(State.CRASHED), "state", "stop", errors.RemoteprocInvalid, EINVAL)


@pytest.mark.parametrize("state", list(State))
@pytest.mark.parametrize("word", ["restart", "START", "", "boot", "detach", "offline", "running"])
def test_unknown_state_word_is_einval(state, word):
    refused(in_state(state), "state", word, errors.RemoteprocInvalid, EINVAL)


def test_state_write_table_directly():
    assert state_write(State.OFFLINE, "start") is Action.BOOT
    assert state_write(State.RUNNING, "stop") is Action.SHUTDOWN
    with pytest.raises(errors.RemoteprocBusy):
        state_write(State.RUNNING, "start")
    with pytest.raises(errors.RemoteprocInvalid):
        state_write(State.OFFLINE, "stop")
    with pytest.raises(errors.RemoteprocInvalid):
        state_write(State.CRASHED, "stop")
    with pytest.raises(errors.RemoteprocInvalid):
        state_write(State.RUNNING, "kill")


def test_any_write_while_an_action_is_under_way_is_ebusy(dev):
    dev.busy = Action.BOOT
    for attr, value in [("state", "start"), ("state", "stop"), ("firmware", "x.bin"),
                        ("recovery", "disabled"), ("coredump", "enabled")]:
        refused(dev, attr, value, errors.RemoteprocBusy, EBUSY)


# --- firmware ------------------------------------------------------------------------------------

def test_firmware_write_when_offline(dev):
    assert dev.write("firmware", "other_fw.bin") is None
    assert dev.read("firmware") == "other_fw.bin"


def test_firmware_trailing_newline_is_trimmed(dev):
    dev.write("firmware", "vdsp0\n")
    assert dev.read("firmware") == "vdsp0"


@pytest.mark.parametrize("state", [State.RUNNING, State.CRASHED])
def test_firmware_write_when_not_offline_is_ebusy(state):
    d = in_state(state)
    refused(d, "firmware", "other_fw.bin", errors.RemoteprocBusy, EBUSY)
    assert d.read("firmware") == "vdsp_fw.bin"


@pytest.mark.parametrize("value", ["", "\n"])
def test_empty_firmware_is_einval(dev, value):
    refused(dev, "firmware", value, errors.RemoteprocInvalid, EINVAL)
    assert dev.read("firmware") == "vdsp_fw.bin"


# --- recovery ------------------------------------------------------------------------------------

@pytest.mark.parametrize("state", list(State))
def test_recovery_enabled_disabled(state):
    d = in_state(state)
    assert d.write("recovery", "disabled\n") is None
    assert d.read("recovery") == "disabled"
    assert d.write("recovery", "enabled") is None
    assert d.read("recovery") == "enabled"


def test_recover_when_crashed_returns_recover_and_keeps_flag():
    d = in_state(State.CRASHED)
    d.write("recovery", "disabled")
    assert d.write("recovery", "recover\n") is Action.RECOVER
    assert d.read("recovery") == "disabled"  # 'recover' does not change the flag
    assert d.read("state") == "crashed"      # until the core reports success


@pytest.mark.parametrize("state", [State.OFFLINE, State.RUNNING])
def test_recover_when_not_crashed_is_einval(state):
    refused(in_state(state), "recovery", "recover", errors.RemoteprocInvalid, EINVAL)


@pytest.mark.parametrize("value", ["on", "Enabled", "", "1"])
def test_recovery_unknown_word_is_einval(dev, value):
    refused(dev, "recovery", value, errors.RemoteprocInvalid, EINVAL)


# --- coredump ------------------------------------------------------------------------------------

@pytest.mark.parametrize("state", [State.OFFLINE, State.RUNNING])
def test_coredump_values(state):
    d = in_state(state)
    for value in ("enabled", "inline", "disabled"):
        assert d.write("coredump", value + "\n") is None
        assert d.read("coredump") == value


def test_coredump_while_crashed_is_ebusy():
    refused(in_state(State.CRASHED), "coredump", "enabled", errors.RemoteprocBusy, EBUSY)


@pytest.mark.parametrize("value", ["default", "ENABLED", "", "elf"])
def test_coredump_unknown_word_is_einval(dev, value):
    refused(dev, "coredump", value, errors.RemoteprocInvalid, EINVAL)


# --- name and unknown attributes -----------------------------------------------------------------

@pytest.mark.parametrize("state", list(State))
def test_name_is_read_only(state):
    d = in_state(state)
    with pytest.raises(errors.RemoteprocError):
        d.write("name", "vdsp9")
    assert d.read("name") == "vdsp0"


@pytest.mark.parametrize("attr", ["power", "State", "", "crash_count", "busy"])
def test_write_unknown_attribute_is_einval(dev, attr):
    refused(dev, attr, "x", errors.RemoteprocInvalid, EINVAL)


def test_snapshot(dev):
    dev.set_state(State.RUNNING)
    assert dev.snapshot() == {"name": "vdsp0", "firmware": "vdsp_fw.bin", "state": "running",
                              "recovery": "enabled", "coredump": "disabled", "crash_count": 0}

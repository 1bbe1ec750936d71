"""Every row of the remoteproc state table, driven through the Device (no processes)."""
from __future__ import annotations

import pytest

from dsp_side.remoteproc import Device
from protocol import errors
from protocol.remoteproc import TABLE, Action, Op, State

# How each operation is written by a user (attribute, value).
WRITES = {Op.START: ("state", "start"), Op.STOP: ("state", "stop"), Op.FIRMWARE: ("firmware", "other"),
          Op.RECOVERY: ("recovery", "disabled"), Op.RECOVER: ("recovery", "recover"),
          Op.COREDUMP: ("coredump", "inline")}

# The table as the issue and Linux state it, written out independently of TABLE.
EXPECTED = {
    (State.OFFLINE, Op.START): State.RUNNING, (State.RUNNING, Op.START): -16, (State.CRASHED, Op.START): -16,
    (State.OFFLINE, Op.STOP): -22, (State.RUNNING, Op.STOP): State.OFFLINE, (State.CRASHED, Op.STOP): -22,
    (State.OFFLINE, Op.FIRMWARE): None, (State.RUNNING, Op.FIRMWARE): -16, (State.CRASHED, Op.FIRMWARE): -16,
    (State.OFFLINE, Op.RECOVERY): None, (State.RUNNING, Op.RECOVERY): None, (State.CRASHED, Op.RECOVERY): None,
    (State.OFFLINE, Op.RECOVER): -22, (State.RUNNING, Op.RECOVER): -22, (State.CRASHED, Op.RECOVER): State.RUNNING,
    (State.OFFLINE, Op.COREDUMP): None, (State.RUNNING, Op.COREDUMP): None, (State.CRASHED, Op.COREDUMP): -16,
}


def device_in(state: State) -> Device:
    dev = Device("vdsp0", "vdsp0")
    dev.state = state
    return dev


def test_the_table_has_every_state_and_operation():
    assert set(TABLE) == {(s, o) for s in State for o in Op}


@pytest.mark.parametrize("state, op", sorted(EXPECTED, key=str))
def test_write_row(state, op):
    dev = device_in(state)
    attr, value = WRITES[op]
    expected = EXPECTED[(state, op)]
    if isinstance(expected, int):
        with pytest.raises(errors.RemoteprocError) as exc:
            dev.write(attr, value)
        assert exc.value.code == expected
        assert dev.state is state and dev.busy is None                  # a refused write changes nothing
        return
    action = dev.write(attr, value)
    if expected is None:                                                 # an attribute is stored
        assert action is None and dev.read(attr) == value and dev.state is state
        return
    assert dev.state is state and dev.busy is action                    # not yet: the action is under way
    with pytest.raises(errors.RemoteprocBusy):
        dev.write("coredump", "enabled")                                # every write waits for it
    dev.finish(True)
    assert dev.state is expected and dev.busy is None


@pytest.mark.parametrize("state, handled", [(State.RUNNING, True), (State.OFFLINE, False), (State.CRASHED, False)])
def test_crash_row(state, handled):
    dev = device_in(state)
    assert dev.crash() is handled                                        # only the first crash is handled
    assert dev.crash_count == int(handled)
    assert dev.state is (State.CRASHED if handled else state)


def test_a_failed_boot_leaves_the_core_offline():
    dev = device_in(State.OFFLINE)
    assert dev.write("state", "start") is Action.BOOT
    dev.finish(False)
    assert dev.state is State.OFFLINE and dev.busy is None

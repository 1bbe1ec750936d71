"""The remoteproc device state machine, as data (Linux remoteproc sysfs semantics).

``state`` reads ``offline``, ``running`` or ``crashed``. A write to ``state``
is looked up in ``STATE_WRITES``: either an action to perform (the new state is
set by the device only at the end of a successful action) or an errno error.
"""
from __future__ import annotations

import enum

from . import errors


class State(str, enum.Enum):
    OFFLINE = "offline"
    RUNNING = "running"
    CRASHED = "crashed"


class Action(str, enum.Enum):
    BOOT = "boot"            # load firmware, start the firmware process
    SHUTDOWN = "shutdown"    # stop the firmware process
    RECOVER = "recover"      # reload firmware after a crash


# (current state, written word) -> Action, or the error class to raise.
STATE_WRITES: dict[tuple[State, str], Action | type[errors.RemoteprocError]] = {
    (State.OFFLINE, "start"): Action.BOOT,
    (State.RUNNING, "start"): errors.RemoteprocBusy,
    (State.CRASHED, "start"): errors.RemoteprocBusy,
    (State.RUNNING, "stop"): Action.SHUTDOWN,
    (State.OFFLINE, "stop"): errors.RemoteprocInvalid,
    (State.CRASHED, "stop"): errors.RemoteprocInvalid,
}

# States in which attribute writes other than ``state`` are refused with EBUSY.
FIRMWARE_WRITABLE = frozenset({State.OFFLINE})

RECOVERY_VALUES = ("enabled", "disabled")
COREDUMP_VALUES = ("disabled", "enabled", "inline")
ATTRIBUTES = ("name", "firmware", "state", "recovery", "coredump")


def state_write(state: State, word: str) -> Action:
    """The action for writing ``word`` to ``state``. Raises RemoteprocBusy / RemoteprocInvalid."""
    outcome = STATE_WRITES.get((state, word.strip()))
    if outcome is None:
        raise errors.RemoteprocInvalid(f"cannot write {word.strip()!r} to state while {state.value}")
    if isinstance(outcome, type):
        raise outcome(f"cannot write {word.strip()!r} to state while {state.value}")
    return outcome

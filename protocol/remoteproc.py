"""The remoteproc device state machine, as data (Linux remoteproc sysfs semantics).

``TABLE[(state, op)]`` is either a :class:`Transition` — the action the core
performs and the state the device enters *when that action succeeds* — or
the errno error to raise. Operations are attribute writes (start, stop,
firmware, recovery, recover, coredump) and the crash the core detects.

::

    state \\ op   start        stop            firmware  recovery  recover        coredump  crash
    offline      BOOT→running EINVAL          ok        ok        EINVAL         ok        ignored
    running      EBUSY        SHUTDOWN→offl.  EBUSY     ok        EINVAL         ok        CRASH→crashed
    crashed      EBUSY        EINVAL          EBUSY     ok        RECOVER→run.   EBUSY     ignored

While an action is under way (booting, recovering) every write is EBUSY.
"Only the first crash is handled": a crash reported while not running is ignored.

A firmware name (the ``firmware`` attribute) is one file name looked up in the
firmware search path: see :func:`firmware_name_problem`.
"""
from __future__ import annotations

import dataclasses
import enum

from . import errors


class State(str, enum.Enum):
    OFFLINE = "offline"
    RUNNING = "running"
    CRASHED = "crashed"


class Op(str, enum.Enum):
    START = "start"
    STOP = "stop"
    FIRMWARE = "firmware"
    RECOVERY = "recovery"
    RECOVER = "recover"
    COREDUMP = "coredump"
    CRASH = "crash"


class Action(str, enum.Enum):
    NONE = "none"            # attribute stored, nothing to do
    BOOT = "boot"            # load firmware, start the firmware process
    SHUTDOWN = "shutdown"    # stop the firmware process
    RECOVER = "recover"      # reload firmware after a crash
    CRASH = "crash"          # handle a crash (count, dump, maybe recover)
    IGNORE = "ignore"        # a crash while not running: only the first is handled


@dataclasses.dataclass(frozen=True)
class Transition:
    action: Action
    next_state: State | None = None   # None: the state does not change


_OK = Transition(Action.NONE)
OFF, RUN, CRASHED = State.OFFLINE, State.RUNNING, State.CRASHED
EBUSY, EINVAL = errors.RemoteprocBusy, errors.RemoteprocInvalid

TABLE: dict[tuple[State, Op], Transition | type[errors.RemoteprocError]] = {
    (OFF, Op.START): Transition(Action.BOOT, RUN),
    (RUN, Op.START): EBUSY,
    (CRASHED, Op.START): EBUSY,
    (OFF, Op.STOP): EINVAL,
    (RUN, Op.STOP): Transition(Action.SHUTDOWN, OFF),
    (CRASHED, Op.STOP): EINVAL,
    (OFF, Op.FIRMWARE): _OK,
    (RUN, Op.FIRMWARE): EBUSY,
    (CRASHED, Op.FIRMWARE): EBUSY,
    (OFF, Op.RECOVERY): _OK,
    (RUN, Op.RECOVERY): _OK,
    (CRASHED, Op.RECOVERY): _OK,
    (OFF, Op.RECOVER): EINVAL,
    (RUN, Op.RECOVER): EINVAL,
    (CRASHED, Op.RECOVER): Transition(Action.RECOVER, RUN),
    (OFF, Op.COREDUMP): _OK,
    (RUN, Op.COREDUMP): _OK,
    (CRASHED, Op.COREDUMP): EBUSY,
    (OFF, Op.CRASH): Transition(Action.IGNORE),
    (RUN, Op.CRASH): Transition(Action.CRASH, CRASHED),
    (CRASHED, Op.CRASH): Transition(Action.IGNORE),
}

RECOVERY_VALUES = ("enabled", "disabled")
COREDUMP_VALUES = ("disabled", "enabled", "inline")
ATTRIBUTES = ("name", "firmware", "state", "recovery", "coredump")
# Words accepted by the state attribute, mapped to operations.
STATE_WORDS = {"start": Op.START, "stop": Op.STOP}
FIRMWARE_NAME_MAX = 255   # bytes of UTF-8, NAME_MAX of Linux file systems


def firmware_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a firmware name, or None if it can.

    A firmware name is one file name of the firmware search path: not empty, not
    ``.`` or ``..``, no ``/`` (no sub-directories, no absolute path), no control
    character (NUL, newline, tab, DEL...), at most FIRMWARE_NAME_MAX bytes of UTF-8.
    The trailing newline of ``echo NAME > firmware`` is removed before this check.
    """
    if not name:
        return "it is empty"
    if name in (".", ".."):
        return f"{name!r} is not a file name"
    if "/" in name:
        return "it contains '/' (a file name of the firmware search path, not a path)"
    bad = next((c for c in name if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        return f"it contains the control character {bad!r}"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid UTF-8"
    if size > FIRMWARE_NAME_MAX:
        return f"it is {size} bytes long, over the limit of {FIRMWARE_NAME_MAX} bytes for a file name"
    return None


def lookup(state: State, op: Op, what: str = "") -> Transition:
    """The transition for ``op`` in ``state``. Raises RemoteprocBusy / RemoteprocInvalid."""
    outcome = TABLE[(state, op)]
    if isinstance(outcome, type):
        raise outcome(f"cannot {what or op.value} while {state.value}")
    return outcome


def state_write(state: State, word: str) -> Action:
    """The action for writing ``word`` to ``state``. Raises RemoteprocBusy / RemoteprocInvalid."""
    word = word.strip()
    op = STATE_WORDS.get(word)
    if op is None:
        raise errors.RemoteprocInvalid(f"cannot write {word!r} to state while {state.value}")
    return lookup(state, op, f"write {word!r} to state").action

"""A core as its peers see it (the relay, a direct-mode client): its state, which changes are
allowed, and which error a task gets when it cannot run there.

::

    state     meaning                                      a task for it fails with
    unknown   never heard from (no READY yet)              CoreOffline
    running   its firmware runs: tasks go to it            -
    offline   stopped (remoteproc state offline)           CoreOffline
    crashed   its firmware crashed (recovery may follow)   CoreCrashed
    dead      its heartbeats stopped: the core is gone     CoreDead

Any state may follow any other when the core says so (READY, EVENT), except that nothing but
a new READY leaves ``dead`` and nothing goes back to ``unknown`` (``TRANSITIONS``). A
peer that leaves ``running`` fails the tasks it had sent there with the error of the new
state (``error_for``).
"""
from __future__ import annotations

import enum

from . import errors


class CoreState(str, enum.Enum):
    UNKNOWN = "unknown"
    RUNNING = "running"
    OFFLINE = "offline"
    CRASHED = "crashed"
    DEAD = "dead"

    @classmethod
    def of(cls, value: object) -> "CoreState":
        """The state a core announced; anything unrecognised counts as offline."""
        try:
            return cls(value)
        except ValueError:
            return cls.OFFLINE


_ANNOUNCED = {CoreState.RUNNING, CoreState.OFFLINE, CoreState.CRASHED}
# state -> states a peer may move a core to, and by what: "ready"/"event" (the core said so),
# "silence" (its process exited, or it is hung: PROTOCOL.md §9)
TRANSITIONS: dict[CoreState, dict[CoreState, set[str]]] = {
    CoreState.UNKNOWN: {s: {"ready"} for s in _ANNOUNCED} | {CoreState.DEAD: {"silence"}},
    CoreState.RUNNING: {s: {"ready", "event"} for s in _ANNOUNCED} | {CoreState.DEAD: {"silence"}},
    CoreState.OFFLINE: {s: {"ready", "event"} for s in _ANNOUNCED} | {CoreState.DEAD: {"silence"}},
    CoreState.CRASHED: {s: {"ready", "event"} for s in _ANNOUNCED} | {CoreState.DEAD: {"silence"}},
    CoreState.DEAD: {s: {"ready"} for s in _ANNOUNCED},
}

_ERRORS: dict[CoreState, type[errors.VdspError]] = {
    CoreState.UNKNOWN: errors.CoreOffline, CoreState.OFFLINE: errors.CoreOffline,
    CoreState.CRASHED: errors.CoreCrashed, CoreState.DEAD: errors.CoreDead,
}


def allowed(old: CoreState, new: CoreState, by: str) -> bool:
    """May a peer move a core from ``old`` to ``new`` on ``by`` (ready, event, silence)?"""
    return old == new or by in TRANSITIONS[old].get(new, ())


def error_for(state: CoreState, core: str, reason: str = "") -> errors.VdspError:
    """The error of a task that cannot run on ``core`` in ``state`` (not for RUNNING)."""
    detail = {CoreState.DEAD: "is dead", CoreState.UNKNOWN: "has not answered yet"}.get(
        state, state.value)
    return _ERRORS[state](f"{core} {detail}" + (f" ({reason})" if reason else ""))

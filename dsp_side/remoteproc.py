"""The remoteproc device model of one core: its sysfs-like attributes and state.

Every write is looked up in ``protocol.remoteproc.TABLE``; the resulting action
is performed by the core, and the state changes only when the core reports that
the action succeeded (``finish``), never at its start. A Device has no lock: only
the core's event loop (``dsp_side.core_engine``) uses it, from one thread.
"""
from __future__ import annotations

from protocol import errors
from protocol.remoteproc import (ATTRIBUTES, COREDUMP_VALUES, RECOVERY_VALUES, STATE_WORDS, Action, Op,
                                 State, Transition, firmware_name_problem, lookup)


class Device:
    """name (read-only), firmware, state, recovery, coredump; plus crash bookkeeping."""

    def __init__(self, name: str, firmware: str) -> None:
        self.name = name
        self.firmware = firmware
        self.state = State.OFFLINE
        self.recovery = "enabled"
        self.coredump = "disabled"
        self.crash_count = 0
        self.busy: Action | None = None       # an action under way (boot/shutdown/recover)
        self.pending: Transition | None = None

    def read(self, attr: str) -> str:
        """Raises RemoteprocInvalid for an unknown attribute."""
        if attr not in ATTRIBUTES:
            raise errors.RemoteprocInvalid(f"{self.name} has no attribute {attr!r}; attributes: {', '.join(ATTRIBUTES)}")
        value = getattr(self, attr)
        return value.value if isinstance(value, State) else str(value)

    def write(self, attr: str, value: str) -> Action | None:
        """Apply a write; returns the action the core must perform (None: nothing to do).

        Raises RemoteprocBusy / RemoteprocInvalid with Linux semantics.
        """
        word = value.rstrip("\n")
        op, check = self._op(attr, word)
        if self.busy is not None:
            raise errors.RemoteprocBusy(f"{self.name} is busy ({self.busy.value} in progress)")
        transition = lookup(self.state, op, f"write {word!r} to {attr} of {self.name}")
        check()  # the value itself, once the state allows the write
        if transition.action is Action.NONE:
            setattr(self, attr, word)
            return None
        self.busy, self.pending = transition.action, transition
        return transition.action

    def _op(self, attr: str, word: str):
        def invalid(msg: str):
            def raise_():
                raise errors.RemoteprocInvalid(f"{self.name}: {msg}")
            return raise_
        ok = lambda: None  # noqa: E731
        if attr == "state":
            op = STATE_WORDS.get(word.strip())
            if op is None:  # EINVAL whatever the state, as Linux's state_store
                raise errors.RemoteprocInvalid(f"{self.name}: state takes start or stop, got {word!r}")
            return op, ok
        if attr == "firmware":
            problem = firmware_name_problem(word)
            shown = repr(word) if len(word) <= 60 else f"{word[:60]!r}... ({len(word)} characters)"
            return Op.FIRMWARE, invalid(f"invalid firmware name {shown}: {problem}") if problem else ok
        if attr == "recovery":
            if word == "recover":
                return Op.RECOVER, ok
            return Op.RECOVERY, (ok if word in RECOVERY_VALUES else
                                 invalid(f"recovery takes enabled, disabled or recover, got {word!r}"))
        if attr == "coredump":
            return Op.COREDUMP, (ok if word in COREDUMP_VALUES else
                                 invalid(f"coredump takes {', '.join(COREDUMP_VALUES)}, got {word!r}"))
        if attr == "name":
            raise errors.RemoteprocInvalid(f"{self.name}: name is read-only")
        raise errors.RemoteprocInvalid(f"{self.name} has no attribute {attr!r}; attributes: {', '.join(ATTRIBUTES)}")

    def crash(self) -> bool:
        """The core detected a crash. True if it must be handled (the first one), with the
        state now crashed and the counter incremented; False if it is ignored."""
        transition = lookup(self.state, Op.CRASH)
        if transition.action is Action.IGNORE:
            return False
        self.crash_count += 1
        if transition.next_state is not None:     # None: the state does not change
            self.state = transition.next_state
        self.busy = self.pending = None
        return True

    def begin(self, action: Action) -> None:
        """An action the core starts by itself (autostart boot, automatic recovery)."""
        self.busy = action
        self.pending = Transition(action, State.RUNNING)

    def finish(self, ok: bool, state_on_failure: State = State.OFFLINE) -> None:
        """The action under way ended: enter its target state, or ``state_on_failure``."""
        target = self.pending.next_state if self.pending else None
        self.state = (target or self.state) if ok else state_on_failure
        self.busy = self.pending = None

    def set_state(self, state: State) -> None:
        self.state = state

    def snapshot(self) -> dict:
        return {"name": self.name, "firmware": self.firmware, "state": self.state.value,
                "recovery": self.recovery, "coredump": self.coredump, "crash_count": self.crash_count}

"""The remoteproc device model of one core: its sysfs-like attributes and state.

Attribute writes are checked here (errno semantics) and turned into actions
the core performs; the state changes only when the core reports an action's
success (``set_state``), never at the start of it.
"""
from __future__ import annotations

import threading

from protocol import errors
from protocol.remoteproc import (ATTRIBUTES, COREDUMP_VALUES, FIRMWARE_WRITABLE, Action, State,
                                 state_write)


class Device:
    """name (read-only), firmware, state, recovery, coredump; plus crash bookkeeping."""

    def __init__(self, name: str, firmware: str) -> None:
        self.lock = threading.Lock()
        self.name = name
        self.firmware = firmware
        self.state = State.OFFLINE
        self.recovery = "enabled"
        self.coredump = "disabled"
        self.crash_count = 0
        self.busy: Action | None = None  # an action under way (boot/shutdown/recover)

    def read(self, attr: str) -> str:
        """Raises RemoteprocInvalid for an unknown attribute."""
        if attr not in ATTRIBUTES:
            raise errors.RemoteprocInvalid(f"{self.name} has no attribute {attr!r}; attributes: {', '.join(ATTRIBUTES)}")
        value = getattr(self, attr)
        return value.value if isinstance(value, State) else str(value)

    def write(self, attr: str, value: str) -> Action | None:
        """Apply a write; returns the action the core must perform, if any.

        Raises RemoteprocBusy / RemoteprocInvalid with Linux semantics.
        """
        word = value.rstrip("\n")
        with self.lock:
            if self.busy is not None:
                raise errors.RemoteprocBusy(f"{self.name} is busy ({self.busy.value} in progress)")
            if attr == "state":
                return state_write(self.state, word)
            if attr == "firmware":
                return self._write_firmware(word)
            if attr == "recovery":
                return self._write_recovery(word)
            if attr == "coredump":
                return self._write_coredump(word)
            if attr == "name":
                raise errors.RemoteprocInvalid(f"{self.name}: name is read-only")
            raise errors.RemoteprocInvalid(f"{self.name} has no attribute {attr!r}; attributes: {', '.join(ATTRIBUTES)}")

    def _write_firmware(self, word: str) -> None:
        if self.state not in FIRMWARE_WRITABLE:
            raise errors.RemoteprocBusy(f"{self.name}: firmware can only change while offline (state {self.state.value})")
        if not word or "/" in word:
            raise errors.RemoteprocInvalid(f"{self.name}: firmware name must be a non-empty file name, got {word!r}")
        self.firmware = word
        return None

    def _write_recovery(self, word: str) -> Action | None:
        if word == "recover":
            if self.state is not State.CRASHED:
                raise errors.RemoteprocInvalid(f"{self.name}: nothing to recover (state {self.state.value})")
            return Action.RECOVER
        if word not in ("enabled", "disabled"):
            raise errors.RemoteprocInvalid(f"{self.name}: recovery takes enabled, disabled or recover, got {word!r}")
        self.recovery = word
        return None

    def _write_coredump(self, word: str) -> None:
        if self.state is State.CRASHED:
            raise errors.RemoteprocBusy(f"{self.name}: coredump cannot change while crashed")
        if word not in COREDUMP_VALUES:
            raise errors.RemoteprocInvalid(f"{self.name}: coredump takes {', '.join(COREDUMP_VALUES)}, got {word!r}")
        self.coredump = word
        return None

    def set_state(self, state: State) -> None:
        with self.lock:
            self.state = state

    def snapshot(self) -> dict:
        with self.lock:
            return {"name": self.name, "firmware": self.firmware, "state": self.state.value,
                    "recovery": self.recovery, "coredump": self.coredump, "crash_count": self.crash_count}

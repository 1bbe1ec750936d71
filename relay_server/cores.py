"""The relay's view of one DSP core: its state, firmware, tasks in flight, liveness (no sockets).

Invariant: ``fw_open`` (the adapter holds a connected firmware socket) only while the core
is ``running``; each opening is a new ``fw_generation``, and ``greeted`` is the generation
the relay said HELLO on.
"""
from __future__ import annotations

from typing import Any

from protocol.constants import HEARTBEAT_INTERVAL_MS, HUNG_AFTER_MS
from protocol.core_state import CoreState
from protocol.liveness import Liveness
from vdsp_board.processes import rundir

HELLO_RETRY_S = 0.5
MAX_REASON = 2000       # characters of a core's or firmware's reason kept


class CoreView:
    def __init__(self, index: int, name: str, endpoint: str, now: float,
                 heartbeat_ms: int = HEARTBEAT_INTERVAL_MS, hung_ms: int = HUNG_AFTER_MS) -> None:
        self.index, self.name, self.endpoint = index, name, endpoint
        self.heartbeat_ms, self.hung_ms = heartbeat_ms, hung_ms
        self.state = CoreState.UNKNOWN
        self.firmware_version = ""
        self.operators: list = []
        self.crash_count = 0
        self.firmware_signer = ""        # who signed the running image ("UNSIGNED" under --allow-unsigned)
        self.allow_unsigned = False      # the core boots unsigned images (development)
        self.watchdog_ms: int | None = None     # the core's firmware watchdog, as it announced it
        self.max_sleep_ms: int | None = None    # the longest sleep/count its firmware accepts
        self.reason = ""                 # why the core is in its state, as it last said (or the relay saw)
        self.fw_open = False
        self.fw_hello = ""               # on the open firmware link: "greeting", "ready" or "refused"
        self.fw_refused = ""             # why the firmware refused the relay's HELLO on that link
        self.fw_endpoint = ""
        self.fw_key = ""                 # the firmware's own CURVE public key on tcp (its core announces it)
        self.announced_key = ""          # the key of the core's last announcement
        self.fw_generation = self.greeted = 0
        self.inflight: dict[int, Any] = {}
        self.liveness = Liveness(now, heartbeat_ms, hung_ms)
        self.next_hello = now
        # the core's and its firmware's processes, as last announced
        self.pid: int | None = None
        self.fw_pid: int | None = None

    def hello_due(self, now: float) -> bool:
        """(Re)send HELLO while the core has not answered (every HELLO_RETRY_S)."""
        if self.state in (CoreState.UNKNOWN, CoreState.DEAD) and now >= self.next_hello:
            self.next_hello = now + HELLO_RETRY_S
            return True
        return False

    def apply(self, body: dict, state: CoreState) -> str:
        """Take the core's announcement (READY or EVENT); returns its firmware endpoint, made
        connectable from where we reach the core."""
        self.firmware_version = body.get("firmware_version", self.firmware_version)
        self.operators = body.get("operators", self.operators)
        self.crash_count = body.get("crash_count", self.crash_count)
        self.firmware_signer = body.get("firmware_signer", self.firmware_signer)
        self.allow_unsigned = body.get("allow_unsigned", self.allow_unsigned)
        self.watchdog_ms = body.get("watchdog_ms", self.watchdog_ms)
        self.max_sleep_ms = body.get("max_sleep_ms", self.max_sleep_ms)
        interval = body.get("heartbeat_ms")
        if isinstance(interval, int) and interval > 0 and interval != self.heartbeat_ms:
            self.heartbeat_ms = interval
            self.liveness = Liveness(self.liveness.last_heard, interval, self.hung_ms)
        reason = body.get("reason")
        if isinstance(reason, str):
            self.reason = reason[:MAX_REASON]
        self.state = state
        self.fw_pid = body.get("fw_pid", self.fw_pid) if state is CoreState.RUNNING else None
        key = body.get("fw_server_key", "")
        self.announced_key = key if isinstance(key, str) else ""
        return rundir.connectable(body.get("fw_endpoint", ""), self.endpoint)

    def restarted(self, body: dict) -> bool:
        """True if ``body`` (READY/EVENT) comes from another core process than the last one heard:
        a core restarted (``vdsp up`` restarts a killed one) between two liveness checks."""
        pid = body.get("pid")
        changed = isinstance(pid, int) and self.pid is not None and pid != self.pid
        if isinstance(pid, int):
            self.pid = pid
        return changed

    def open_fw(self, endpoint: str) -> None:
        self.fw_endpoint, self.fw_key, self.fw_open = endpoint, self.announced_key, True
        self.fw_generation += 1
        self.fw_hello, self.fw_refused = "greeting", ""

    def fw_answered(self, refused: str | None) -> None:
        """The firmware answered the relay's HELLO on the open link: READY, or an ERROR saying why not."""
        self.fw_hello = "ready" if refused is None else "refused"
        self.fw_refused = (refused or "")[:MAX_REASON]

    @property
    def fw_link(self) -> str:
        """``closed`` (no firmware link: the core does not run), ``greeting`` (the relay's HELLO
        is not answered yet), ``ready`` (the firmware accepted it) or ``refused``."""
        return self.fw_hello if self.fw_open else "closed"

    def describe(self) -> dict:
        return {"name": self.name, "index": self.index, "endpoint": self.endpoint, "state": self.state.value,
                "firmware_version": self.firmware_version, "operators": self.operators,
                "crash_count": self.crash_count, "inflight": len(self.inflight),
                "firmware_signer": self.firmware_signer, "allow_unsigned": self.allow_unsigned,
                "watchdog_ms": self.watchdog_ms, "max_sleep_ms": self.max_sleep_ms, "reason": self.reason,
                "fw_link": self.fw_link, "fw_refused": self.fw_refused if self.fw_link == "refused" else ""}

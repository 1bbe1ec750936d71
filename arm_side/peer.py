"""A server the SDK session (``arm_side.session``) talks to and heartbeats: the relay, or a
core's control link (direct mode), with what the session knows of it (liveness, its READY, its
firmware link in direct mode)."""
from __future__ import annotations

from typing import Any

from protocol import errors
from protocol.constants import HEARTBEAT_INTERVAL_MS, HUNG_AFTER_MS
from protocol.liveness import Liveness
from arm_side.busy_retry import BusyRetry


class PeerState:
    """A server we heartbeat: the relay, or a core's control link (direct mode)."""

    generation = 0      # changes whenever a peer (of any session) is declared dead or alive: links to read again

    def __init__(self, name: str, now: float) -> None:
        self.name = name
        self.liveness = Liveness(now, HEARTBEAT_INTERVAL_MS)
        self._alive = True
        PeerState.generation += 1
        self.connected = False                  # READY received: liveness applies from then on
        self.info: dict = {}
        self.fw_endpoint: str | None = None     # direct mode: where the core's firmware link goes
        self.fw_hello: Any = None               # direct mode: our HELLO on that link (proves our owner)
        self.fw_refused: errors.VdspError | None = None     # direct mode: the firmware refused that HELLO
        self.fw_busy: BusyRetry | None = None   # direct mode: that HELLO was answered HB_DSP_BUSY: the pauses
        self.fw_again_at: float | None = None   # ... and when to say it again (None: not due, or not yet set)
        self.inflight: set[int] = set()         # direct mode: msg_ids sent to this core
        # direct mode: those of them sent on a firmware connection that closed (ipc): they reached the
        # firmware, whose core says how they ended (EVENT, or its death or hang), not a later link's failure
        self.fw_ended: set[int] = set()

    @property
    def alive(self) -> bool:
        return self._alive

    @alive.setter
    def alive(self, alive: bool) -> None:
        if alive != self._alive:
            self._alive = alive
            PeerState.generation += 1

    def connect(self, info: dict, now: float) -> None:
        """READY received: liveness starts now, at the interval and hung deadline the peer announced."""
        self.info = info
        interval, hung = info.get("heartbeat_ms"), info.get("hung_ms")
        self.liveness = Liveness(now, interval if isinstance(interval, int) and interval > 0 else HEARTBEAT_INTERVAL_MS,
                                 hung if isinstance(hung, int) and hung > 0 else HUNG_AFTER_MS)
        self.connected = True

    @property
    def pid(self) -> int | None:
        """The server's process as its READY announced it (a relay's or a core's pid)."""
        pid = self.info.get("pid")
        return pid if isinstance(pid, int) and pid > 0 else None

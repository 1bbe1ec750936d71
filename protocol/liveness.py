"""Heartbeat bookkeeping for one peer (Paranoid Pirate practice), clock passed in."""
from __future__ import annotations

from .constants import HEARTBEAT_INTERVAL_MS, LIVENESS


class Liveness:
    """Tracks when we last heard from a peer and when we owe it a heartbeat.

    Invariant: a peer is dead once ``liveness`` intervals pass with no message
    from it; any message (not only HEARTBEAT) counts as a sign of life.
    """

    def __init__(self, now: float, interval_ms: int = HEARTBEAT_INTERVAL_MS, liveness: int = LIVENESS):
        self.interval = interval_ms / 1000.0
        self.window = self.interval * liveness
        self.last_heard = now
        self.next_send = now + self.interval

    def heard(self, now: float) -> None:
        self.last_heard = now

    def send_due(self, now: float) -> bool:
        """True (and re-arms) when a heartbeat should be sent now."""
        if now >= self.next_send:
            self.next_send = now + self.interval
            return True
        return False

    def dead(self, now: float) -> bool:
        return now - self.last_heard > self.window

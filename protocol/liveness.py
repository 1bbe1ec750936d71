"""Heartbeat bookkeeping for one peer, and the rule that turns silence into *hung* (clock passed in).

Death is not decided here: a process that exits is known at once from the kernel (a closed
connection, a child's exit, /proc/<pid>/stat; no pidfd, so on every kernel) by the adapters.
Silence only says a peer *may* be hung, and on a busy host a starved but live process can be
silent for seconds. So (PROTOCOL.md §9):

- silent up to ``hung_s`` (``HUNG_AFTER_MS``, tens of seconds): alive, whatever else we know;
- silent longer: hung, unless the kernel says its process makes progress (runnable, or it used
  CPU since we last looked: :class:`ProcFact`); a peer whose process we cannot see (tcp: another
  host or container) gets no such reprieve;
- silent longer than ``HUNG_HARD_FACTOR`` x ``hung_s``: hung even if it spins (a live-lock).
"""
from __future__ import annotations

import enum

from .constants import HEARTBEAT_INTERVAL_MS, HUNG_AFTER_MS, HUNG_HARD_FACTOR


class ProcFact(enum.Enum):
    """What the kernel says about a peer's process (read by an adapter from /proc)."""

    UNKNOWN = "unknown"          # no process to look at (tcp peer, no pid)
    PENDING = "pending"          # a first look at its CPU time: look again (about a second later)
    GONE = "gone"                # exited (or a zombie)
    STOPPED = "stopped"          # SIGSTOP, traced: it will not answer until someone continues it
    PROGRESSING = "progressing"  # runnable (waiting for a CPU), or used CPU since the last look
    IDLE = "idle"                # asleep and used no CPU since the last look (blocked, deadlocked)


class Liveness:
    """Tracks when we last heard from a peer and when we owe it a heartbeat.

    Any message (not only HEARTBEAT) counts as a sign of life.
    """

    def __init__(self, now: float, interval_ms: int = HEARTBEAT_INTERVAL_MS, hung_ms: int = HUNG_AFTER_MS):
        self.interval = interval_ms / 1000.0
        self.hung_s = hung_ms / 1000.0
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

    def silent(self, now: float) -> float:
        """Seconds since we last heard from the peer."""
        return now - self.last_heard

    def overdue(self, now: float) -> bool:
        """Silent past the deadline: time to ask the kernel about the peer's process."""
        return self.silent(now) > self.hung_s

    def hung(self, now: float, fact: ProcFact = ProcFact.UNKNOWN) -> bool:
        """True if the peer is to be taken for hung now, given what the kernel says of it."""
        if fact is ProcFact.GONE:
            return True
        silent = self.silent(now)
        if silent <= self.hung_s:
            return False
        reprieve = fact in (ProcFact.PROGRESSING, ProcFact.PENDING)
        return not (reprieve and silent <= self.hung_s * HUNG_HARD_FACTOR)

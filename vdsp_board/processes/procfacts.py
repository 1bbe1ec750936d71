"""What the kernel says about a local process, for liveness decisions (``protocol.liveness``).

Only the process's own ``/proc/<pid>/stat`` is read: its state letter and its CPU time. A process
is ``GONE`` once it exited (no entry, or a zombie), ``STOPPED`` in state T/t (SIGSTOP, traced),
``PROGRESSING`` when runnable (R: it waits for a CPU, starved but alive) or when its CPU time
grew since a look at least ``SAMPLE_S`` earlier, ``IDLE`` when asleep with no CPU used since
then. The first look at a pid cannot tell progress yet: it says ``PENDING`` unless the state
alone decides (and so does a look less than ``SAMPLE_S`` after the first).
"""
from __future__ import annotations

from protocol.liveness import ProcFact

SAMPLE_S = 1.0           # CPU time is counted in ticks of 10 ms: compare samples this far apart


def _fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (the state first); None without an entry."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()
    except OSError:
        return None


def stat(pid: int) -> tuple[str, int] | None:
    """(state letter, utime + stime in clock ticks) of ``pid``; None if it has no /proc entry."""
    fields = _fields(pid)
    try:
        return None if fields is None else (fields[0].decode(), int(fields[11]) + int(fields[12]))
    except (IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, /proc/<pid>/stat field 22); None if it has no
    /proc entry. A pid may be reused; a pid and its start time together name one process."""
    fields = _fields(pid)
    try:
        return None if fields is None else int(fields[19])
    except (IndexError, ValueError):
        return None


def exited(pid: int) -> bool:
    """True once ``pid`` is gone or a zombie (exited, not yet reaped)."""
    st = stat(pid)
    return st is None or st[0] in ("Z", "X", "x")


class ProcFacts:
    """Facts about pids, remembering one CPU-time sample per pid to tell progress."""

    MAX_PIDS = 4096          # pids remembered (the oldest are forgotten first)

    def __init__(self) -> None:
        self._samples: dict[int, tuple[float, int]] = {}    # pid -> (when, cpu ticks)

    def fact(self, pid: int | None, now: float) -> ProcFact:
        if not isinstance(pid, int) or pid <= 0:
            return ProcFact.UNKNOWN
        st = stat(pid)
        if st is None or st[0] in ("Z", "X", "x"):
            self._samples.pop(pid, None)
            return ProcFact.GONE
        state, cpu = st
        if state in ("T", "t"):
            return ProcFact.STOPPED
        if state == "R":
            return ProcFact.PROGRESSING
        sample = self._samples.get(pid)
        if sample is None or cpu < sample[1]:       # first look (or another process got the pid)
            self._remember(pid, now, cpu)
            return ProcFact.PENDING
        if cpu > sample[1]:
            self._remember(pid, now, cpu)
            return ProcFact.PROGRESSING
        if now - sample[0] < SAMPLE_S:
            return ProcFact.PENDING
        return ProcFact.IDLE

    def _remember(self, pid: int, now: float, cpu: int) -> None:
        self._samples.pop(pid, None)
        self._samples[pid] = (now, cpu)
        if len(self._samples) > self.MAX_PIDS:
            del self._samples[next(iter(self._samples))]

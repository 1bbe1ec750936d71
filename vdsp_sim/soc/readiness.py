"""Whether a SoC being started serves yet, why not, and how long its start may still take.

:func:`verdict` reads the cores' status (the relay's QUERY ``cores``, or each core's QUERY in
direct mode) and says one of three things: every core serves; not yet (and what is missing);
or never — a reason no wait mends, named with the process that gave it:

- a core whose firmware failed to boot (its EVENT/READY ``reason`` is ``boot failed: …``: an
  image refused, a firmware that could not bind its endpoint, one that died before READY) stays
  offline: a core boots at start-up once, and only a write to its ``state`` boots it again;
- a firmware that refused the relay's HELLO (the core description's ``fw_link`` is ``refused``)
  refuses every task with a buffer the relay forwards: the relay says HELLO once per link.

In relay mode a core serves once it runs and its firmware accepted the relay's HELLO
(``fw_link`` ``ready``). A description without ``fw_link`` (an older relay) counts as ready.

:class:`StartClock` is the start's deadline (``vdsp up --timeout``, ``PrivateSocConfig.ready_timeout_s``):
the time the start has taken, less the time the SoC's processes spent waiting for a CPU (a
starved process is slow, not dead: on a busy host a start takes longer, not for ever) — the
kernel's ``run_delay`` of each process (``/proc/PID/schedstat``: time runnable but not running),
the largest of them — and at most ``HARD_FACTOR`` times the timeout in all.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

from protocol.constants import HUNG_HARD_FACTOR
from vdsp_board.config import settings

START_TIMEOUT_S = 60.0      # the default start timeout: a start took 2.4 s on a 2-CPU host, 8.5 s beside 8 CPU hogs
HARD_FACTOR = HUNG_HARD_FACTOR      # however starved its processes, a start ends at 3 x its timeout
BOOT_FAILED = "boot failed: "


def start_timeout_s() -> float | None:
    """The start timeout of this environment: ``VDSP_START_TIMEOUT`` (0: no limit, None), else
    :data:`START_TIMEOUT_S`."""
    value = settings.current().start_timeout
    if value is None:
        return START_TIMEOUT_S
    return value if value > 0 else None


@dataclasses.dataclass(frozen=True)
class StartVerdict:
    """``ready``: every core serves; ``fatal``: why none ever will (None: waiting may help);
    ``missing``: what is not ready yet, for the message at the deadline."""

    ready: bool
    fatal: str | None = None
    missing: str = ""


def verdict(status: dict, relay: bool) -> StartVerdict:
    """The verdict on ``status`` (``{"cores": [core description, ...]}``); ``relay``: it is the
    relay's view, and the relay must have been accepted by each firmware."""
    cores = [c for c in status.get("cores") or [] if isinstance(c, dict)]
    if not cores:
        return StartVerdict(False, missing="no core has answered yet")
    fatal, missing = [], []
    for core in cores:
        name, state = str(core.get("name", "?")), str(core.get("state", "?"))
        reason = str(core.get("reason") or "")
        link = core.get("fw_link", "ready") if relay else "ready"
        if state == "running" and link == "refused":
            fatal.append(f"{name}'s firmware refused the relay: {core.get('fw_refused') or '?'}")
        elif state == "offline" and reason.startswith(BOOT_FAILED):
            fatal.append(f"{name}'s firmware failed to boot: {reason[len(BOOT_FAILED):]}")
        elif state != "running":
            missing.append(f"{name} {state}" + (f" ({reason})" if reason else ""))
        elif link != "ready":
            missing.append(f"{name} running, its firmware has not answered the relay's HELLO yet")
    if fatal:
        return StartVerdict(False, "; ".join(fatal))
    return StartVerdict(not missing, missing="; ".join(missing))


def run_delay_s(pid: int) -> float | None:
    """Seconds ``pid`` has spent runnable but waiting for a CPU (``/proc/PID/schedstat``, second
    field, in ns); None if it is gone or the kernel does not keep it (no CONFIG_SCHED_INFO)."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as fh:
            return int(fh.read(256).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class StartClock:
    """A start's deadline: ``timeout_s`` (None or 0: none) of the start's time less the time its
    processes waited for a CPU, and at most HARD_FACTOR x ``timeout_s`` of wall time.

    Call :meth:`sample` with the SoC's pids now and then (each poll), then :meth:`expired`.
    ``delay``: what a pid has waited so far, in seconds (``run_delay_s``; injectable for tests).
    """

    MAX_PIDS = 256          # processes followed (a SoC has about 10)

    def __init__(self, timeout_s: float | None, now: float,
                 delay: Callable[[int], float | None] = run_delay_s) -> None:
        self.timeout_s = timeout_s or None
        self.started = now
        self.delay = delay
        self._first: dict[int, float] = {}      # pid -> its run delay when first seen
        self.starved_s = 0.0                    # the most any of them waited for a CPU since

    def sample(self, pids: Iterable[int]) -> None:
        for pid in pids:
            waited = self.delay(pid)
            if waited is None:
                continue
            first = self._first.get(pid)
            if first is None:
                if len(self._first) >= self.MAX_PIDS:
                    continue
                self._first[pid] = first = waited
            self.starved_s = max(self.starved_s, waited - first)

    def elapsed(self, now: float) -> float:
        """The start's time so far, less the time its processes were starved of CPU."""
        return max(0.0, now - self.started - self.starved_s)

    def left(self, now: float, most: float) -> float:
        """Seconds a wait started now may take: ``most``, cut to what is left of the timeout."""
        if self.timeout_s is None:
            return most
        left = min(self.timeout_s - self.elapsed(now), self.timeout_s * HARD_FACTOR - (now - self.started))
        return max(0.05, min(most, left))

    def expired(self, now: float) -> bool:
        if self.timeout_s is None:
            return False
        return self.elapsed(now) >= self.timeout_s or now - self.started >= self.timeout_s * HARD_FACTOR

    def describe(self, now: float) -> str:
        """``4 s`` or, on a busy host, ``4 s (14.2 s, 10.2 s of it waiting for a CPU)``."""
        wall = now - self.started
        text = f"{self.timeout_s:g} s" if self.timeout_s is not None else f"{wall:.1f} s"
        if self.starved_s >= 0.1:
            text += f" ({wall:.1f} s, {self.starved_s:.1f} s of it waiting for a CPU)"
        return text

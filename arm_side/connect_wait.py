"""How long a client waits for a server's READY, and when it gives up: the policy, without I/O
of its own (what it asks of the host, it asks the discovery's helpers it was given). The session's
connect sequence (``arm_side.session``) asks :meth:`next_slice` how long to wait next, has its
driver wait that long for the READY (by blocking, or by awaiting its future), and asks again
until it came.
"""
from __future__ import annotations

from typing import Any, Callable

from protocol import errors

CORE_SLICE_S = 0.5      # a core's READY: how often we look whether something still serves it
RELAY_SLICE_S = 0.1     # a relay's READY: how often we look at the process waited for


class RelayWait:
    """The READY of the relay at ``endpoint``, up to ``timeout_s``. ``local``: what to do about a
    local relay that does not answer within its probe delay (``arm_side.autostart.LocalRelay``:
    wait for the SoC supervisor's relay or a relay that runs, start one for the cores that run,
    or fail); then the wait follows the SoC's real state: it goes on, up to ``timeout_s``, while
    the process waited for lives (a relay starved of CPU answers late), and ends at once when it
    exits or is given up. None: just wait up to ``timeout_s``."""

    def __init__(self, endpoint: str, timeout_s: float, now: float, local: Any = None) -> None:
        self.endpoint, self.timeout_s, self.local = endpoint, timeout_s, local
        self.deadline = now + timeout_s
        self.decide_at = None if local is None else now + local.probe_delay()
        self.message = f"no relay answers at {endpoint} within {timeout_s:g} s"
        self.plan: Any = None      # the autostart.Plan, once asked

    def answered(self) -> None:
        """The relay answered (HB_DSP_BUSY: the SDK says HELLO again): it runs, so no plan for a
        relay that does not answer is needed; the wait goes on up to the deadline."""
        self.decide_at = None

    def next_slice(self, now: float) -> float:
        """Seconds to wait for the READY now. Raises RelayUnavailable saying which process and why."""
        if self.decide_at is not None and now >= self.decide_at:
            self.decide_at = None
            plan = self.plan = self.local.unanswered()
            if plan.action == "fail":
                raise errors.RelayUnavailable(plan.message)
            self.message = f"{plan.message} (waited {self.timeout_s:g} s, the connect timeout)"
        if self.plan is not None:
            problem = self.local.problem(self.plan)
            if problem:
                raise errors.RelayUnavailable(f"no relay answers at {self.endpoint}: {problem}")
        if now >= self.deadline:
            raise errors.RelayUnavailable(self.message)
        return max(0.001, min(RELAY_SLICE_S, self.deadline - now))


class CoreWait:
    """A core's READY (direct mode): waited for up to ``timeout_s`` while ``problem()`` says nothing
    (a slow core answers late), given up at once when it says why (nothing serves the endpoint)."""

    def __init__(self, endpoint: str, timeout_s: float, now: float,
                 problem: Callable[[], str | None] | None = None) -> None:
        self.endpoint, self.timeout_s, self.problem = endpoint, timeout_s, problem
        self.deadline = now + timeout_s
        self.first = True

    def answered(self) -> None:
        """The core answered (HB_DSP_BUSY): the wait goes on as before."""

    def next_slice(self, now: float) -> float:
        """Seconds to wait for the READY now. Raises TaskTimeout saying why not longer."""
        if not self.first:
            problem = self.problem() if self.problem is not None else None
            if problem:
                raise errors.TaskTimeout(problem)
            if now >= self.deadline:
                raise errors.TaskTimeout(f"no answer within {self.timeout_s:g} s")
        self.first = False
        return CORE_SLICE_S


_CONNECTION = {"connected": "connected", "connecting": "not connected yet", "failed": "never connected",
               "closed": "connected, then closed"}


class Tries:
    """What one connect's HELLOs came to, said in the error that ends its wait (a server that
    never answered a HELLO that went, against connections that never took one, tell apart a
    server's fault from the way there). ``since``: when the wait began."""

    def __init__(self, since: float) -> None:
        self.since = since
        self.links = 1                  # connections made for the HELLO (a new one each time one will carry nothing)
        self.unsent = 0                 # HELLOs that found no connection to go on, on every link
        self.sent_at: float | None = None   # when the HELLO went on the current link
        self.unsent_here = False        # a HELLO found no connection on the current link

    def relinked(self) -> None:
        self.links += 1
        self.sent_at, self.unsent_here = None, False

    def not_sent(self) -> None:
        self.unsent += 1
        self.unsent_here = True

    def sent(self, now: float) -> None:
        self.sent_at = now

    def describe(self, connection: str, now: float) -> str:
        """``connection``: what became of the current link's (``arm_side.channel.Watch.connection``;
        '' where the transport cannot tell)."""
        tried = "1 connection" if self.links == 1 else f"{self.links} connections"
        text = f"this client tried {tried} in {now - self.since:.1f} s"
        state = _CONNECTION.get(connection)
        if state:
            text += f", the last {state}"
        if self.sent_at is not None:
            text += f", its HELLO unanswered for {now - self.sent_at:.1f} s"
        elif self.unsent_here:
            text += ", no HELLO could go on it"
        if self.unsent:
            text += f" ({self.unsent} HELLO{'s' if self.unsent > 1 else ''} found no connection)"
        return text

"""How long a client waits for a server's READY, and when it gives up: the policy, without I/O
of its own, shared by the blocking client (``arm_side.client``) and the asyncio one
(``arm_side.async_client``). Each asks :meth:`next_slice` how long to wait next, waits that
long for the READY (by blocking, or by awaiting its future), and asks again until it came.
"""
from __future__ import annotations

from typing import Any

from protocol import errors

CORE_SLICE_S = 0.5      # a core's READY: how often we look whether something still serves it
RELAY_SLICE_S = 0.1     # a relay's READY: how often we look at the process waited for


class RelayWait:
    """The READY of the relay at ``endpoint``. A local relay that does not answer within the
    transport's probe delay is handled as the transport's plan says: wait for the SoC
    supervisor's relay or a relay that runs, start one for the cores that run, or fail. A wait
    follows the SoC's real state: it goes on, up to ``timeout_s``, while the process waited for
    lives (a relay starved of CPU answers late), and ends at once when it exits or is given up."""

    def __init__(self, transport, endpoint: str, timeout_s: float, now: float) -> None:
        self.transport, self.endpoint, self.timeout_s = transport, endpoint, timeout_s
        self.deadline = now + timeout_s
        delay = transport.probe_delay(endpoint)
        self.decide_at = None if delay is None else now + delay
        self.message = f"no relay answers at {endpoint} within {timeout_s:g} s"
        self.plan: Any = None      # the transport's autostart.Plan, once asked

    def answered(self) -> None:
        """The relay answered (HB_DSP_BUSY: the SDK says HELLO again): it runs, so no plan for a
        relay that does not answer is needed; the wait goes on up to the deadline."""
        self.decide_at = None

    def next_slice(self, now: float) -> float:
        """Seconds to wait for the READY now. Raises RelayUnavailable saying which process and why."""
        if self.decide_at is not None and now >= self.decide_at:
            self.decide_at = None
            plan = self.plan = self.transport.unanswered(self.endpoint)
            if plan.action == "fail":
                raise errors.RelayUnavailable(plan.message)
            self.message = f"{plan.message} (waited {self.timeout_s:g} s, the connect timeout)"
        if self.plan is not None:
            problem = self.transport.wait_problem(self.plan)
            if problem:
                raise errors.RelayUnavailable(f"no relay answers at {self.endpoint}: {problem}")
        if now >= self.deadline:
            raise errors.RelayUnavailable(self.message)
        return max(0.001, min(RELAY_SLICE_S, self.deadline - now))


class CoreWait:
    """A core's READY (direct mode): waited for up to ``timeout_s`` while something serves its
    endpoint (a slow core answers late), given up at once when nothing does."""

    def __init__(self, transport, endpoint: str, timeout_s: float, now: float) -> None:
        self.transport, self.endpoint, self.timeout_s = transport, endpoint, timeout_s
        self.deadline = now + timeout_s
        self.first = True

    def next_slice(self, now: float) -> float:
        """Seconds to wait for the READY now. Raises TaskTimeout saying why not longer."""
        if not self.first:
            problem = self.transport.server_problem(self.endpoint)
            if problem:
                raise errors.TaskTimeout(problem)
            if now >= self.deadline:
                raise errors.TaskTimeout(f"no answer within {self.timeout_s:g} s")
        self.first = False
        return CORE_SLICE_S

"""A HELLO answered ``HB_DSP_BUSY``: the server is verifying many other HELLOs just now
(PROTOCOL.md §12). The SDK says HELLO again after a pause, within its connect timeout; the
policy, without I/O or a clock of its own, shared by the blocking client, the asyncio one and
the session (a firmware's HELLO in direct mode, said again on the clock's ticks).

The pause doubles from FIRST_S up to MOST_S; each is drawn between half and all of that, so
that clients refused together do not come back together.
"""
from __future__ import annotations

import random
from typing import Callable

from protocol import errors

FIRST_S = 0.02
MOST_S = 0.5


class BusyRetry:
    """Pauses before each new HELLO to one server; ``deadline`` (monotonic seconds, None: none)
    ends the retries."""

    def __init__(self, deadline: float | None = None, rand: Callable[[], float] = random.random) -> None:
        self.deadline, self.rand = deadline, rand
        self.step = FIRST_S
        self.times = 0          # HELLOs answered HB_DSP_BUSY so far
        self.last: errors.CoreBusy | None = None     # the last such answer

    def pause(self, exc: errors.CoreBusy, now: float) -> float:
        """Seconds to wait before saying HELLO again after ``exc``. Raises CoreBusy (``exc``'s
        message, and how often HELLO was answered so) if the deadline would pass first."""
        pause = self.step * (0.5 + 0.5 * self.rand())
        self.step = min(self.step * 2, MOST_S)
        self.times += 1
        self.last = exc
        if self.deadline is not None and now + pause >= self.deadline:
            raise self.expired() from exc
        return pause

    def expired(self) -> errors.CoreBusy:
        """The error of a connect whose deadline passed after the server answered BUSY (``last``)."""
        assert self.last is not None
        return errors.CoreBusy(f"{self.last.message} (answered so to {self.times} HELLO(s) within the connect "
                               "timeout)")

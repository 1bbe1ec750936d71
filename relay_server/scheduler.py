"""Task queues of the relay (pure: no sockets, no clock).

Order: higher ``priority`` first (255 = PREEMP is therefore always at the
head), then smaller ``custom_id``, then arrival order — fairly shared between
clients: among equal priority and custom_id, clients take turns (start-time
fair queuing: a job's turn is ``max(its client's next turn, the turn now
served)``), so one client's burst cannot hold the others back; one client's
own tasks keep their arrival order. A task is queued for a pinned core or for
ANY; a core takes the better of the heads of its own queue and the ANY queue.
Removal is lazy (a removed job is skipped when it surfaces).
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any

from protocol.ordering import order_key


class Job:
    """One task as the relay sees it. ``payload`` is opaque to the scheduler."""

    __slots__ = ("relay_id", "client", "client_msg_id", "priority", "custom_id", "core", "seq",
                 "payload", "state", "core_name", "enqueued", "started", "discard", "op", "size")

    def __init__(self, relay_id: int, client: Any, client_msg_id: int, priority: int, custom_id: int,
                 core: int | None, payload: Any, enqueued: float = 0.0) -> None:
        self.relay_id, self.client, self.client_msg_id = relay_id, client, client_msg_id
        self.priority, self.custom_id, self.core = priority, custom_id, core
        self.payload, self.enqueued = payload, enqueued
        self.seq: tuple[int, int] = (0, 0)   # (fair-share turn, arrival)
        self.state = "new"       # new -> queued -> running -> done | removed
        self.core_name = ""
        self.started = 0.0
        self.discard = False     # released while running: drop the result
        self.op = 0              # the operator (observers' figures by operator)
        self.size = 0            # bytes of ``payload`` the relay holds (its owner's accounting)

    def key(self) -> tuple:
        return order_key(self.priority, self.custom_id, self.seq)


class Scheduler:
    def __init__(self, n_cores: int, max_queued: int) -> None:
        self._queues: dict[int | None, list] = {None: [], **{i: [] for i in range(n_cores)}}
        self._seq = itertools.count()
        self._turn: dict[Any, int] = {}   # client -> its next turn
        self._serving = 0                 # the turn of the job taken last (never decreases)
        self.max_queued = max_queued
        self.queued = 0

    def full(self) -> bool:
        return self.queued >= self.max_queued

    def push(self, job: Job) -> None:
        """Queue ``job`` (core None = ANY). Caller checks ``full()`` first."""
        turn = max(self._turn.get(job.client, 0), self._serving)
        self._turn[job.client] = turn + 1
        job.seq = (turn, next(self._seq))
        job.state = "queued"
        heapq.heappush(self._queues[job.core], (job.key(), job))
        self.queued += 1

    def remove(self, job: Job) -> bool:
        """Take a queued job out; False if it was not queued."""
        if job.state != "queued":
            return False
        job.state = "removed"
        self.queued -= 1
        return True

    def _head(self, core: int | None) -> Job | None:
        q = self._queues[core]
        while q and q[0][1].state != "queued":
            heapq.heappop(q)
        return q[0][1] if q else None

    def _best(self, core: int) -> list | None:
        """The queue whose head core ``core`` runs next (its pinned queue or ANY), or None."""
        own, anyq = self._queues[core], self._queues[None]
        while own and own[0][1].state != "queued":
            heapq.heappop(own)
        while anyq and anyq[0][1].state != "queued":
            heapq.heappop(anyq)
        if own:
            return own if not anyq or own[0][0] <= anyq[0][0] else anyq   # keys are unique (seq)
        return anyq or None

    def peek_for(self, core: int) -> Job | None:
        """The job core ``core`` would run next, without taking it."""
        q = self._best(core)
        return q[0][1] if q else None

    def pop_for(self, core: int) -> Job | None:
        """Take the next job for core ``core`` (its pinned queue or ANY)."""
        q = self._best(core)
        if q is None:
            return None
        job = heapq.heappop(q)[1]
        job.state = "running"
        self.queued -= 1
        if job.seq[0] > self._serving:
            self._serving = job.seq[0]
        return job

    def forget_client(self, client: Any) -> None:
        """Drop a departed client's turn counter (its jobs are removed by the caller)."""
        self._turn.pop(client, None)

    def drain_pinned(self, core: int | None) -> list[Job]:
        """Remove and return every job queued for ``core`` (None: the ANY queue)."""
        jobs = [j for _, j in self._queues[core] if j.state == "queued"]
        for job in jobs:
            self.remove(job)
        self._queues[core].clear()
        return jobs

    def drain_any(self) -> list[Job]:
        """Remove and return every job queued for ANY core."""
        return self.drain_pinned(None)

"""Tasks a firmware has received but not started, in scheduling order (pure, no sockets).

The relay may send a core several tasks ahead (its credit) so that the DSP never
idles between tasks; the firmware keeps them in the same order the relay uses,
so a later high-priority arrival still runs before earlier low-priority ones,
and a task still waiting here can be cancelled.

The inbox is bounded, in all and per peer: a peer that floods a firmware
directly (bypassing the relay's limits) gets CoreBusy for the excess, and the
relay's share stays free.

A task may be *lent* (taken out of the order, to be run soon: ``dsp_side.intake`` hands a few
to the compute thread ahead): it still counts in both bounds until it is settled (it started)
or given back (it did not, and takes its place in the order again).
"""
from __future__ import annotations

import heapq
import itertools

from protocol import errors, header

MAX_WAITING = 1024          # tasks waiting in one firmware
MAX_WAITING_PER_PEER = 256  # of which one peer (connection) may hold


def task_key(frame: bytes, seq: int) -> tuple | None:
    """Scheduling key of a well-formed TASK header, else None (handled at once)."""
    return header.task_key(frame, seq)


class Inbox:
    def __init__(self, max_waiting: int = MAX_WAITING, max_per_peer: int = MAX_WAITING_PER_PEER) -> None:
        self._heap: list = []
        self._seq = itertools.count()
        self._per_peer: dict[bytes, int] = {}
        self._lent = 0              # entries lent and neither settled nor given back
        self.max_waiting, self.max_per_peer = max_waiting, max_per_peer

    def offer(self, identity: bytes, frames: list) -> bool:
        """Queue ``frames`` if they are a TASK; False means: handle them now.

        Raises CoreBusy (nothing queued) when the inbox or the peer's share is full.
        """
        key = task_key(bytes(frames[0]), next(self._seq)) if frames else None
        if key is None:
            return False
        held = self._per_peer.get(identity, 0)
        waiting = len(self._heap) + self._lent
        if waiting >= self.max_waiting or held >= self.max_per_peer:
            raise errors.CoreBusy(f"firmware queue full ({waiting} waiting, {held} of them yours; "
                                  f"limits {self.max_waiting} and {self.max_per_peer} per peer); retry later")
        self._per_peer[identity] = held + 1
        heapq.heappush(self._heap, (key, identity, frames))
        return True

    def _taken(self, identity: bytes) -> None:
        held = self._per_peer[identity] - 1
        if held:
            self._per_peer[identity] = held
        else:
            del self._per_peer[identity]

    def pop(self) -> tuple[bytes, list]:
        _, identity, frames = heapq.heappop(self._heap)
        self._taken(identity)
        return identity, frames

    def lend(self) -> tuple:
        """The best waiting entry ``(key, identity, frames)``, out of the order but still counted
        until :meth:`settle` or :meth:`give_back`. Raises IndexError if none waits."""
        entry = heapq.heappop(self._heap)
        self._lent += 1
        return entry

    def settle(self, identity: bytes) -> None:
        """A lent entry of peer ``identity`` started: it counts no more."""
        self._lent -= 1
        self._taken(identity)

    def give_back(self, entry: tuple) -> None:
        """A lent entry that did not start takes its place in the order again."""
        self._lent -= 1
        heapq.heappush(self._heap, entry)

    def best(self) -> tuple | None:
        """The best waiting entry ``(key, identity, frames)``, left in the order; None if none waits."""
        return self._heap[0] if self._heap else None

    def best_key(self) -> tuple | None:
        """The scheduling key of the best waiting entry, None if none waits."""
        return self._heap[0][0] if self._heap else None

    def cancel(self, identity: bytes, msg_id: int) -> list | None:
        """Remove the waiting task ``msg_id`` of peer ``identity``; its frames, or None."""
        for i, (_, ident, frames) in enumerate(self._heap):
            if ident == identity and header.msg_id_of(frames[0]) == msg_id:
                self._heap[i] = self._heap[-1]
                self._heap.pop()
                heapq.heapify(self._heap)
                self._taken(identity)
                return frames
        return None

    def __len__(self) -> int:
        """Entries waiting in the order (lent ones not included)."""
        return len(self._heap)

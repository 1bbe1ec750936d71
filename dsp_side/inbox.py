"""Tasks a firmware has received but not started, in scheduling order (pure, no sockets).

The relay may send a core several tasks ahead (its credit) so that the DSP never
idles between tasks; the firmware keeps them in the same order the relay uses,
so a later high-priority arrival still runs before earlier low-priority ones,
and a task still waiting here can be cancelled.
"""
from __future__ import annotations

import heapq
import itertools
import struct

from protocol.constants import MAGIC, Command
from protocol.ordering import order_key

_CUSTOM_ID = struct.Struct("<q")
_MSG_ID = struct.Struct("<Q")


def task_key(header: bytes, seq: int) -> tuple | None:
    """Scheduling key of a well-formed TASK header, else None (handled at once)."""
    if len(header) != 24 or header[:2] != MAGIC or header[3] != Command.TASK:
        return None
    return order_key(header[6], _CUSTOM_ID.unpack_from(header, 16)[0], seq)


class Inbox:
    def __init__(self) -> None:
        self._heap: list = []
        self._seq = itertools.count()

    def offer(self, identity: bytes, frames: list) -> bool:
        """Queue ``frames`` if they are a TASK; False means: handle them now."""
        key = task_key(bytes(frames[0]), next(self._seq)) if frames else None
        if key is None:
            return False
        heapq.heappush(self._heap, (key, identity, frames))
        return True

    def pop(self) -> tuple[bytes, list]:
        _, identity, frames = heapq.heappop(self._heap)
        return identity, frames

    def cancel(self, identity: bytes, msg_id: int) -> list | None:
        """Remove the waiting task ``msg_id`` of peer ``identity``; its frames, or None."""
        for i, (_, ident, frames) in enumerate(self._heap):
            if ident == identity and _MSG_ID.unpack_from(frames[0], 8)[0] == msg_id:
                self._heap[i] = self._heap[-1]
                self._heap.pop()
                heapq.heapify(self._heap)
                return frames
        return None

    def __len__(self) -> int:
        return len(self._heap)

"""Work handed from one of a firmware's threads to the other: a queue and an eventfd (DESIGN.md §7).

Each :class:`Channel` has one producer thread and one consumer thread. :meth:`Channel.put`
appends to a ``collections.deque`` (whose appends and pops are thread-safe, as its
documentation says) and then adds 1 to an eventfd, which a poll sees readable while anything
may wait; :meth:`Channel.take` reads the eventfd (back to 0) *before* it empties the deque.
Invariant: an item put is taken by the ``take`` that follows its ``put``'s eventfd write, or by
one before it; the eventfd stays readable until then, so no item waits unseen by a poll. The
eventfd write and read are system calls: they order the deque's contents between the two
threads without relying on the GIL (or on its switch interval). A spurious wake-up (the
eventfd readable, the deque already emptied by the take before) costs one empty take.
"""
from __future__ import annotations

import collections
import os
from typing import Any


class Channel:
    """A one-producer, one-consumer queue whose :meth:`fileno` is readable while it may hold items."""

    __slots__ = ("_items", "_fd")

    def __init__(self) -> None:
        self._items: collections.deque[Any] = collections.deque()
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    def fileno(self) -> int:
        return self._fd

    def put(self, item: Any) -> None:
        """Queue ``item`` and wake the consumer's poll (the producer's thread only)."""
        self._items.append(item)
        os.eventfd_write(self._fd, 1)

    def take(self) -> list:
        """Everything queued, oldest first (the consumer's thread only); [] if nothing."""
        try:
            os.eventfd_read(self._fd)       # first: an item put from now on leaves the fd readable
        except BlockingIOError:
            pass
        items = self._items
        out = []
        while items:
            out.append(items.popleft())
        return out

    def __len__(self) -> int:
        return len(self._items)

    def close(self) -> None:
        os.close(self._fd)

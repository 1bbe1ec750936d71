"""Work handed from one of a firmware's threads to the other: a queue and an eventfd (DESIGN.md §7).

A queue is a ``collections.deque`` (whose appends and pops are thread-safe, as its
documentation says) with one producer thread and one consumer thread; a :class:`Doorbell`
(an eventfd) tells the consumer's poll that something may wait. The producer appends, then
rings; the consumer clears the doorbell *before* it empties the queue. Invariant: an item
appended is taken by the consumer's first emptying after the ring that follows it, or by one
before; the doorbell stays readable until then, so no item waits unseen by a poll. The
eventfd's write and read are system calls: they order the queue's contents between the threads
without relying on the GIL (or on its switch interval). A spurious wake-up (the doorbell
readable, the queue already emptied) costs one empty look.

:meth:`Doorbell.ring` and :meth:`Doorbell.clear` keep the GIL (libc's ``eventfd_write`` and
``eventfd_read`` through ``ctypes.PyDLL``, which does not let go of it; ``os.eventfd_write``
would, and the other thread, woken by the very ring, would take the GIL from the ringing thread
mid-turn: two thread switches per ring instead of none). A call on an eventfd never blocks
(the fd is non-blocking; the counter cannot reach its maximum from rings of 1).
"""
from __future__ import annotations

import collections
import ctypes
import os
from typing import Any


def _libc_calls() -> tuple[Any, Any] | None:
    try:
        libc = ctypes.PyDLL(None)       # PyDLL: the GIL is kept during each call
        write, read = libc.eventfd_write, libc.eventfd_read
    except (OSError, AttributeError):
        return None
    write.argtypes, write.restype = [ctypes.c_int, ctypes.c_uint64], ctypes.c_int
    read.argtypes, read.restype = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)], ctypes.c_int
    return write, read


_CALLS = _libc_calls()


class Doorbell:
    """An eventfd: :meth:`fileno` is readable from a :meth:`ring` until the next :meth:`clear`."""

    __slots__ = ("_fd", "_count", "ring", "clear")

    def __init__(self) -> None:
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._count = ctypes.c_uint64()
        if _CALLS is not None:
            write, read = _CALLS
            fd, count = self._fd, ctypes.byref(self._count)
            self.ring = lambda: write(fd, 1)
            self.clear = lambda: read(fd, count)
        else:       # no libc to call: os's calls, which let go of the GIL
            self.ring, self.clear = self._os_ring, self._os_clear

    def fileno(self) -> int:
        return self._fd

    def _os_ring(self) -> None:
        os.eventfd_write(self._fd, 1)

    def _os_clear(self) -> None:
        try:
            os.eventfd_read(self._fd)
        except BlockingIOError:
            pass

    def close(self) -> None:
        os.close(self._fd)


class Mailbox:
    """A one-producer, one-consumer queue with its doorbell."""

    __slots__ = ("items", "bell")

    def __init__(self, items: collections.deque | None = None) -> None:
        self.items: collections.deque[Any] = items if items is not None else collections.deque()
        self.bell = Doorbell()

    def fileno(self) -> int:
        return self.bell.fileno()

    def put(self, item: Any) -> None:
        """Queue ``item`` and ring (the producer's thread only)."""
        self.items.append(item)
        self.bell.ring()

    def take(self) -> list:
        """Everything queued, oldest first (the consumer's thread only); [] if nothing."""
        self.bell.clear()       # first: an item queued from now on leaves the doorbell readable
        items = self.items
        out = []
        while items:
            out.append(items.popleft())
        return out

    def __len__(self) -> int:
        return len(self.items)

    def close(self) -> None:
        self.bell.close()

"""Waiting until file descriptors are readable: with poll(2), never select(2).

``select`` takes no descriptor above 1023 (FD_SETSIZE): in a process that holds more fds (servers
and GUIs routinely do), a wait on a socket opened late fails with ``ValueError: filedescriptor
out of range in select()``. ``poll`` has no such limit. (ZeroMQ's own waits, ``zmq.Poller`` and
``zmq_poll``, use poll too; asyncio's default selector is epoll.)
"""
from __future__ import annotations

import select

_IN = select.POLLIN


class PollSet:
    """A wait on a set of fds, kept between waits (the SDK waits on the same few fds for every
    task; registering them again each time would cost more than the wait): rebuilt only when the
    fds change. One thread at a time."""

    def __init__(self) -> None:
        self._fds: list[int] = []
        self._poll = select.poll()

    def wait(self, fds: list[int], timeout_s: float | None) -> list[tuple[int, int]]:
        """``(fd, events)`` of the fds of ``fds`` that are readable (or hung up, or closed),
        waiting up to ``timeout_s`` seconds (None: no limit) for one to be."""
        if fds != self._fds:
            poll = select.poll()
            for fd in fds:
                poll.register(fd, _IN)
            self._poll, self._fds = poll, list(fds)
        return self._poll.poll(None if timeout_s is None else timeout_s * 1000 if timeout_s > 0 else 0)


def readable(fd: int, timeout_s: float | None) -> bool:
    """True once ``fd`` is readable (or hung up), False after ``timeout_s`` seconds (None: no limit)."""
    poll = select.poll()
    poll.register(fd, _IN)
    return bool(poll.poll(None if timeout_s is None else max(0.0, timeout_s) * 1000))

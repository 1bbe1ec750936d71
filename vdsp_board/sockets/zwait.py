"""The relay's wait on ZeroMQ sockets and plain file descriptors at once, in fewer system calls than ``zmq_poll``.

``zmq_poll`` with a timeout asks each socket's ``ZMQ_EVENTS`` (libzmq looks at the socket's
commands: a ``getpid`` and a ``poll`` of its mailbox) before it sleeps and again after it wakes,
and sleeps by a ``poll`` of every fd after a first one that does not wait: for the relay's three
busy sockets, 14 system calls a wait. Here a wait asks each socket's ``ZMQ_EVENTS`` once, before
it sleeps (as ``zmq_poll``'s first pass does), then sleeps in ``epoll_wait`` on the sockets'
``ZMQ_FD`` and the fds, registered once: 7 for the relay.

That is enough. A socket's ``ZMQ_FD`` signals news only (its mailbox got a command), and any
operation on the socket (a send, a receive, an ``EVENTS`` read) may take in the command that
announced a message, after which the fd no longer signals it. So right before each sleep, after
the last operation of the turn, every socket is asked whether a message waits: if one does, the
wait does not sleep; if none does, its commands were taken in, and a message that arrives later
announces itself on the fd, which wakes the sleep (its readiness is level-triggered: it stays
readable until libzmq takes the command in). What woke is returned; the caller then receives
from a socket until none waits, or asks it again, before the next wait (its handler's work).

The firmware's I/O thread (one socket: 3 system calls a wait against ``zmq_poll``'s 6) still
sleeps in ``zmq_poll``: with this wait, a sequential task's p50 through it was 142.9 against 140.1
µs (16 alternated rounds of 400, lower in 6), as an earlier epoll loop there had been slower too
(vdsp_sim/benchmarks/README.md). For the relay the same test gave 289.3 against 290.4 (12 rounds,
lower in 6), and its system calls a sequential task 65.2 against 75.3.
"""
from __future__ import annotations

import select
from typing import Hashable, Sequence

import zmq

from vdsp_board.sockets.zsock import readable


class ZWait:
    """Waits on ``socks`` (ZeroMQ sockets, to read) and ``fds`` (file descriptors, to read).
    The caller closes it (:meth:`close`) and makes a new one when the sets change."""

    def __init__(self, socks: Sequence[zmq.Socket], fds: Sequence[int]) -> None:
        self.socks = list(socks)
        self._epoll = select.epoll()
        self._keys: dict[int, Hashable] = {}
        try:
            for sock in self.socks:
                fd = int(sock.get(zmq.FD))
                self._epoll.register(fd, select.EPOLLIN)
                self._keys[fd] = sock
            for fd in fds:
                self._epoll.register(fd, select.EPOLLIN)
                self._keys[fd] = fd
        except BaseException:
            self._epoll.close()
            raise

    def wait(self, timeout_ms: int) -> list:
        """What is ready to read: the sockets a message waits on or whose fd signalled (a socket's
        fd may signal only commands: its next receive finds none), and the fds readable, in no
        particular order. Sleeps ``timeout_ms`` at most (-1: no limit) when none is ready."""
        ready: list = [sock for sock in self.socks if readable(sock)]
        events = self._epoll.poll(0 if ready else -1 if timeout_ms < 0 else timeout_ms / 1000)
        keys = self._keys
        for fd, _ in events:
            key = keys.get(fd)
            if key is not None and key not in ready:
                ready.append(key)
        return ready

    def close(self) -> None:
        self._epoll.close()

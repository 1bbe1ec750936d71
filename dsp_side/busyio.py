"""Who serves a firmware's socket while a task runs: the socket is handed to a thread of its own.

A firmware runs one task at a time on its main thread, which also reads and answers its socket
between tasks. A CANCEL of a task waiting behind a long one, or a TASK refused past the inbox's
limits, used to wait for the running task's end (a PING queued behind a 2 s SLEEP was released
after 1.6 s). Now, once a task has run for HANDOFF_S, the main thread's socket (and everything
the socket's turn touches: the inbox, the HELLO gate, the replies held back) passes to the
*busy thread*, which takes in and answers what arrives until the task ends, then hands it back.

Ownership is one lock, ``sock_lock``: whoever holds it may use the socket and that state. The
main thread holds it except while an operator computes (:meth:`BusyIO.begin` ..
:meth:`BusyIO.end`). The busy thread sleeps while no task runs (an idle firmware wakes nothing);
the first task to begin wakes it, it looks again HANDOFF_S later and takes the socket if the same
task still runs, else it looks at the next one, and waits again once none runs. So a short task
pays a few attribute writes and an uncontended release and acquire of the lock (~0.5 µs of CPU,
no system call), and the busy thread wakes once per HANDOFF_S at most while tasks follow each
other; a task is served from HANDOFF_S (2 x HANDOFF_S at most) after its start.

The GIL: the busy thread needs it for each step of a turn. An operator that releases it while it
computes (OpenCV, numba, numpy's large loops, ``time.sleep``) lets the busy thread answer at once.
One that holds it (pure Python loops) makes each of the busy thread's steps wait for the
interpreter's switch interval, lowered to BUSY_SWITCH_S while the busy thread serves (a few
dozen steps per answer).
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Callable

log = logging.getLogger("vdsp.firmware")

HANDOFF_S = 0.02        # a task still running this long after the busy thread saw it begin is handed over
BUSY_SWITCH_S = 0.0005  # the interpreter's switch interval while the busy thread serves (default 0.005)
POLL_MS = 200           # the busy thread's longest wait for the socket (end() wakes it at once)


class BusyIO:
    """Hands the socket to ``serve(wake_fd, timeout_ms)`` on a thread of its own while a task runs.

    ``serve`` is called repeatedly while the task runs, with the socket's lock held; it waits at
    most ``timeout_ms`` for the socket (and ``wake_fd``, which :meth:`end` makes readable), takes
    in and answers what arrived, and returns. Create it on the main thread, which then holds the
    socket; :meth:`close` ends the thread (from the main thread, holding the socket)."""

    def __init__(self, serve: Callable[[int, int], None], name: str = "fw-busy-io") -> None:
        self.sock_lock = threading.Lock()
        self.sock_lock.acquire()            # the main thread's until begin()
        self._serve = serve
        # Plain attributes, each written by one thread and read by the other (the GIL orders them):
        # the main thread writes _running and _seq, the busy thread _idle and _serving. Each side
        # writes its own before it reads the other's, so one of them always sees the other.
        self._running = False               # a task computes on the main thread
        self._seq = 0                       # tasks begun so far
        self._idle = False                  # the busy thread waits on _wake_up for a task to begin
        self._serving = False               # the busy thread has or is taking the socket
        self._stop = False
        self._wake_up = threading.Condition(threading.Lock())
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def wake_fd(self) -> int:
        """Readable when the busy thread should give the socket back (drain it with :meth:`drain`)."""
        return self._wake_r

    def drain(self) -> None:
        try:
            os.read(self._wake_r, 4096)
        except BlockingIOError:
            pass

    # --- the main thread ----------------------------------------------------------------------
    def begin(self) -> None:
        """A task starts computing: the socket may pass to the busy thread meanwhile."""
        self._running = True
        self._seq += 1
        if self._idle:          # at most once per HANDOFF_S while tasks follow each other closely
            with self._wake_up:
                self._wake_up.notify()
        self.sock_lock.release()

    def end(self) -> None:
        """The task is done: take the socket back (at once, or once the busy thread's turn ends)."""
        self._running = False
        if self._serving:
            self._wake()
        self.sock_lock.acquire()

    def close(self) -> None:
        """End the busy thread (from the main thread, which holds the socket; it is not to be used
        meanwhile: the busy thread may take the lock on its way out)."""
        self._stop = True
        with self._wake_up:
            self._wake_up.notify()
        self._wake()
        self.sock_lock.release()
        self._thread.join(2.0)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass        # full: it is awake already

    # --- the busy thread ----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._wake_up:
                self._idle = True
                if not self._running and not self._stop:        # idle: no wake-ups, no CPU
                    self._wake_up.wait()    # until a task begins (and once: it may have ended already)
                self._idle = False
            if self._stop:
                return
            seen = self._seq
            time.sleep(HANDOFF_S)
            self._serving = True
            if self._stop:
                return
            if not (self._running and self._seq == seen):
                self._serving = False
                continue            # that task ended: look at the next one
            with self.sock_lock:
                switch = sys.getswitchinterval()
                sys.setswitchinterval(BUSY_SWITCH_S)
                try:
                    while self._running and not self._stop:
                        try:
                            self._serve(self._wake_r, POLL_MS)
                        except Exception:   # a bug: the main thread serves again after this task
                            log.exception("serving the socket while a task runs failed")
                            break
                finally:
                    sys.setswitchinterval(switch)
                    self._serving = False

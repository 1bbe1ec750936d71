"""The hand-over of a firmware's socket while a task runs (``dsp_side.busyio``), without sockets:
``serve`` stands for the socket's turn and records which thread ran it, and when."""
from __future__ import annotations

import select
import threading
import time

from dsp_side import busyio
from dsp_side.busyio import BusyIO


class Turns:
    """A ``serve`` that records its calls; each waits on the wake fd like the firmware's poll."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, int]] = []    # (when, thread id)
        self.io: BusyIO | None = None

    def __call__(self, wake_fd: int, timeout_ms: int) -> None:
        assert self.io is not None and self.io.sock_lock.locked()
        self.calls.append((time.monotonic(), threading.get_ident()))
        poller = select.poll()
        poller.register(wake_fd, select.POLLIN)
        if poller.poll(timeout_ms):
            self.io.drain()


def make() -> tuple[BusyIO, Turns]:
    turns = Turns()
    io = BusyIO(turns)
    turns.io = io
    return io, turns


def test_a_long_task_hands_the_socket_over_and_gets_it_back_when_it_ends():
    io, turns = make()
    try:
        io.begin()
        time.sleep(0.3)                         # a long task
        assert turns.calls, "nobody served the socket while the task ran"
        assert all(tid != threading.get_ident() for _, tid in turns.calls)
        t0 = time.monotonic()
        io.end()                                # wakes the busy thread's wait on the socket
        assert time.monotonic() - t0 < busyio.POLL_MS / 1000, "the socket came back only at the busy thread's timeout"
        assert io.sock_lock.locked()            # ours again
        n = len(turns.calls)
        time.sleep(0.1)
        assert len(turns.calls) == n            # no turn once the task ended
    finally:
        io.close()


def test_short_tasks_never_hand_the_socket_over():
    io, turns = make()
    try:
        end = time.monotonic() + 0.5
        while time.monotonic() < end:           # tasks of ~1 ms back to back
            io.begin()
            time.sleep(0.001)
            io.end()
        assert turns.calls == []
    finally:
        io.close()


def voluntary_switches(io: BusyIO) -> int:
    """How often the busy thread went to sleep (each wait or sleep is one)."""
    with open(f"/proc/self/task/{io._thread.native_id}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("voluntary_ctxt_switches"))


def test_short_tasks_wake_the_busy_thread_once_per_look_not_once_per_task():
    """Tasks of ~0 ms with the firmware idle ~1 ms between them: a task wakes the busy thread only
    while it waits, and once woken it sleeps HANDOFF_S before it waits again, so the wake-ups
    (the main thread's notify calls: its cost per task) are at most one per HANDOFF_S, not one per
    task (they were: 9,483 for 9,483 pipelined tasks)."""
    io, turns = make()
    notifies = []
    notify = io._wake_up.notify
    # a wake-up is a notify while the busy thread waits; one more before it has run (a loaded host) wakes nobody
    io._wake_up.notify = lambda *a: (io._wake_up._waiters and notifies.append(1), notify(*a))  # type: ignore
    try:
        time.sleep(0.05)
        t0 = time.monotonic()
        for _ in range(400):
            io.begin()
            io.end()
            time.sleep(0.001)       # idle between tasks
        bound = (time.monotonic() - t0) / busyio.HANDOFF_S + 1
        assert 400 > 2 * bound, "the host is too slow for this test to tell"
        assert len(notifies) <= bound, (len(notifies), bound)
    finally:
        io.close()


def test_an_idle_firmware_s_busy_thread_sleeps():
    io, turns = make()
    try:
        time.sleep(0.05)
        before = voluntary_switches(io)
        time.sleep(0.5)
        assert voluntary_switches(io) - before <= 1, "the busy thread of an idle firmware keeps waking up"
    finally:
        io.close()


def test_close_ends_the_thread_whoever_holds_what():
    io, turns = make()
    io.begin()
    time.sleep(0.1)                             # the busy thread serves
    io.end()
    t0 = time.monotonic()
    io.close()
    assert not io._thread.is_alive() and time.monotonic() - t0 < 1

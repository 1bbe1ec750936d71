"""arm_side.interrupts: closing that an interruption cuts short one step of; blocks whose
signals are handled after them."""
from __future__ import annotations

import os
import signal
import threading

import pytest

from arm_side import interrupts


class Interrupted(BaseException):
    pass


def test_every_step_runs_when_one_is_interrupted_and_the_first_exception_is_raised():
    ran = []

    def step(name, exc=None):
        def run():
            ran.append(name)
            if exc is not None:
                raise exc
        return run
    with pytest.raises(Interrupted):
        interrupts.each(step("a"), step("b", Interrupted()), step("c", ValueError("later")), step("d"))
    assert ran == ["a", "b", "c", "d"]


def test_a_signal_in_an_uninterrupted_block_is_handled_after_it():
    seen = []

    def handler(signum, frame):
        seen.append(signum)
        raise Interrupted()
    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        with pytest.raises(Interrupted):
            with interrupts.uninterrupted():
                os.kill(os.getpid(), signal.SIGUSR1)
                for _ in range(1000):       # bytecodes where the handler would have run
                    pass
                seen.append("block ended")
        assert seen == ["block ended", signal.SIGUSR1]
        assert signal.getsignal(signal.SIGUSR1) is handler      # restored
        with pytest.raises(Interrupted):    # and handled at once again after it
            os.kill(os.getpid(), signal.SIGUSR1)
            for _ in range(1000):
                pass
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_outside_the_main_thread_an_uninterrupted_block_changes_no_handler():
    seen = []

    def run():
        before = signal.getsignal(signal.SIGINT)
        with interrupts.uninterrupted():
            seen.append(signal.getsignal(signal.SIGINT) is before)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [True]


def test_a_client_interrupted_before_its_links_exist_closes_its_transport(monkeypatch):
    from arm_side import client as client_module
    from arm_side.discovery import Servers

    class Transport:        # only what a client reads before its links exist
        discovery = Servers("direct", {"vdsp0": "ipc:///nowhere/0"})
        closed = 0

        def close(self):
            Transport.closed += 1

    def interrupted():
        raise Interrupted()
    monkeypatch.setattr(client_module.tracing, "sdk_tracer", interrupted)
    with pytest.raises(Interrupted):
        client_module.Client(Transport(), owner=1)
    assert Transport.closed == 1


def test_a_link_whose_lock_an_interruption_left_held_still_closes(short_dir, monkeypatch):
    import time

    import zmq

    from arm_side import channel
    monkeypatch.setattr(channel, "CLOSE_WAIT_S", 0.2)
    ctx = zmq.Context()
    server = ctx.socket(zmq.ROUTER)
    server.bind(f"ipc://{short_dir}/core.sock")
    link = channel.Channel(ctx, f"ipc://{short_dir}/core.sock", "vdsp0")
    try:
        assert link.lock.acquire(timeout=1)     # held, and its holder gone (as after the CI hang)
        start = time.monotonic()
        link.goodbye([b"bye"])                  # not sent: the link is not free
        link.close()
        assert time.monotonic() - start < 2.0
        assert link.closed and link.sock.closed
    finally:
        server.close(0)
        ctx.destroy(linger=0)

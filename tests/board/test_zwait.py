"""``zwait.ZWait``: the relay's wait on sockets and fds, ``ZMQ_EVENTS`` once before
it sleeps and ``epoll_wait`` on the sockets' edge-triggered fds. What a user of the relay would see go
wrong: a message that waits while the wait sleeps on (its fd's signal taken in by another operation
on the socket), or a wait that never sleeps."""
from __future__ import annotations

import os
import time

import pytest
import zmq

from vdsp_board.sockets import zsock
from vdsp_board.sockets.zwait import ZWait


@pytest.fixture
def pair(short_dir):
    ctx = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    router.linger = dealer.linger = 0
    router.bind(f"ipc://{short_dir}/w.sock")
    dealer.connect(f"ipc://{short_dir}/w.sock")
    dealer.send_multipart([b"hello"])           # the connection made, and its first message read
    assert router.poll(5000)
    router.recv_multipart()
    try:
        yield router, dealer
    finally:
        ctx.destroy(linger=0)


def drained(sock) -> int:
    n = 0
    while zsock.recv_next(sock) is not None:
        n += 1
    return n


def test_a_message_that_arrives_during_the_wait_wakes_it(pair):
    router, dealer = pair
    waiter = ZWait([router], [])
    try:
        assert waiter.wait(0) in ([], [router])     # the connection's own commands, if any
        drained(router)
        assert waiter.wait(50) == []                # nothing: it slept its time
        t0 = time.monotonic()
        dealer.send_multipart([b"task"])
        assert waiter.wait(5000) == [router]
        assert time.monotonic() - t0 < 4.0
        assert drained(router) == 1
    finally:
        waiter.close()


def test_a_message_whose_signal_another_operation_took_in_is_seen_before_the_sleep(pair):
    """ZeroMQ's fd signals news once: reading EVENTS (as a send may take in commands) after the
    message came takes that signal, and a sleep on the fd alone would sleep past the message."""
    router, dealer = pair
    drained(router)
    dealer.send_multipart([b"task"])
    deadline = time.monotonic() + 5
    while not zsock.readable(router):           # takes in the command that announced it
        assert time.monotonic() < deadline
        time.sleep(0.001)
    waiter = ZWait([router], [])
    try:
        t0 = time.monotonic()
        assert waiter.wait(2000) == [router]
        assert time.monotonic() - t0 < 1.0          # at once, not at the timeout
        assert drained(router) == 1
    finally:
        waiter.close()


def test_fds_and_sockets_together_and_the_timeout(pair):
    router, dealer = pair
    drained(router)
    r, w = os.pipe()
    waiter = ZWait([router], [r])
    try:
        t0 = time.monotonic()
        assert waiter.wait(100) == []
        assert time.monotonic() - t0 >= 0.09        # slept, did not spin
        os.write(w, b"x")
        assert waiter.wait(5000) == [r]
        dealer.send_multipart([b"task"])
        deadline = time.monotonic() + 5
        got: list = []
        while router not in got:                    # the pipe stays readable: both, in time
            got = waiter.wait(1000)
            assert time.monotonic() < deadline
        assert set(got) == {router, r}
    finally:
        waiter.close()
        os.close(r)
        os.close(w)

"""A link whose server refused our CURVE key never blocks a send.

libzmq ends a connection whose handshake the server's ZAP handler denied and does not connect
again; the DEALER then has nowhere to queue a message, and a blocking send waits forever. The
SDK's sends did block: a `vdsp status` with a revoked key hung past its 30 s connect timeout
twice in CI, on loaded hosts (its HELLO went out after the refusal, holding the link's lock, so
nothing could look for the refusal either). Now a send raises RelayUnavailable at once, and a
HELLO that cannot go is told as the refusal it is (KeyRefused, naming our key).

A real CURVE server (a ROUTER with a ZAP handler that allows no key: tests/conftest.py) on loopback tcp; the
session's connect steps are driven by hand for the HELLO's case.
"""
from __future__ import annotations

import threading
import time

import pytest
import zmq

from arm_side import errors
from arm_side.channel import Channel
from arm_side.session import Session
from arm_side.steps import Dead, Hello, Open, Pause, Refused, Release
from tests.conftest import wait_until

SEND_WITHIN_S = 5.0     # a send that has not returned by then is blocked (today's sends return in µs)


def _send_in_a_thread(channel: Channel, frames: list) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def send():
        try:
            outcome["result"] = channel.send(frames)
        except Exception as exc:    # what the test looks at
            outcome["error"] = exc
    sender = threading.Thread(target=send, daemon=True)    # daemon: a blocked send must not hang pytest
    sender.start()
    return sender, outcome


def test_a_send_after_the_server_refused_our_key_raises_at_once(refusing_server):
    endpoint, server_key = refusing_server
    ctx = zmq.Context()
    channel = Channel(ctx, endpoint, "relay", watch=True, server_key=server_key)
    blocked = False
    try:
        channel.send([b"first"])        # queued: the connection is being made
        assert wait_until(lambda: channel.refused() is not None, 10, 0.02), "the server's refusal never came"
        assert "did not accept this client key" in channel.refused()
        error = None
        for _ in range(20):             # the pipe of the refused connection goes away soon after the refusal
            sender, outcome = _send_in_a_thread(channel, [b"next"])
            sender.join(SEND_WITHIN_S)
            blocked = sender.is_alive()
            assert not blocked, (f"a send to a server that refused our key blocked for {SEND_WITHIN_S} s "
                                 "(and holds the link's lock)")
            error = outcome.get("error")
            if error is not None:
                break
            time.sleep(0.05)
        assert isinstance(error, errors.RelayUnavailable), error
        assert endpoint in error.message and "refused this client's key" in error.message
        assert channel.refused() is not None        # the link's lock is free: its monitor can be read
    finally:
        if not blocked:     # else closing would wait for the blocked send's lock, and the context for its socket
            channel.close()
            ctx.term()


class _Discovery:
    mode = "relay"

    def prepare(self, owner):
        pass

    def servers(self):
        return {"relay": "tcp://127.0.0.1:1"}

    def ready_wait(self, name, endpoint, timeout_s, now):
        return object()     # its slices are never asked for: the HELLO never went


def _hello_not_sent(clock):
    """A relay-mode connect whose HELLO's send raised RelayUnavailable; returns the steps and the next one."""
    steps = Session("relay", owner=1).connect(_Discovery(), 5.0, clock)
    assert isinstance(next(steps), Open)
    assert isinstance(steps.send(None), Hello)
    step = steps.throw(errors.RelayUnavailable("cannot send to relay: the connection takes no messages"))
    assert isinstance(step, Dead)      # an ipc link would be: no key to refuse there, a new link at once
    return steps, steps.send("")


def test_a_hello_that_cannot_be_sent_is_told_as_the_refusal_of_our_key():
    """The connect sequence: the HELLO's send raised RelayUnavailable (nowhere to queue it); the
    session asks whether the server refused our key, and says so (KeyRefused), not "unavailable"."""
    steps, step = _hello_not_sent(time.monotonic)
    assert isinstance(step, Refused)
    with pytest.raises(errors.KeyRefused) as exc:
        steps.send("the server did not accept this client key (ZAP status 400)")
    assert "did not accept this client key" in exc.value.message


def test_a_refusal_the_monitor_tells_a_moment_after_the_failed_hello_is_still_key_refused():
    now = [100.0]
    steps, step = _hello_not_sent(lambda: now[0])
    assert isinstance(step, Refused)
    step = steps.send(None)                     # not told yet
    assert isinstance(step, Pause)
    now[0] += step.seconds
    assert isinstance(steps.send(None), Refused)
    with pytest.raises(errors.KeyRefused, match="did not accept this client key"):
        steps.send("the server did not accept this client key (ZAP status 400)")


def test_a_hello_that_cannot_be_sent_to_a_server_that_refused_nothing_goes_again_on_a_new_link():
    """No refusal told within the grace: the link is closed, opened again and the HELLO said again,
    until the connect timeout (5 s here); then RelayUnavailable."""
    now = [100.0]
    steps, step = _hello_not_sent(lambda: now[0])
    seen: list[type] = []
    with pytest.raises(errors.RelayUnavailable, match="takes no messages"):
        while True:
            seen.append(type(step))
            if isinstance(step, Pause):
                now[0] += step.seconds
                step = steps.send(None)
            elif isinstance(step, Hello):
                step = steps.throw(errors.RelayUnavailable("cannot send to relay: the connection takes no messages"))
            else:
                step = steps.send(None)
    assert seen.count(Hello) >= 3 and seen.count(Open) == seen.count(Release) == seen.count(Hello)
    assert [k for k in seen if k in (Release, Open, Hello)][:3] == [Release, Open, Hello]
    assert now[0] >= 105.0      # it gave up at the connect timeout, not before

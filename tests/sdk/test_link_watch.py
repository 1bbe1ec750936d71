"""arm_side.channel.Watch, without sockets: what a link's monitor events mean (issue 40, point 6).

Over tcp a server closes connections still in their handshake when many open at once
(PROTOCOL.md §3.4); nothing the client sent went on them and ZeroMQ connects again. Before, the
SDK took such a close for the server's exit (direct mode: "its connection closed: declared
dead") and five of them for a wrong server key.
"""
from __future__ import annotations

import struct

import zmq

from arm_side import channel
from arm_side.channel import Watch


def _event(event: int, value: int = 0) -> list:
    return [struct.pack("=hi", event, value), b"tcp://127.0.0.1:5555"]


def test_a_tcp_connection_closed_in_its_handshake_is_no_server_gone():
    watch = Watch(True, "tcp://127.0.0.1:5555")
    watch.heard(_event(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL))
    watch.heard(_event(zmq.EVENT_DISCONNECTED))
    assert not watch.take_gone()
    watch.heard(_event(zmq.EVENT_HANDSHAKE_SUCCEEDED))
    watch.heard(_event(zmq.EVENT_DISCONNECTED))     # after its handshake: the server closed it
    assert watch.take_gone()
    assert not watch.take_gone()                    # told once
    watch.heard(_event(zmq.EVENT_DISCONNECTED))     # the next one closed before its handshake
    assert not watch.take_gone()


def test_an_ipc_connection_that_closes_is_its_server_gone():
    watch = Watch(True, "ipc:///tmp/x/relay.sock")
    watch.heard(_event(zmq.EVENT_DISCONNECTED))
    assert watch.take_gone()


def test_failed_handshakes_are_a_refusal_only_when_none_succeeds_for_a_while(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(channel.time, "monotonic", lambda: now[0])
    watch = Watch(True, "tcp://127.0.0.1:5555")
    for _ in range(channel.HANDSHAKE_FAILURES * 3):     # a burst of closed handshakes, in moments
        watch.heard(_event(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL))
        now[0] += 0.05
    assert watch.refusal is None
    watch.heard(_event(zmq.EVENT_HANDSHAKE_SUCCEEDED))
    for _ in range(channel.HANDSHAKE_FAILURES):         # a wrong server key: every handshake fails
        watch.heard(_event(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL))
        now[0] += channel.HANDSHAKE_FAILING_S / 2
    assert watch.refusal is not None and "VDSP_SERVER_KEY" in watch.refusal

"""The SDK's per-task shortcuts (#23) give what the long way gives: remembered task options are
the ones TaskOptions.of builds and refuses what it refuses, a TASK's frames are wire.encode's,
the Socs of a process share one ZeroMQ context and the last to close ends it, and a channel's
drain (EVENTS before each read) takes every message waiting and no more, and its send says when
a message waits that a reader asleep on its fd would miss."""
from __future__ import annotations

import select
import time

import pytest
import zmq

from arm_side import CORE_0, CORE_1, TaskOptions, errors
from arm_side.channel import Channel
from arm_side.session import Session
from arm_side.task import task_options
from arm_side.transport import ZmqTransport
from protocol import wire
from protocol.constants import Core


def test_remembered_options_are_what_task_options_of_builds():
    for loose in ({"core": CORE_0}, {"core": CORE_1, "priority": 7}, {"custom_id": -3, "timeout_ms": 250.5}, {}):
        for _ in range(2):      # built, then remembered
            assert task_options(None, loose) == TaskOptions.of(None, **loose)
            assert task_options(None, loose, 10000) == TaskOptions.of(
                None, **{**loose, "timeout_ms": loose.get("timeout_ms", 10000)})
    base = TaskOptions(core=CORE_1, priority=9)
    assert task_options(base, {}) is base
    assert task_options(base, {"priority": 3}) == TaskOptions(core=CORE_1, priority=3)


def test_remembered_options_still_refuse_what_task_options_of_refuses():
    assert task_options(None, {"core": 1}).core == 1           # remembered for core=1 ...
    with pytest.raises(errors.InvalidCore):
        task_options(None, {"core": True})                     # ... yet True (== 1) is refused
    assert task_options(None, {"priority": 2}).priority == 2
    with pytest.raises(errors.InvalidArgument, match="priority"):
        task_options(None, {"priority": 2.0})                  # == 2, hashes alike, still refused
    with pytest.raises(errors.InvalidCore):
        task_options(None, {"core": [1]})                      # unhashable: refused, not a TypeError
    with pytest.raises(errors.InvalidArgument, match="unknown task option"):
        task_options(None, {"prio": 1})
    with pytest.raises(errors.InvalidArgument, match="options must be a TaskOptions"):
        task_options({"core": 1}, {})                          # type: ignore[arg-type]


def test_task_frames_are_the_encoded_task_message():
    a, b = Session("relay", 0x1234), Session("relay", 0x1234)
    opts = TaskOptions(core=Core.CORE_1, priority=200, custom_id=-5)
    for inputs, outputs, params, raw in (([], [], {}, None), ([[4096, 64, 0]], [[8192, 64, 1]], {"k": 1.5}, None),
                                         ([], [], {"n": [1, 2]}, [b"raw bytes"])):
        msg = a.task(0x0813, inputs, outputs, params, opts, raw=raw)
        msg_id, frames = b.task_frames(0x0813, inputs, outputs, params, opts, raw=raw)
        assert msg_id == msg.msg_id
        assert frames == wire.encode(msg)
    for bad in (-1, 0xFFFF, "1", 1.0):
        with pytest.raises(errors.InvalidArgument, match="operator id"):
            b.task_frames(bad, [], [], {}, opts)


def test_transports_of_a_process_share_one_context_until_the_last_closes(tmp_path):
    first, second = ZmqTransport("relay", tmp_path), ZmqTransport("relay", tmp_path)
    assert first.ctx is second.ctx
    ctx = first.ctx
    first.close()
    first.close()                       # twice: still one release
    assert not ctx.closed
    sock = second.ctx.socket(zmq.PAIR)  # the other still works
    sock.close(0)
    second.close()
    assert ctx.closed
    third = ZmqTransport("relay", tmp_path)
    assert third.ctx is not ctx and not third.ctx.closed
    third.close()


def test_a_channel_drains_every_waiting_message_and_wakes_for_the_next(short_dir):
    ctx = zmq.Context()
    server = ctx.socket(zmq.ROUTER)
    endpoint = f"ipc://{short_dir}/s"
    server.bind(endpoint)
    channel = Channel(ctx, endpoint, "test")
    try:
        assert channel.send([b"hello"]) is False        # no reader sleeps on it: nothing to say
        ident, _ = server.recv_multipart()
        for i in range(5):
            server.send_multipart([ident, b"h", str(i).encode()])
        got: list = []
        deadline = time.monotonic() + 10
        while len(got) < 5 and time.monotonic() < deadline:
            got += channel.drain()
        assert got == [[b"h", str(i).encode()] for i in range(5)]
        assert channel.drain() == []
        # nothing waits now: a sleep on the edge-triggered FD wakes for the next message
        server.send_multipart([ident, b"h", b"late"])
        deadline = time.monotonic() + 10
        late: list = []
        while not late and time.monotonic() < deadline:
            select.select([channel.fd], [], [], 1.0)
            late = channel.drain()
        assert late == [[b"h", b"late"]]
        # a reader sleeps on the fd (watched) and a message waits: a send (which may take in the
        # fd's edge) says so, for the sender to wake the reader
        server.send_multipart([ident, b"h", b"unread"])
        deadline = time.monotonic() + 10
        channel.watched = True
        while not channel.send([b"ping"]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert channel.drain() == [[b"h", b"unread"]]
        assert channel.send([b"ping"]) is False         # nothing waits now
    finally:
        channel.close()
        server.close(0)
        ctx.term()

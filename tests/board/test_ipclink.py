"""Client ipc links connect once, through their checked directory (issue 40, point 2;
``vdsp_board.sockets.ipclink``): libzmq's own reconnects sent a live client's queued TASK to another
user's socket made at the old path. The live attack: tests/integration/test_live_squat.py."""
from __future__ import annotations

import asyncio
import os
import time

import pytest
import zmq
import zmq.asyncio

from arm_side import errors
from arm_side.channel import AsyncChannel, Channel
from arm_side.session import Session
from arm_side.steps import Dead, Hello, Open, Pause, Refused, Release, Wait
from relay_server.server import RelayServer
from vdsp_board.sockets import ipclink
from tests.conftest import wait_until


def test_every_ipc_link_socket_has_reconnects_off_and_tcp_keeps_them(short_dir):
    """The SDK's links (blocking and asyncio) and the relay's links to the cores and firmwares."""
    endpoint = f"ipc://{short_dir}/vdsp0.sock"
    ctx, actx = zmq.Context(), zmq.asyncio.Context()
    relay = RelayServer(f"ipc://{short_dir}/relay.sock", {})
    channel = Channel(ctx, endpoint, "vdsp0")
    async_channel = AsyncChannel(actx, endpoint, "vdsp0")
    sock, monitor = relay._dealer(endpoint)
    plain = ctx.socket(zmq.DEALER)
    try:
        for link in (channel.sock, async_channel.sock, sock):
            assert link.getsockopt(zmq.RECONNECT_IVL) == ipclink.ONCE
        assert ipclink.connect(plain, "tcp://127.0.0.1:9") is None       # CURVE authenticates a tcp server
        assert plain.getsockopt(zmq.RECONNECT_IVL) == ipclink.RECONNECT_IVL_MS
    finally:
        plain.close(0)
        relay._close_link(sock, monitor)
        channel.close()
        async_channel.close()
        relay.close()
        ctx.term()


def test_an_ipc_link_whose_server_went_away_is_not_connected_again(short_dir):
    """A new server at the same path (as a squatter would bind) gets nothing of the old link:
    a send finds no pipe, and the link says it is dead, for its owner to make a new one."""
    ctx = zmq.Context()
    endpoint = f"ipc://{short_dir}/relay.sock"
    server = ctx.socket(zmq.ROUTER)
    server.linger = 0
    server.bind(endpoint)
    channel = Channel(ctx, endpoint, "relay", watch=True)
    second = None
    try:
        channel.send([b"first"])
        assert server.recv_multipart()[1] == b"first"
        assert channel.dead() == ""
        server.close(0)
        assert wait_until(lambda: channel.dead() == "ended", 10), "the link never heard its connection close"
        server = ctx.socket(zmq.ROUTER)
        server.linger = 0
        server.bind(endpoint)
        try:        # no pipe (refused), or one libzmq is ending (dropped): never sent to the new server
            channel.send([b"queued for the old server"])
        except errors.RelayUnavailable as exc:
            assert "takes no messages" in exc.message
        second = Channel(ctx, endpoint, "relay")    # what the SDK does: a new link, checked again
        second.send([b"second"])
        identity, body = server.recv_multipart()
        assert body == b"second"
        # libzmq connected the old link again after 50 ms: six times that, and nothing more came
        assert not server.poll(300), f"the new server got {server.recv_multipart()} from the old link"
        assert channel.dead() == "ended" and second.dead() == ""
    finally:
        channel.close()
        if second is not None:
            second.close()
        server.close(0)
        ctx.term()


def test_an_ipc_link_whose_one_attempt_failed_says_so(short_dir):
    ctx = zmq.Context()
    channel = Channel(ctx, f"ipc://{short_dir}/nobody.sock", "relay")
    try:
        assert wait_until(lambda: channel.dead() == "failed", 10)
    finally:
        channel.close()
        ctx.term()


@pytest.mark.parametrize("how", ["open to others", "a symlink", "gone"])
def test_an_ipc_link_refuses_a_directory_that_is_not_ours_and_private(short_dir, how):
    target = short_dir / "d"
    target.mkdir(mode=0o700)
    where = target
    if how == "open to others":
        os.chmod(target, 0o755)
    elif how == "a symlink":
        where = short_dir / "hop"
        where.symlink_to(target)
    else:
        where = short_dir / "gone"
    ctx = zmq.Context()
    try:
        with pytest.raises(errors.CoreOffline) as exc:
            Channel(ctx, f"ipc://{where}/vdsp0.sock", "vdsp0")
        assert str(where) in exc.value.message
    finally:
        ctx.term()


def test_the_async_link_hears_its_failed_attempt(short_dir):
    async def main():
        actx = zmq.asyncio.Context()
        channel = AsyncChannel(actx, f"ipc://{short_dir}/nobody.sock", "relay")
        watch = asyncio.get_running_loop().create_task(channel.watch())
        try:
            for _ in range(1000):
                if channel.dead():
                    return channel.dead()
                await asyncio.sleep(0.01)
        finally:
            channel.close()
            watch.cancel()
            actx.term()
    assert asyncio.run(main()) == "failed"


def test_link_state_follows_the_monitor():
    state = ipclink.LinkState(once=True)
    assert state.dead == ""
    state.heard(zmq.EVENT_CLOSED)
    assert state.dead == "failed"
    state = ipclink.LinkState(once=True)
    state.heard(zmq.EVENT_CONNECTED)
    state.heard(zmq.EVENT_CLOSED)       # a connected link's socket closing is no failed attempt
    assert state.dead == ""
    state.heard(zmq.EVENT_DISCONNECTED)
    assert state.dead == "ended"
    tcp = ipclink.LinkState(once=False)     # libzmq reconnects it
    tcp.heard(zmq.EVENT_CLOSED)
    tcp.heard(zmq.EVENT_DISCONNECTED)
    assert tcp.dead == ""


class _Moving:
    """A discovery whose relay endpoint changes (a SoC started again in a new sockets directory)."""

    mode = "relay"

    def __init__(self) -> None:
        self.where = ["ipc:///first/relay.sock", "ipc:///second/relay.sock"]

    def prepare(self, owner):
        pass

    def servers(self):
        return {"relay": self.where[0]}

    def ready_wait(self, name, endpoint, timeout_s, now):
        class Wait:
            def next_slice(self, now):
                return 0.1
        return Wait()


def test_a_hello_on_a_dead_link_goes_again_on_a_new_link_to_where_the_discovery_says_now():
    """The connect sequence: the relay's link failed to connect (nothing listened); the session
    closes it and opens a new one where the discovery (which checks the directory again) says."""
    discovery = _Moving()
    steps = Session("relay", owner=1).connect(discovery, 5.0, time.monotonic)
    step = next(steps)
    assert isinstance(step, Open) and step.endpoint == "ipc:///first/relay.sock"
    step = steps.send(None)
    assert isinstance(step, Hello)

    class Req:
        msg_id = 1

        def done(self):
            return False
    assert isinstance(steps.send(Req()), Refused)
    assert isinstance(steps.send(None), Wait)
    assert isinstance(steps.send(None), Dead)
    discovery.where.pop(0)
    assert isinstance(steps.send("failed"), Release)
    step = steps.send(None)
    assert isinstance(step, Open) and step.endpoint == "ipc:///second/relay.sock"
    assert isinstance(steps.send(None), Hello)
    steps.close()


def test_a_hello_that_cannot_be_sent_on_a_dead_link_waits_a_slice_before_a_new_link():
    """A server that closes each new connection at once (full): no loop without a pause."""
    discovery = _Moving()
    steps = Session("relay", owner=1).connect(discovery, 5.0, time.monotonic)
    assert isinstance(next(steps), Open)
    assert isinstance(steps.send(None), Hello)
    assert isinstance(steps.throw(errors.RelayUnavailable("cannot send to relay: takes no messages")), Dead)
    step = steps.send("ended")
    assert isinstance(step, Pause) and step.seconds > 0
    assert isinstance(steps.send(None), Release)
    assert isinstance(steps.send(None), Open)
    assert isinstance(steps.send(None), Hello)
    steps.close()

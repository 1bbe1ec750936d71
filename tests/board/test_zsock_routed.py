"""``zsock.recv_routed`` over ipc, the firmware's and the relay's transport: the identity frame's
properties it keeps are the ones a pyzmq Frame of the same connection gives (the peer's address,
which names its pid, and the connection's fd, whose peer credentials the HELLO gate reads), in the
compiled build (``_zio.Meta``) as in pyzmq's."""
from __future__ import annotations

import os
import time

import pytest
import zmq

from vdsp_board.identity import peercred
from vdsp_board.sockets import zsock


@pytest.fixture
def routed(short_dir):
    ctx = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    router.linger = dealer.linger = 0
    router.bind(f"ipc://{short_dir}/r.sock")
    dealer.connect(f"ipc://{short_dir}/r.sock")
    try:
        yield router, dealer
    finally:
        ctx.destroy(linger=0)


def test_the_kept_properties_are_those_of_a_frame_of_the_same_connection(routed):
    router, dealer = routed
    dealer.send_multipart([b"VD", b"first"])
    dealer.send_multipart([b"VD", b"second"])
    deadline = time.monotonic() + 5
    got = None
    while got is None and time.monotonic() < deadline:
        got = zsock.recv_routed(router)
        if got is None:
            router.poll(100)
    assert got is not None
    identity, frames, meta = got
    assert frames == [b"VD", b"first"]
    frame = router.recv(copy=False)             # the second message's identity, as pyzmq gives it
    assert frame.bytes == identity and router.recv_multipart() == [b"VD", b"second"]
    for name in ("Peer-Address", "Socket-Type", zmq.SRCFD, zmq.MORE):
        assert meta.get(name) == frame.get(name), name
    assert peercred.peer_pid(meta.get("Peer-Address")) == os.getpid()      # the dealer's process: this one
    pidfd = peercred.connection_pidfd(meta)                                 # as the HELLO gate asks it
    try:
        assert pidfd is not None and pidfd >= 0
    finally:
        if pidfd is not None:
            os.close(pidfd)
    with pytest.raises(zmq.ZMQError):
        meta.get("No-Such-Property")
    assert zsock.recv_routed(router) is None

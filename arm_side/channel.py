"""One DEALER socket shared by the SDK's threads (:class:`Channel`), or owned by an event loop
(:class:`AsyncChannel`).

ZeroMQ sockets are not thread-safe, so every socket call happens under
``lock``. The socket's FD is edge-triggered: after *any* socket call, pending
input must be drained before anyone sleeps on the FD again, or a message can
sit unnoticed. ``send`` therefore drains too and returns what it found; the
caller dispatches it.
"""
from __future__ import annotations

import threading
from typing import Any

import zmq
import zmq.asyncio

from vdsp_board import curve
from vdsp_board.zsock import NOBLOCK as _NOBLOCK, readable, recv_frames, send_frames


def _dealer(ctx, endpoint: str, server_key: str = ""):
    """A connected DEALER toward ``endpoint`` (blocking or asyncio, as ``ctx`` makes them);
    ``server_key``: the server's own CURVE key on tcp (a firmware's), else the SoC's."""
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.sndhwm = sock.rcvhwm = 100000
    sock.reconnect_ivl = 50
    curve.secure_client(sock, endpoint, server_key=server_key)
    sock.connect(endpoint)
    return sock


class Channel:
    def __init__(self, ctx: zmq.Context, endpoint: str, name: str, server_key: str = "") -> None:
        self.endpoint, self.name = endpoint, name
        self.peer = None  # the client's Peer this channel belongs to (set by the client)
        self.lock = threading.Lock()
        self.sock = sock = _dealer(ctx, endpoint, server_key)
        self.fd = sock.getsockopt(zmq.FD)
        self.closed = False
        # a thread sleeps on ``fd`` (set by the client's reader around its last drain and the
        # sleep): a send may take in the FD's edge for a message that came meanwhile, so then
        # the sender reads what waits; otherwise the next reader's drain before it sleeps will
        self.watched = False

    def send(self, frames: list) -> list[list]:
        """Send a multipart message; returns the messages that were waiting (to dispatch) if a
        thread sleeps on ``fd``, else none (an EVENTS read saved per task: each costs ~1 µs)."""
        with self.lock:
            if self.closed:
                return []
            send_frames(self.sock, frames)
            return self._drain() if self.watched else []

    def drain(self) -> list[list]:
        """Every message waiting now (non-blocking)."""
        with self.lock:
            return [] if self.closed else self._drain()

    def _drain(self) -> list[list]:
        """Read while the socket's EVENTS say a message waits. Asking EVENTS costs a third of a
        failed non-blocking recv (pyzmq builds a zmq.Again exception for each), and it leaves the
        edge-triggered FD armed just the same: after it answers "nothing", a sleep on the FD wakes
        for the next message."""
        sock = self.sock
        if not readable(sock):
            return []
        out = []
        while True:
            try:
                out.append(recv_frames(sock, _NOBLOCK))
            except zmq.Again:       # EVENTS said POLLIN, yet nothing whole to read
                return out
            if not readable(sock):
                return out

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                self.sock.close(0)


class AsyncChannel:
    """One DEALER socket of pyzmq's asyncio flavour (``zmq.asyncio``), used from its event
    loop's thread only: no lock. ``send`` queues a message (at once, short of the high-water
    mark) and returns no replies: one reader coroutine per channel takes them
    (``arm_side.async_client``). ``watch``: a monitor socket tells when the server goes away."""

    def __init__(self, ctx: zmq.asyncio.Context, endpoint: str, name: str, watch: bool = False,
                 server_key: str = "") -> None:
        self.endpoint, self.name = endpoint, name
        self.peer = None
        self.sock = sock = _dealer(ctx, endpoint, server_key)
        self._plain: zmq.Socket = zmq.Socket.shadow(sock.underlying)   # the same socket, drained without futures
        self.monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED) if watch else None
        self.closed = False
        self.gone = False       # the monitor heard the connection close (cleared by ``take_gone``)

    def send(self, frames: list) -> list[list]:
        """Queue a multipart message; raises the socket's ZMQError if it cannot go."""
        if self.closed:
            return []
        fut: Any = self.sock.send_multipart(frames)    # an asyncio Future
        if fut.done():
            fut.result()        # raises what the send raised
        return []

    async def recv(self) -> list[list]:
        """The next message and every one waiting behind it. The wait goes through pyzmq's
        asyncio socket, which looks at the socket's events before it sleeps on the edge-triggered
        FD, so a message left by the drain is never missed."""
        out = [await self.sock.recv_multipart()]
        plain = self._plain
        while len(out) < 256:
            try:
                out.append(plain.recv_multipart(_NOBLOCK))
            except zmq.Again:
                break
        return out

    async def watch(self) -> None:
        """Read the monitor until the channel closes; a disconnect sets ``gone``."""
        from zmq.utils.monitor import parse_monitor_message
        assert self.monitor is not None
        while not self.closed:
            frames = await self.monitor.recv_multipart()
            try:
                if parse_monitor_message(frames)["event"] == zmq.EVENT_DISCONNECTED:
                    self.gone = True
            except (ValueError, KeyError, IndexError):
                pass

    def take_gone(self) -> bool:
        gone, self.gone = self.gone, False
        return gone

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.monitor is not None:
            try:
                self.sock.disable_monitor()
            except zmq.ZMQError:
                pass
            self.monitor.close(0)
        self.sock.close(0)

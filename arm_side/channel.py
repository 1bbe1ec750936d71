"""One DEALER socket shared by the SDK's threads.

ZeroMQ sockets are not thread-safe, so every socket call happens under
``lock``. The socket's FD is edge-triggered: after *any* socket call, pending
input must be drained before anyone sleeps on the FD again, or a message can
sit unnoticed. ``send`` therefore drains too and returns what it found; the
caller dispatches it.
"""
from __future__ import annotations

import threading

import zmq

from vdsp_sim.board import curve
from vdsp_sim.board.zsock import NOBLOCK as _NOBLOCK, recv_frames, send_frames


class Channel:
    def __init__(self, ctx: zmq.Context, endpoint: str, name: str) -> None:
        self.endpoint, self.name = endpoint, name
        self.peer = None  # the client's Peer this channel belongs to (set by the client)
        self.lock = threading.Lock()
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.sndhwm = sock.rcvhwm = 100000
        sock.reconnect_ivl = 50
        curve.secure_client(sock, endpoint)
        sock.connect(endpoint)
        self.sock = sock
        self.fd = sock.getsockopt(zmq.FD)
        self.closed = False

    def send(self, frames: list) -> list[list]:
        """Send a multipart message; returns messages that were waiting (to dispatch)."""
        with self.lock:
            if self.closed:
                return []
            send_frames(self.sock, frames)
            return self._drain()

    def drain(self) -> list[list]:
        """Every message waiting now (non-blocking)."""
        with self.lock:
            return [] if self.closed else self._drain()

    def _drain(self) -> list[list]:
        out = []
        sock = self.sock
        try:
            while True:
                out.append(recv_frames(sock, _NOBLOCK))
        except zmq.Again:
            pass
        return out

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                self.sock.close(0)

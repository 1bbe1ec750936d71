"""Small ZeroMQ helpers shared by every process (hot path: plain int flags, no enum math)."""
from __future__ import annotations

import zmq

EVENTS, POLLIN, NOBLOCK, SNDMORE = int(zmq.EVENTS), int(zmq.POLLIN), int(zmq.NOBLOCK), int(zmq.SNDMORE)


def send_frames(sock: zmq.Socket, frames: list, flags: int = 0) -> None:
    """``send_multipart`` without pyzmq's per-frame flag arithmetic. Raises zmq.Again with NOBLOCK."""
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        sock.send(frame, flags | SNDMORE if i < last else flags)


def readable(sock: zmq.Socket) -> bool:
    return bool(sock.getsockopt(EVENTS) & POLLIN)  # type: ignore[operator]  # an int for EVENTS

"""Small ZeroMQ helpers shared by every process (hot path: plain int flags, no enum math)."""
from __future__ import annotations

from typing import Any

import zmq

EVENTS, POLLIN, NOBLOCK, SNDMORE = int(zmq.EVENTS), int(zmq.POLLIN), int(zmq.NOBLOCK), int(zmq.SNDMORE)
# pyzmq's backend send, under its Python wrapper (which only adds the DRAFT routing_id/group
# arguments we never use): half the CPU of a frame's send on the hot path
_BACKEND: Any = zmq.Socket.__mro__[1] if "backend" in zmq.Socket.__mro__[1].__module__ else zmq.Socket
_send, _recv, _get = _BACKEND.send, _BACKEND.recv, _BACKEND.get


def send_frames(sock: zmq.Socket, frames: list, flags: int = 0) -> None:
    """``send_multipart`` without pyzmq's per-frame flag arithmetic. Raises zmq.Again with NOBLOCK."""
    last = len(frames) - 1
    more = flags | SNDMORE
    for i in range(last):
        _send(sock, frames[i], more)
    _send(sock, frames[last], flags)


def send_routed(sock: zmq.Socket, identity: bytes, frames: list, flags: int = 0) -> None:
    """``send_frames(sock, [identity, *frames], flags)`` without building that list (a ROUTER's reply)."""
    more = flags | SNDMORE
    _send(sock, identity, more)
    last = len(frames) - 1
    for i in range(last):
        _send(sock, frames[i], more)
    _send(sock, frames[last], flags)


def recv_frames(sock: zmq.Socket, flags: int = 0) -> list:
    """``recv_multipart`` (bytes frames) through the backend calls: a frame's ``more`` instead of a
    RCVMORE getsockopt (pyzmq builds an option enum per getsockopt). Raises zmq.Again with NOBLOCK:
    reading until then costs less than asking EVENTS before each message."""
    frame = _recv(sock, flags, False)
    frames = [frame.bytes]
    while frame.more:
        frame = _recv(sock, flags, False)
        frames.append(frame.bytes)
    return frames


def readable(sock: zmq.Socket) -> bool:
    """A message waits (the backend's EVENTS: a plain int, not pyzmq's Event flag built per call)."""
    return bool(_get(sock, EVENTS) & POLLIN)

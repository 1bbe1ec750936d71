"""Small ZeroMQ helpers shared by every process (hot path: plain int flags, no enum math).

With the compiled build (``vdsp_sim.native_build``) the frame calls are ``vdsp_board.sockets._zio``'s
(``vdsp_board/sockets/zio.c``): the same calls to the same libzmq, which keep the GIL when they cannot
wait. pyzmq lets go of it around each one, and where two threads take turns on a socket (the
SDK's callers send, its reader receives) every frame then hands the GIL over and back. Without
the build (``VDSP_NATIVE=0``, no compiler) pyzmq's calls below run.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Sequence

import zmq

_ZIO: ModuleType | None
try:
    from vdsp_board.sockets import _zio as _ZIO     # only the compiled build's finder has it
except ImportError:
    _ZIO = None

EVENTS, POLLIN, NOBLOCK, SNDMORE = int(zmq.EVENTS), int(zmq.POLLIN), int(zmq.NOBLOCK), int(zmq.SNDMORE)
# pyzmq's backend send, under its Python wrapper (which only adds the DRAFT routing_id/group
# arguments we never use): half the CPU of a frame's send on the hot path
_BACKEND: Any = zmq.Socket.__mro__[1] if "backend" in zmq.Socket.__mro__[1].__module__ else zmq.Socket
_send, _recv, _get = _BACKEND.send, _BACKEND.recv, _BACKEND.get


def send_frames(sock: zmq.Socket, frames: Sequence[Any], flags: int = 0) -> None:
    """``send_multipart`` without pyzmq's per-frame flag arithmetic. Raises zmq.Again with NOBLOCK."""
    if _ZIO is not None:
        _ZIO.send_frames(sock, frames, flags)
        return
    last = len(frames) - 1
    more = flags | SNDMORE
    for i in range(last):
        _send(sock, frames[i], more)
    _send(sock, frames[last], flags)


def send_routed(sock: zmq.Socket, identity: bytes, frames: Sequence[Any], flags: int = 0) -> None:
    """``send_frames(sock, [identity, *frames], flags)`` without building that list (a ROUTER's reply)."""
    if _ZIO is not None:
        _ZIO.send_routed(sock, identity, frames, flags)
        return
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
    if _ZIO is not None:
        out: list = _ZIO.recv_frames(sock, flags)
        return out
    frame = _recv(sock, flags, False)
    frames = [frame.bytes]
    while frame.more:
        frame = _recv(sock, flags, False)
        frames.append(frame.bytes)
    return frames


def recv_next(sock: zmq.Socket) -> list | None:
    """The next message without waiting (a list of bytes frames), or None when none waits.
    Receiving until None leaves the socket's edge-triggered FD signalling the next message, as
    reading EVENTS does; the compiled build's costs no exception (pyzmq's: a zmq.Again, about 20
    Python calls, at the end of what has arrived)."""
    if _ZIO is not None:
        return _ZIO.recv_next(sock)
    try:
        return recv_frames(sock, NOBLOCK)
    except zmq.Again:
        return None


def recv_routed(sock: zmq.Socket) -> tuple[bytes, list, Any] | None:
    """A ROUTER's next message without waiting: ``(identity, frames, meta)``, its first frame as
    bytes, the rest as a list of bytes (empty for a lone frame), and ``meta`` what tells who sent it
    (``meta.get(name)`` as a frame received with ``copy=False`` answers: Peer-Address, ZMQ_SRCFD,
    User-Id); None when none waits. Receiving until None leaves the socket's edge-triggered FD
    signalling the next message, as reading EVENTS does. The compiled build's costs no exception and
    no pyzmq Frame (``_zio.Meta`` keeps the first frame's properties); pyzmq's, a zmq.Again at the
    end of what has arrived."""
    if _ZIO is not None:
        return _ZIO.recv_routed(sock)
    try:
        meta = _recv(sock, NOBLOCK, False)
    except zmq.Again:
        return None
    return meta.bytes, recv_frames(sock, NOBLOCK) if meta.more else [], meta


def fastest(name: str) -> Any:
    """``zsock.<name>`` as a C caller that makes it once a message should hold it: the compiled
    build's own ``_zio`` function (the same call, without this module's frame, ~0.12 µs a call),
    else this module's (arm_side/taskpath.c's lanes)."""
    if _ZIO is not None:
        return getattr(_ZIO, name)
    return globals()[name]


def readable(sock: zmq.Socket) -> bool:
    """A message waits (the backend's EVENTS: a plain int, not pyzmq's Event flag built per call)."""
    if _ZIO is not None:
        return bool(_ZIO.readable(sock))
    return bool(_get(sock, EVENTS) & POLLIN)


def drain(sock: zmq.Socket) -> list:
    """Every message waiting now (each a list of bytes frames), without blocking; afterwards the
    socket's edge-triggered FD signals the next message (a sleep on it wakes for it). pyzmq's way
    asks EVENTS before each read (a failed non-blocking recv costs a zmq.Again built per call);
    the compiled build's receives until libzmq says EAGAIN, which costs no exception in C."""
    if _ZIO is not None:
        out: list = _ZIO.drain(sock)
        return out
    got: list = []
    while _get(sock, EVENTS) & POLLIN:
        try:
            got.append(recv_frames(sock, NOBLOCK))
        except zmq.Again:       # EVENTS said POLLIN, yet nothing whole to read
            break
    return got

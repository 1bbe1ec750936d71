"""The other end of one of our unix sockets, asked of the kernel (``sock_diag``, ``unix_diag``).

``NETLINK_SOCK_DIAG`` with a ``unix_diag_req`` that names one socket by its inode (an exact
lookup, not a dump) and asks for ``UDIAG_SHOW_PEER`` answers the inode of the socket at the
other end of the connection: for a socket ZeroMQ accepted, the client's end, which the process
that opened the connection holds in its ``/proc/PID/fd`` (``socket:[INODE]``) until it closes it.

Cost: to find a socket by its inode the kernel walks the unix sockets of the network namespace
(on older kernels the host's whole table, filtered by namespace) under their bucket locks, so
one lookup costs what there are of them, whoever holds them: 28-47 ms (median, two runs) beside
200,000 sockets of another user on Linux 6.18 (``vdsp bench identity --sockets 200000``),
0.02 ms beside a few dozen. Only the ``start-time`` identity proof asks
(``vdsp_board.identity.peerproof``), once per connection that claims something, on a server's HELLO
worker, never on its loop.

Needs ``unix_diag`` (``CONFIG_UNIX_DIAG``; a module on most distributions, loaded by the kernel on
the first request where module loading is allowed).
"""
from __future__ import annotations

import functools
import os
import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLMSG_ERROR = 2
NLM_F_REQUEST = 1
UDIAG_SHOW_PEER = 0x04
UNIX_DIAG_PEER = 2
NO_COOKIE = 0xFFFFFFFF
_NLMSG = struct.Struct("=IHHII")            # nlmsghdr: len, type, flags, seq, pid
_REQ = struct.Struct("=BBHIIIII")           # unix_diag_req: family, protocol, pad, states, ino, show, cookie[2]
_MSG = struct.Struct("=BBBBIII")            # unix_diag_msg: family, type, state, pad, ino, cookie[2]
_RTA = struct.Struct("=HH")                 # rtattr: len, type
REPLY_MAX = 8192                            # bytes of one answer read at most (one socket's: under 100)
TIMEOUT_S = 10.0                            # an answer later than this is taken as none


class Unavailable(OSError):
    """This kernel answers no ``unix_diag`` lookup (``CONFIG_UNIX_DIAG`` missing, or not loadable here)."""


def peer_inode(inode: int, timeout_s: float = TIMEOUT_S) -> int | None:
    """The inode of the socket connected to our unix socket ``inode`` (0: none, its other end is
    closed), or None if no unix socket of this network namespace has that inode. Raises
    Unavailable, or OSError if the kernel refused the request otherwise."""
    nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG)
    try:
        nl.settimeout(timeout_s)
        req = _REQ.pack(socket.AF_UNIX, 0, 0, 0xFFFFFFFF, inode, UDIAG_SHOW_PEER, NO_COOKIE, NO_COOKIE)
        nl.send(_NLMSG.pack(_NLMSG.size + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + req)
        reply = nl.recv(REPLY_MAX)
    finally:
        nl.close()
    return _parse(reply, inode)


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why this kernel answers no ``unix_diag`` lookup (probed once, on a socket pair of ours), or None."""
    a, b = socket.socketpair()
    try:
        if peer_inode(os.fstat(a.fileno()).st_ino) == os.fstat(b.fileno()).st_ino:
            return None
        return "sock_diag answered a unix socket's lookup with another socket"
    except OSError as exc:
        return f"sock_diag cannot look up unix sockets ({exc.strerror or exc}): the kernel lacks unix_diag"
    finally:
        a.close()
        b.close()


def _parse(reply: bytes, inode: int) -> int | None:
    if len(reply) < _NLMSG.size:
        raise OSError(0, "sock_diag: a short answer")
    length, kind = _NLMSG.unpack_from(reply)[:2]
    length = min(length, len(reply))
    if kind == NLMSG_ERROR:
        err = -struct.unpack_from("=i", reply, _NLMSG.size)[0] if length >= _NLMSG.size + 4 else 0
        if err == 2:                    # ENOENT: no such socket (or, before the probe, no unix_diag)
            return None
        raise OSError(err, f"sock_diag refused the lookup: {os.strerror(err)}")
    if kind != SOCK_DIAG_BY_FAMILY or length < _NLMSG.size + _MSG.size:
        raise OSError(0, f"sock_diag: an answer of type {kind}")
    family, _, _, _, found = _MSG.unpack_from(reply, _NLMSG.size)[:5]
    if family != socket.AF_UNIX or found != inode:
        raise OSError(0, f"sock_diag answered for socket {found}, not {inode}")
    at = _NLMSG.size + _MSG.size
    while at + _RTA.size <= length:
        size, attr = _RTA.unpack_from(reply, at)
        if size < _RTA.size:
            break
        if attr == UNIX_DIAG_PEER and size >= _RTA.size + 4:
            return int(struct.unpack_from("=I", reply, at + _RTA.size)[0])
        at += (size + 3) & ~3
    return 0

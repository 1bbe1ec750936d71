"""A client's link to a server's endpoint: how its ZeroMQ socket connects, and what its monitor
says of that connection (sans-I/O: :class:`LinkState`).

libzmq connects a socket again by itself after its connection closed (``ZMQ_RECONNECT_IVL``),
to the same path, and sends there what was queued. Over ipc that path is a name in a directory:
once the SoC is down and its short sockets directory (``vdsp_board.processes.rundir``) removed, another
user can make that name again and bind the socket in it, and would receive what a live client
had queued (issue 40). So every client's ipc link (the SDK's, the relay's to the cores and their
firmwares):

- connects once: ``ZMQ_RECONNECT_IVL`` -1. A link whose attempt failed or whose connection
  closed carries nothing more (a send finds no pipe: ``zmq.Again``); its owner makes a new link,
  which checks again;
- connects through its directory, checked: the directory is opened without following a symlink
  in its place and must be ours with no group or world access (what ``rundir`` checks of the
  runtime dir and the short sockets directory), and the socket connects to
  ``/proc/self/fd/N/<name>``, the entry of that very directory, whatever becomes of the path
  meanwhile. The directory's fd (the returned :class:`LinkDir`) stays open as long as the link.
  Without /proc the path is connected after the check, and the directory found there is
  checked to be the one checked.

An abstract ipc name (``ipc://@name``) has no directory: it connects once, unchecked. Over tcp
libzmq reconnects as before (``RECONNECT_IVL_MS``): CURVE authenticates the server.

Nothing queued can go elsewhere: with ``ZMQ_IMMEDIATE`` 0 (the default) a message sent before
the one connection is made waits on the link's pipe, which leads only to that connection (to
the checked directory); once the connection failed or closed libzmq ends the pipe and connects
no more.
"""
from __future__ import annotations

import os
import stat
import struct

import zmq

from protocol import errors

RECONNECT_IVL_MS = 50     # tcp links: libzmq connects again this often
ONCE = -1                 # ipc links: ZMQ_RECONNECT_IVL that stops libzmq's own reconnects
PROC_FD = "/proc/self/fd"
EVENTS = zmq.EVENT_CONNECTED | zmq.EVENT_CLOSED | zmq.EVENT_DISCONNECTED   # what LinkState hears


def is_ipc(endpoint: str) -> bool:
    return endpoint.startswith("ipc://")


class LinkDir:
    """The open directory a link's ipc connection goes through (close it with the link)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


def connect(sock: zmq.Socket, endpoint: str,
            unavailable: type[errors.VdspError] = errors.RelayUnavailable) -> LinkDir | None:
    """Connect ``sock`` to ``endpoint`` as the module's docstring says: ipc once, through its
    checked directory (the LinkDir to close with ``sock``; None for tcp and abstract names).
    Raises ``unavailable`` when the directory is gone or refused (its message says why)."""
    if not is_ipc(endpoint):
        sock.reconnect_ivl = RECONNECT_IVL_MS
        sock.connect(endpoint)
        return None
    sock.reconnect_ivl = ONCE
    path = endpoint[len("ipc://"):]
    if path.startswith("@"):
        sock.connect(endpoint)
        return None
    directory, name = os.path.split(path)
    pin = LinkDir(_open_checked(directory or ".", endpoint, unavailable))
    try:
        via = f"{PROC_FD}/{pin.fd}"
        if os.path.isdir(via):
            sock.connect(f"ipc://{via}/{name}")
        else:       # no /proc: the path itself, the directory there checked to be the one opened
            sock.connect(endpoint)
            _same(pin.fd, directory or ".", endpoint, unavailable)
    except BaseException:
        pin.close()
        raise
    return pin


def _open_checked(directory: str, endpoint: str, unavailable: type[errors.VdspError]) -> int:
    try:
        fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise unavailable(f"cannot connect to {endpoint}: its directory {directory}: {exc.strerror} "
                          "(a symlink, gone, or not a directory)") from None
    try:
        st = os.fstat(fd)
        problem = (None if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077
                   else f"owned by uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}")
        if problem:
            raise unavailable(f"refusing to connect to {endpoint}: its directory {directory} is {problem}, not a "
                              f"private directory of ours (uid {os.getuid()}, no group or world access)")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _same(fd: int, directory: str, endpoint: str, unavailable: type[errors.VdspError]) -> None:
    st, now = os.fstat(fd), os.stat(directory, follow_symlinks=False)
    if (st.st_dev, st.st_ino) != (now.st_dev, now.st_ino):
        raise unavailable(f"refusing {endpoint}: its directory {directory} was replaced while connecting")


def decode(frames: list) -> int | None:
    """The event of one monitor message (``zmq.EVENT_*``), or None if it is no monitor message."""
    if len(frames) != 2 or len(frames[0]) != 6:
        return None
    return int(struct.unpack("=hi", frames[0])[0]) & 0xFFFF


class LinkState:
    """What a link's monitor (asked for ``EVENTS``) told of its connection. ``once`` (an ipc link:
    :func:`connect` made it so): its one attempt either connects (``up``) or fails (``failed``),
    and a connection that closes (``ended``) is not made again; ``dead`` then, for good. A tcp
    link (libzmq reconnects it) is never dead by this account."""

    def __init__(self, once: bool) -> None:
        self.once = once
        self.up = self.failed = self.ended = False
        # When a send first found no connection on a link that had one (``gone``), else None.
        self.gone_at: float | None = None

    @property
    def gone(self) -> bool:
        """The connection it made is closed (its peer closed it or exited): known from the
        monitor (``ended``) or before it says so, from a send that found no pipe on an ipc link
        that was up (the caller's fact, :attr:`gone_at`). A link that never connected is ``failed``."""
        return self.once and self.up and not self.failed

    def heard(self, event: int | None) -> None:
        if event == zmq.EVENT_CONNECTED:
            self.up = True
        elif event == zmq.EVENT_CLOSED and not self.up:     # the connecting socket closed: no connection
            self.failed = True
        elif event == zmq.EVENT_DISCONNECTED:
            self.ended = True

    @property
    def dead(self) -> str:
        """Why the link will never carry a message again (a new link must be made): ``failed`` (no
        connection was made: nothing sent on it arrived) or ``ended``; '' while it may."""
        if not self.once:
            return ""
        return "failed" if self.failed else "ended" if self.ended else ""

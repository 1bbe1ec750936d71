"""Who is at the other end of an ipc connection, and whether that process holds a given flock.

Only the peer's own state is read, never a host-wide table (``/proc/locks`` lists every lock of
every user: anyone who holds many makes one read of it take seconds):

- **Who connected.** ZeroMQ reads the kernel's credentials of an ipc peer (``SO_PEERCRED``)
  when it accepts the connection and attaches them to every message from it as the property
  ``Peer-Address`` = ``localhost:UID:GID:PID``, and the accepted socket's fd as ``SRCFD``.
  ``SO_PEERPIDFD`` on that socket is a pidfd of the process that called ``connect()``, pinned
  by the kernel at connect time: a pid number can be reused after its process exits, a pidfd
  cannot. So the check reads ``/proc/PID/...`` and then asks the pidfd whether that process
  still lives; if it does, PID was that process throughout the read. A connection whose
  process exited (its socket kept by a child, say) has a dead pidfd and proves nothing, even
  once a new process has its pid.
  The fd is ZeroMQ's: read while the message is handled, it is this connection's unless the
  connection closed and a new one took its number in between; the pidfd's pid must then also
  equal the ``Peer-Address`` pid ZeroMQ took for this very connection at accept, so what is
  left is a new connection on the same fd number from a process with the same reused pid,
  within that moment.
- **Whether it holds the connection.** ``/proc/PID/fd/N`` of a socket links to ``socket:[INODE]``:
  :func:`holds_socket` finds the connection's client end there (its inode from
  ``vdsp_board.identity.sockdiag``), for the ``start-time`` proof (``vdsp_board.identity.peerproof``).
- **Which locks it holds.** ``/proc/PID/fdinfo/FD`` lists the locks held through that open
  file (``lock:\\t1: FLOCK  ADVISORY  WRITE 4242 fe:00:5156 0 EOF``): only the locks of that one
  file, so its cost does not depend on anyone else's locks. The lock counts whoever took it
  (the pid on the line): a process holds what it holds through an fd in its own fd table,
  inherited or not.
"""
from __future__ import annotations

import errno
import os
import signal
import socket
import stat
import struct

SRCFD = 2                   # ZMQ_SRCFD: the fd a message was read from (zmq_msg_get)
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)      # Linux >= 6.5
MAX_FDS_SCANNED = 1024      # fds of a peer looked at when its HELLO does not name the lock's
MAX_FDINFO = 64 << 10       # bytes of one fdinfo file read at most
MAX_FDS_LINKED = 4096       # fds of a peer looked at for a socket (one readlink each: 10-20 us on a busy 2-CPU host)


class PeerGone(OSError):
    """The process that opened the connection has exited: nothing it held proves anything."""


class TooManyFds(OSError):
    """The peer has more fds than are looked at (MAX_FDS_SCANNED, MAX_FDS_LINKED): not scanned further."""


def peer_pid(address: str | None) -> int | None:
    """The pid in an ipc ``Peer-Address`` (``localhost:UID:GID:PID``), or None (tcp, or unknown)."""
    if not address or not address.startswith("localhost:"):
        return None
    parts = address.split(":")
    if len(parts) != 4 or not parts[3].isdigit():
        return None
    pid = int(parts[3])
    return pid if pid > 0 else None


def frame_property(frame: object, name: str | int) -> object:
    """A ZeroMQ message property of a frame received with ``copy=False``, or of what
    ``zsock.recv_routed`` kept of one (None if absent)."""
    get = getattr(frame, "get", None)
    if get is None:
        return None
    try:
        return get(name)
    except Exception:   # zmq.ZMQError (EINVAL): no such property on this transport
        return None


def connection_pidfd(frame: object) -> int | None:
    """A pidfd of the process that connected the unix socket ``frame`` was read from (the caller
    closes it), or None if the frame tells no unix socket. Raises PeerGone if that process has
    exited (the kernel refuses a pidfd of a reaped process, or gives one that is already dead).

    Call it while handling the message, on the thread that received it: the fd belongs to
    ZeroMQ and means this connection only while the connection is open.
    """
    fd = frame_property(frame, SRCFD)
    if not isinstance(fd, int) or fd < 0:
        return None
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return None
    try:
        if sock.family != socket.AF_UNIX:
            return None
        pidfd = sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError as exc:
        if exc.errno in (errno.ESRCH, errno.EINVAL):
            raise PeerGone(exc.errno, "the process that opened this connection has exited") from None
        return None     # ENOPROTOOPT: a kernel without SO_PEERPIDFD
    finally:
        sock.close()
    if not alive(pidfd):
        os.close(pidfd)
        raise PeerGone(errno.ESRCH, "the process that opened this connection has exited")
    return pidfd


def connection_inode(frame: object) -> int | None:
    """The inode of the accepted unix socket ``frame`` was read from (it names this connection
    while the connection is open; ``vdsp_board.identity.peerproof.Accepted`` keys its records by it), or
    None if the frame tells no unix socket. Call it as :func:`connection_pidfd`."""
    fd = frame_property(frame, SRCFD)
    if not isinstance(fd, int) or fd < 0:
        return None
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return None
    try:
        if sock.family != socket.AF_UNIX:
            return None
        return os.fstat(fd).st_ino
    except OSError:
        return None
    finally:
        sock.detach()


def peer_cred(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process that connected the unix socket ``sock`` (``SO_PEERCRED``,
    taken by the kernel at connect; pid 0 if that process is not visible in our pid namespace).
    Raises OSError."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def pidfd_pid(pidfd: int) -> int:
    """The pid of the process behind ``pidfd`` (its ``Pid:`` in our fdinfo; -1 once it exited)."""
    with open(f"/proc/self/fdinfo/{pidfd}", "rb") as fh:
        for line in fh.read(MAX_FDINFO).split(b"\n"):
            if line.startswith(b"Pid:"):
                return int(line.split()[1])
    return -1


def alive(pidfd: int) -> bool:
    """True while the process behind ``pidfd`` has not exited."""
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_identity(path: str) -> tuple[int, int, int] | None:
    """(major, minor, inode) of the lock file ``path`` if it is a regular file of this user.

    Opened without following a symlink or blocking on a FIFO; None otherwise.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        return None
    return os.major(st.st_dev), os.minor(st.st_dev), st.st_ino


def fd_holds_exclusive_flock(pid: int, fd: int, ident: tuple[int, int, int], proc: str = "/proc") -> bool:
    """True if fd ``fd`` of process ``pid`` holds an exclusive flock on the file ``ident``.

    Reads ``/proc/PID/fdinfo/FD`` only. False if there is no such fd. Raises OSError if the
    process cannot be read (gone, or not ours to read).
    """
    try:
        with open(f"{proc}/{pid}/fdinfo/{fd}", "rb") as fh:
            text = fh.read(MAX_FDINFO)
    except FileNotFoundError:
        if not os.path.exists(f"{proc}/{pid}"):
            raise
        return False
    return any(_is_exclusive_flock(line[5:], ident) for line in text.split(b"\n") if line.startswith(b"lock:"))


def holds_exclusive_flock(pid: int, ident: tuple[int, int, int], fd: int | None = None,
                          proc: str = "/proc", limit: int = MAX_FDS_SCANNED) -> bool:
    """True if process ``pid`` holds an exclusive flock on the file ``ident`` through one of its fds.

    With ``fd`` (the fd the peer says holds it) one file is read; without it at most ``limit``
    of its fds are looked at (TooManyFds beyond). Raises OSError if the process cannot be read.
    """
    if fd is not None:
        return fd_holds_exclusive_flock(pid, fd, ident, proc)
    with os.scandir(f"{proc}/{pid}/fdinfo") as entries:
        for n, entry in enumerate(entries):
            if n >= limit:
                raise TooManyFds(errno.EMFILE, f"process {pid} has more than {limit} open fds")
            if entry.name.isdigit() and fd_holds_exclusive_flock(pid, int(entry.name), ident, proc):
                return True
    return False


def holds_socket(pid: int, inode: int, proc: str = "/proc", limit: int = MAX_FDS_LINKED) -> bool:
    """True if process ``pid`` holds the socket ``inode`` through one of its fds (``/proc/PID/fd/N``
    links to ``socket:[INODE]``). At most ``limit`` fds are looked at (TooManyFds beyond). Raises
    OSError if the process cannot be read (gone, or not ours to read)."""
    wanted = f"socket:[{inode}]"
    with os.scandir(f"{proc}/{pid}/fd") as entries:
        for n, entry in enumerate(entries):
            if n >= limit:
                raise TooManyFds(errno.EMFILE, f"process {pid} has more than {limit} open fds")
            try:
                if os.readlink(entry.path) == wanted:
                    return True
            except FileNotFoundError:
                continue                # closed meanwhile
    return False


def _is_exclusive_flock(line: bytes, ident: tuple[int, int, int]) -> bool:
    # "1: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE START END" (a waiter, "->", is never listed here)
    parts = line.split()
    if len(parts) < 6 or parts[1] != b"FLOCK" or parts[3] != b"WRITE":
        return False
    where = parts[5].split(b":")
    try:
        return len(where) == 3 and (int(where[0], 16), int(where[1], 16), int(where[2])) == ident
    except ValueError:
        return False

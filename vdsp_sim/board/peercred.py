"""Who is at the other end of an ipc connection, and which flock locks a process holds.

ZeroMQ reads the kernel's credentials of an ipc peer (``SO_PEERCRED``) when it accepts the
connection and attaches them to every message from it as the property ``Peer-Address``:
``localhost:UID:GID:PID`` (libzmq 4.3 on Linux). The kernel lists every flock(2) lock in
``/proc/locks`` with the pid that took it and the lock file's device and inode::

    1: FLOCK  ADVISORY  WRITE 4242 00:1b:5156 0 EOF
    2: -> FLOCK  ADVISORY  WRITE 4243 00:1b:5156 0 EOF      <- waiting for it, not holding it

so "the process at the other end of this connection holds the exclusive lock of this
file" can be checked without trusting anything the peer says. ``/proc/locks`` is read in
bounded chunks and never more than MAX_PROC_LOCKS bytes.
"""
from __future__ import annotations

import os
import stat

PROC_LOCKS = "/proc/locks"
MAX_PROC_LOCKS = 8 << 20        # bytes of /proc/locks read at most (about 150,000 locks)
_CHUNK = 64 << 10


def peer_pid(address: str | None) -> int | None:
    """The pid in an ipc ``Peer-Address`` (``localhost:UID:GID:PID``), or None (tcp, or unknown)."""
    if not address or not address.startswith("localhost:"):
        return None
    parts = address.split(":")
    if len(parts) != 4 or not parts[3].isdigit():
        return None
    pid = int(parts[3])
    return pid if pid > 0 else None


def frame_property(frame: object, name: str) -> str | None:
    """A ZeroMQ message property of a frame received with ``copy=False`` (None if absent)."""
    get = getattr(frame, "get", None)
    if get is None:
        return None
    try:
        value = get(name)
    except Exception:   # zmq.ZMQError (EINVAL): no such property on this transport
        return None
    return value if isinstance(value, str) else None


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


class ProcLocksTooLarge(OSError):
    """``/proc/locks`` is longer than MAX_PROC_LOCKS: the answer is unknown."""


def holds_exclusive_flock(pid: int, ident: tuple[int, int, int], proc_locks: str = PROC_LOCKS,
                          limit: int = MAX_PROC_LOCKS) -> bool:
    """True if process ``pid`` holds an exclusive flock on the file ``ident`` (major, minor, inode).

    Waiters (``->`` lines) do not count. Raises OSError if ``/proc/locks`` cannot be read,
    ProcLocksTooLarge if the match is not within its first ``limit`` bytes.
    """
    want_pid = str(pid).encode()
    tail, read = b"", 0
    with open(proc_locks, "rb", buffering=0) as fh:
        while True:
            chunk = fh.read(_CHUNK)
            if not chunk:
                return _match_lines(tail.split(b"\n"), want_pid, ident)
            read += len(chunk)
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            if _match_lines(lines, want_pid, ident):
                return True
            if read >= limit:
                raise ProcLocksTooLarge(f"{proc_locks} is longer than {limit} bytes")


def _match_lines(lines: list[bytes], want_pid: bytes, ident: tuple[int, int, int]) -> bool:
    for raw in lines:
        parts = raw.split()
        # "N:" "FLOCK" "ADVISORY" "WRITE" PID "MAJ:MIN:INODE" START END
        if len(parts) < 6 or parts[1] != b"FLOCK" or parts[3] != b"WRITE" or parts[4] != want_pid:
            continue
        where = parts[5].split(b":")
        try:
            if len(where) == 3 and (int(where[0], 16), int(where[1], 16), int(where[2])) == ident:
                return True
        except ValueError:
            continue
    return False

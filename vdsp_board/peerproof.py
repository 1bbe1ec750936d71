"""Which process opened an ipc connection: the proof the running kernel allows, and its pins.

A server binds a connection to a DDR owner only once the process that opened it is shown to
hold that owner's lock (``vdsp_board.ownership``). The pid ZeroMQ reports for a connection
(``Peer-Address``, from ``SO_PEERCRED``) is a number: once that process exits, another one may
get it. So the check pins the process by the strongest fact the kernel offers (:class:`Proof`,
strongest first; PROTOCOL.md §5.2 has the table):

- ``peer-pidfd`` (Linux >= 6.5): ``SO_PEERPIDFD`` on the accepted socket is a pidfd of the
  process that called ``connect()``, pinned by the kernel at that moment. The check reads
  ``/proc/PID`` and then asks the pidfd whether that process still lives.
- ``pidfd`` (Linux >= 5.3): when ZeroMQ accepts a connection, the server's admission thread
  (``vdsp_board.admission``: a ZeroMQ socket monitor, a thread of its own) records the peer's pid
  (``SO_PEERCRED`` of the accepted socket) and that process's start time (``/proc/PID/stat``),
  keyed by the accepted socket's inode (:class:`Accepted`). The check opens a pidfd of the pid
  (``pidfd_open``), finds the recorded start time there (so it is the process that had the pid
  at accept), reads ``/proc/PID``, then asks the pidfd whether it still lives.
- ``start-time`` (every kernel): as ``pidfd``, with the start time read again after the check in
  the pidfd's place.

Two processes that held one pid have different start times: the later one started after the
first exited, so after the connection was accepted (ticks of 10 ms; a pid comes round again
only after the allocator has handed out every other one). What the two weaker proofs leave open
is the moment between ``connect()`` and the accept record: the connecting process would have to
exit and its pid go to another process within it (without privilege over the pid namespace
that needs the allocator to come round within that moment). No host-wide table is read, only
the peer's own ``/proc/PID/stat`` and our own sockets: an exact ``sock_diag`` lookup of the
peer's socket walks every unix socket of the network namespace (47 ms, median, beside 200,000
sockets of another user on Linux 6.18: ``vdsp bench identity --sockets``), so it is not used.

``VDSP_IDENTITY_PROOF`` lowers the proof (tests; vdsp_board/settings.py).
"""
from __future__ import annotations

import collections
import enum
import functools
import os
import socket
import threading

from vdsp_board import peercred, settings

MAX_RECORDS = 4096          # accept records kept (the oldest go first): connections of one listening socket
WAIT_S = 2.0                # how long a check waits for its connection's accept record (written by another thread)


class Proof(enum.Enum):
    """How the process behind an ipc connection is pinned (strongest first)."""

    PEER_PIDFD = "peer-pidfd"
    PIDFD = "pidfd"
    START_TIME = "start-time"

    @property
    def rank(self) -> int:
        return list(Proof).index(self)


class Gone(OSError):
    """The process that opened the connection has exited (its pid may be another process's now)."""


@functools.lru_cache(maxsize=1)
def kernel_proof() -> Proof:
    """The strongest proof the running kernel offers (probed once, on first use)."""
    a, b = socket.socketpair()
    try:
        pidfd = a.getsockopt(socket.SOL_SOCKET, peercred.SO_PEERPIDFD)
        os.close(pidfd)
        return Proof.PEER_PIDFD
    except OSError:
        pass
    finally:
        a.close()
        b.close()
    try:
        os.close(os.pidfd_open(os.getpid()))
        return Proof.PIDFD
    except (OSError, AttributeError):
        return Proof.START_TIME


def host_proof() -> Proof:
    """The proof servers of this process use: the kernel's, lowered by ``VDSP_IDENTITY_PROOF``
    (``start-time``: no pidfd is opened at all, not even to probe the kernel)."""
    wanted = settings.current().identity_proof
    if wanted == Proof.START_TIME.value:
        return Proof.START_TIME
    kernel = kernel_proof()
    if wanted is None:
        return kernel
    limit = Proof(wanted)
    return limit if limit.rank > kernel.rank else kernel


def accept_records() -> "Accepted | None":
    """What a server's Admission and Ownership share: accept records where this host's proof
    needs them (everything but ``peer-pidfd``), else None."""
    return None if host_proof() is Proof.PEER_PIDFD else Accepted()


def kernel_release() -> str:
    """``6.18`` of ``6.18.44-generic``: the running kernel's major.minor."""
    return ".".join(os.uname().release.split("-")[0].split(".")[:2])


def describe(proof: Proof | None = None) -> str:
    """What ``proof`` (this process's by default) is, in words, with the kernel's release, e.g.
    ``SO_PEERPIDFD (Linux 6.18)``; says so when ``VDSP_IDENTITY_PROOF`` lowered it."""
    proof = host_proof() if proof is None else proof
    lowered = settings.current().identity_proof == proof.value and (
        proof is Proof.START_TIME or proof is not kernel_proof())
    text = {Proof.PEER_PIDFD: "SO_PEERPIDFD",
            Proof.PIDFD: "pid and start time at accept, pinned by pidfd_open",
            Proof.START_TIME: "pid and start time at accept, start time read again after the check"}[proof]
    note = f"Linux {kernel_release()}"
    if lowered:
        note += f"; VDSP_IDENTITY_PROOF={proof.value}"
    return f"{text} ({note})"


def start_time(pid: int, proc: str = "/proc") -> int | None:
    """When process ``pid`` started (clock ticks since boot: /proc/PID/stat field 22); None if it
    has exited (no entry, or a zombie)."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as fh:
            fields = fh.read(4096).rpartition(b")")[2].split()
        if fields[0] in (b"Z", b"X", b"x"):
            return None
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


class Pin:
    """Process ``pid`` held still for one check: :meth:`alive` is True while it is the same live
    process that was pinned. Holds a pidfd (``peer-pidfd``, ``pidfd``) or the start time only."""

    __slots__ = ("pid", "start", "pidfd")

    def __init__(self, pid: int, start: int | None = None, pidfd: int | None = None) -> None:
        self.pid, self.start, self.pidfd = pid, start, pidfd

    @classmethod
    def take(cls, pid: int, start: int, proof: Proof) -> "Pin":
        """Pin the process that has ``pid`` now if it started at ``start``. Raises Gone otherwise."""
        pidfd = None
        if proof is not Proof.START_TIME:
            try:
                pidfd = os.pidfd_open(pid)
            except ProcessLookupError:
                raise Gone(3, f"process {pid} has exited") from None
        if start_time(pid) != start:        # read after pidfd_open: the pidfd's process, if equal
            if pidfd is not None:
                os.close(pidfd)
            raise Gone(3, f"process {pid} has exited (another process has its pid)")
        return cls(pid, start, pidfd)

    def alive(self) -> bool:
        """True if the pinned process has not exited (so ``pid`` was it since :meth:`take`)."""
        if self.pidfd is not None:
            return peercred.alive(self.pidfd) and (self.start is None or start_time(self.pid) is not None)
        return self.start is not None and start_time(self.pid) == self.start

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class Record:
    """Who opened one connection, as read when it was accepted: ``pid`` (``SO_PEERCRED``; 0 if
    not visible here), ``uid`` and ``start`` (None if that process had exited already)."""

    __slots__ = ("pid", "uid", "start")

    def __init__(self, pid: int, uid: int, start: int | None) -> None:
        self.pid, self.uid, self.start = pid, uid, start


class Accepted:
    """Accept records of one listening socket's ipc connections, by the accepted socket's inode.

    Written by the socket's admission thread (:meth:`record` at ``ZMQ_EVENT_ACCEPTED``,
    :meth:`forget` when the connection closes), read by whoever checks a HELLO (:meth:`wait`).
    At most ``limit`` records; the oldest go first (their connections must say HELLO again
    on a new connection to be proven)."""

    def __init__(self, limit: int = MAX_RECORDS) -> None:
        self.limit = limit
        self._records: collections.OrderedDict[int, Record] = collections.OrderedDict()
        self._inode_of_fd: dict[int, int] = {}
        self._cond = threading.Condition()

    def record(self, sock: socket.socket) -> None:
        """``sock`` (ZeroMQ's accepted unix socket, not ours to close) was just accepted."""
        try:
            inode = os.fstat(sock.fileno()).st_ino
            pid, uid, _ = peercred.peer_cred(sock)
        except OSError:
            return
        start = start_time(pid) if pid > 0 else None
        with self._cond:
            self._records.pop(inode, None)
            self._records[inode] = Record(pid, uid, start)
            self._inode_of_fd[sock.fileno()] = inode
            while len(self._records) > self.limit:
                self._records.popitem(last=False)
            self._cond.notify_all()

    def forget(self, fd: int) -> None:
        """The connection on ``fd`` closed."""
        with self._cond:
            inode = self._inode_of_fd.pop(fd, None)
            if inode is not None:
                self._records.pop(inode, None)

    def wait(self, inode: int, timeout_s: float = WAIT_S) -> Record | None:
        """The record of the connection whose accepted socket has ``inode``, waiting up to
        ``timeout_s`` for the admission thread to write it; None if none came (closed, forgotten)."""
        with self._cond:
            self._cond.wait_for(lambda: inode in self._records, timeout_s)
            return self._records.get(inode)

    def __len__(self) -> int:
        return len(self._records)

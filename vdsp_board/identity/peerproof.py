"""Which process opened an ipc connection: the proof the running kernel allows, and its pins.

A server binds a connection to a DDR owner only once the process that opened it is shown to
hold that owner's lock (``vdsp_board.identity.ownership``). The pid ZeroMQ reports for a connection
(``Peer-Address``, from ``SO_PEERCRED``) is a number: once that process exits, another one may
get it, even within the same clock tick (10 ms, the unit of ``/proc/PID/stat``'s start time), so
a pid and a start time do not name one process either (issue 40: a child of a victim forked in
the tick of the connecting process's start took its pid and its start time). So the check pins
the process by the strongest fact the kernel offers (:class:`Proof`, strongest first;
PROTOCOL.md §5.2 has the table), each something no later process can share:

- ``peer-pidfd`` (Linux >= 6.5): ``SO_PEERPIDFD`` on the accepted socket is a pidfd of the
  process that called ``connect()``, pinned by the kernel at that moment. The check reads
  ``/proc/PID`` and then asks the pidfd whether that process still lives.
- ``pidfd`` (Linux >= 5.3): when ZeroMQ accepts a connection, the server's admission thread
  (``vdsp_board.identity.admission``: a ZeroMQ socket monitor, a thread of its own) opens a pidfd of the
  peer's pid (``SO_PEERCRED`` of the accepted socket, ``pidfd_open``) and keeps it with the
  connection's record, keyed by the accepted socket's inode (:class:`Accepted`), until the
  connection closes. The check reads ``/proc/PID`` and then asks that pidfd whether its process
  still lives: a dead pidfd proves nothing, whoever has the pid now. What remains open is the
  moment between ``connect()`` and that ``pidfd_open`` (ZeroMQ accepts at once; the admission
  thread follows within a scheduling delay): a connecting process that exits within it, its pid
  going to another process within it, has that process pinned in its place. Without privilege
  over the pid namespace (``ns_last_pid``, ``clone3``'s ``set_tid``) a pid comes round again
  only after the allocator has handed out every other free one.
- ``start-time`` (every kernel): the record at accept holds the peer's pid and that process's
  start time. The check asks the kernel which socket is the client's end of the connection
  (``vdsp_board.identity.sockdiag``: ``UNIX_DIAG_PEER`` of our accepted socket; it never changes while
  the connection lives), waits until the clock tick after the recorded start time's next has
  begun, finds the recorded start time at ``/proc/PID/stat``, finds the client's end among the
  links of ``/proc/PID/fd``, reads, and finds the start time again. A process that takes the pid
  after the wait has a later start time, so every read was of one process, which started in the
  recorded tick and holds the connection; a child of another process that got the pid in that
  tick holds the other process's locks but not the connection. Nothing is left open between
  ``connect()`` and accept: the connection's socket names it, not the moment. What this proves
  is "the process with the connection's pid holds the connection and the owner's lock", not
  "called ``connect()``": a process that received the connection's socket (inherited, or over
  ``SCM_RIGHTS``) and has that pid counts. Its cost is the ``sock_diag`` lookup (the kernel
  walks the namespace's unix sockets: 28-47 ms beside 200,000 of another user's, see
  ``vdsp_board.identity.sockdiag``), made once per connection that claims, on the server's HELLO worker
  (``vdsp_board.identity.hellogate``: off its loop, shared among peers), never on the admission thread
  (whose every accept it would delay), and a wait of at most two ticks (20 ms) for a process
  that claims within 20 ms of its start, which its claim spends resting in its own turn at the
  HELLO gate (:func:`ready_at`), not the worker asleep. Where the kernel has no ``unix_diag`` the claim is
  refused, saying so.

Why not the same ``sock_diag`` check under ``pidfd`` too, which would close its moment: it would
put the lookup's price, which other users set, on every claim on the kernels most hosts run
(Debian 12, Ubuntu 22.04, RHEL 9), to close a moment that a process without privilege over the
pid namespace can use only if the pid allocator comes round within a scheduling delay. The
admission thread does a few system calls per accept under every proof (a ``pidfd_open``, or a
read of ``/proc/PID/stat``), so an accept flood delays no one's record by more than that.

No host-wide table is read for the pidfd proofs; ``start-time`` reads the one ``sock_diag``
lookup above, whose cost, not whose answer, other users can grow.

``VDSP_IDENTITY_PROOF`` lowers the proof (tests; vdsp_board/config/settings.py).
"""
from __future__ import annotations

import collections
import enum
import functools
import os
import socket
import threading
import time

from vdsp_board.config import settings
from vdsp_board.identity import peercred, sockdiag

MAX_RECORDS = 4096          # accept records kept (the oldest go first): connections of one listening socket
WAIT_S = 2.0                # how long a check waits for its connection's accept record (written by another thread)
TICK_NS = 10**9 // os.sysconf("SC_CLK_TCK")     # the unit of /proc/PID/stat's start time (USER_HZ)


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


class NotRecorded(OSError):
    """No accept record of the connection came (it closed first, or its accept was not seen)."""


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
    proof = host_proof()
    return None if proof is Proof.PEER_PIDFD else Accepted(proof)


def kernel_release() -> str:
    """``6.18`` of ``6.18.44-generic``: the running kernel's major.minor."""
    return ".".join(os.uname().release.split("-")[0].split(".")[:2])


def describe(proof: Proof | None = None) -> str:
    """What ``proof`` (this process's by default) is, in words, with the kernel's release, e.g.
    ``SO_PEERPIDFD (Linux 6.18)``; says so when ``VDSP_IDENTITY_PROOF`` lowered it, and when
    ``start-time`` cannot prove anything here (no ``unix_diag``)."""
    proof = host_proof() if proof is None else proof
    lowered = settings.current().identity_proof == proof.value and (
        proof is Proof.START_TIME or proof is not kernel_proof())
    text = {Proof.PEER_PIDFD: "SO_PEERPIDFD",
            Proof.PIDFD: "a pidfd taken at accept by pidfd_open",
            Proof.START_TIME: "pid and start time at accept, and the connection's client end among /proc/PID/fd"}[proof]
    note = f"Linux {kernel_release()}"
    if lowered:
        note += f"; VDSP_IDENTITY_PROOF={proof.value}"
    if proof is Proof.START_TIME and (why := sockdiag.unavailable()) is not None:
        note += f"; every ipc claim is refused: {why}"
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


def wait_past(start: int) -> None:
    """Return once the tick after ``start``'s next has begun (CLOCK_BOOTTIME, what start times
    count; one tick more than needed, against rounding): a process that gets a pid from then on
    has a later start time than ``start``. Raises Gone if that is more than three ticks away
    (``start`` is no start time of this clock)."""
    past = (start + 2) * TICK_NS
    wait = past - time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    if wait > 3 * TICK_NS:
        raise Gone(3, f"start time {start} lies ahead of this clock")
    while wait > 0:
        time.sleep(wait / 1e9)
        wait = past - time.clock_gettime_ns(time.CLOCK_BOOTTIME)


def ready_at(pid: int) -> float:
    """When (``time.monotonic``) :func:`wait_past` of process ``pid``'s start time would return at
    once; now if it has exited. A server defers a young process's claim that long, in that
    process's own turn (``vdsp_board.identity.hellogate``), rather than sleep on the worker meanwhile."""
    start = start_time(pid)
    if start is None:
        return time.monotonic()
    wait = (start + 2) * TICK_NS - time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    return time.monotonic() + min(max(wait, 0), 3 * TICK_NS) / 1e9


class Pin:
    """Process ``pid`` held still for one check: :meth:`alive` is True while it is the same live
    process that was pinned. Holds a pidfd (``peer-pidfd``, ``pidfd``) or the start time only
    (``start-time``: taken after :func:`wait_past` that start, so that no other process can show it)."""

    __slots__ = ("pid", "start", "pidfd")

    def __init__(self, pid: int, start: int | None = None, pidfd: int | None = None) -> None:
        self.pid, self.start, self.pidfd = pid, start, pidfd

    @classmethod
    def take(cls, pid: int, start: int) -> "Pin":
        """Pin the process that has ``pid`` now if it started at ``start``. Raises Gone otherwise."""
        if start_time(pid) != start:
            raise Gone(3, f"process {pid} has exited (another process has its pid)")
        return cls(pid, start)

    def alive(self) -> bool:
        """True if the pinned process has not exited (so ``pid`` was it since it was pinned)."""
        if self.pidfd is not None:
            return peercred.alive(self.pidfd) and (self.start is None or start_time(self.pid) is not None)
        return self.start is not None and start_time(self.pid) == self.start

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class Record:
    """Who opened one connection, as read when it was accepted: ``pid`` (``SO_PEERCRED``; 0 if
    not visible here), ``uid``, and the pin of the proof: ``pidfd`` (``pidfd``: a pidfd of that
    process, owned by :class:`Accepted`) or ``start`` (``start-time``: its start time); None if
    that process had exited already (``why`` says otherwise). ``peer``: the inode of the
    connection's client end, once looked up (``start-time``)."""

    __slots__ = ("pid", "uid", "start", "pidfd", "why", "peer")

    def __init__(self, pid: int, uid: int, start: int | None = None, pidfd: int | None = None,
                 why: str | None = None) -> None:
        self.pid, self.uid, self.start, self.pidfd, self.why = pid, uid, start, pidfd, why
        self.peer: int | None = None

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class Accepted:
    """Accept records of one listening socket's ipc connections under ``proof`` (``pidfd`` or
    ``start-time``), by the accepted socket's inode.

    Written by the socket's admission thread (:meth:`record` at ``ZMQ_EVENT_ACCEPTED``,
    :meth:`forget` when the connection closes), read by whoever checks a HELLO (:meth:`pin`).
    At most ``limit`` records; the oldest go first (their connections must say HELLO again
    on a new connection to be proven). Under ``pidfd`` each record holds a pidfd: one fd per
    open ipc connection (at most ``Admission.max_connections`` of them), closed with it."""

    def __init__(self, proof: Proof = Proof.START_TIME, limit: int = MAX_RECORDS) -> None:
        assert proof is not Proof.PEER_PIDFD, "SO_PEERPIDFD needs no accept records"
        self.proof, self.limit = proof, limit
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
        rec = Record(pid, uid)
        if pid > 0 and self.proof is Proof.PIDFD:
            try:
                rec.pidfd = os.pidfd_open(pid)
            except ProcessLookupError:
                pass
            except OSError as exc:
                rec.why = f"no pidfd of process {pid} could be opened at accept ({exc.strerror or exc})"
        elif pid > 0:
            rec.start = start_time(pid)
        with self._cond:
            old = self._records.pop(inode, None)
            if old is not None:
                old.close()
            self._records[inode] = rec
            self._inode_of_fd[sock.fileno()] = inode
            while len(self._records) > self.limit:
                self._records.popitem(last=False)[1].close()
            self._cond.notify_all()

    def forget(self, fd: int) -> None:
        """The connection on ``fd`` closed."""
        with self._cond:
            inode = self._inode_of_fd.pop(fd, None)
            if inode is not None:
                rec = self._records.pop(inode, None)
                if rec is not None:
                    rec.close()

    def clear(self) -> None:
        """Forget every record (the listening socket is closing)."""
        with self._cond:
            for rec in self._records.values():
                rec.close()
            self._records.clear()
            self._inode_of_fd.clear()

    def wait(self, inode: int, timeout_s: float = WAIT_S) -> Record | None:
        """The record of the connection whose accepted socket has ``inode``, waiting up to
        ``timeout_s`` for the admission thread to write it; None if none came (closed, forgotten).
        Its pidfd stays the record's: :meth:`pin` is how a check uses it."""
        with self._cond:
            self._cond.wait_for(lambda: inode in self._records, timeout_s)
            return self._records.get(inode)

    def pin(self, inode: int, pid: int, timeout_s: float = WAIT_S) -> Pin:
        """Pin the process ``pid`` that opened the connection whose accepted socket has ``inode``
        (the module's docstring: with the pidfd of its record, or after the tick of its recorded
        start time, holding the connection's client end). The caller reads ``/proc/PID``, then
        asks the pin whether it still lives, and closes it. Raises NotRecorded, Gone (that process
        has exited, or the process with its pid now does not hold the connection), or OSError
        (this cannot be decided here: no ``unix_diag``, too many fds to look through)."""
        rec = self.wait(inode, timeout_s)
        if rec is None:
            raise NotRecorded(2, "no record of the connection's accept")
        if rec.pid != pid:
            raise Gone(3, f"the connection was accepted from process {rec.pid}, not {pid}")
        if self.proof is Proof.PIDFD:
            return self._pidfd_pin(inode, rec)
        if rec.start is None:
            raise Gone(3, f"process {pid} had exited when its connection was accepted")
        peer = self._client_end(inode, rec)
        wait_past(rec.start)
        pin = Pin.take(pid, rec.start)
        try:
            if not peercred.holds_socket(pid, peer):
                raise Gone(3, f"process {pid} does not hold the connection's client end (socket {peer})")
        except FileNotFoundError:
            pin.close()
            raise Gone(3, f"process {pid} has exited") from None
        except BaseException:
            pin.close()
            raise
        return pin

    def _pidfd_pin(self, inode: int, rec: Record) -> Pin:
        with self._cond:                # forget() may close the record's pidfd: ours is a duplicate
            if rec.why is not None:
                raise OSError(0, rec.why)
            if rec.pidfd is None or self._records.get(inode) is not rec:
                raise Gone(3, f"process {rec.pid} had exited when its connection was accepted")
            pidfd = os.dup(rec.pidfd)
        if not peercred.alive(pidfd):
            os.close(pidfd)
            raise Gone(3, f"process {rec.pid} has exited")
        return Pin(rec.pid, pidfd=pidfd)

    def _client_end(self, inode: int, rec: Record) -> int:
        """The inode of the connection's client end (looked up once per connection, sockdiag)."""
        if rec.peer is None:
            why = sockdiag.unavailable()
            if why is not None:
                raise OSError(0, why)
            peer = sockdiag.peer_inode(inode)
            if not peer:
                raise Gone(3, "the connection has closed")
            with self._cond:
                rec.peer = peer
        return rec.peer

    def __len__(self) -> int:
        return len(self._records)

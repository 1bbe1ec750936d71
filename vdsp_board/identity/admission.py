"""What peers that have not authenticated can make a server process hold: a bounded amount.

ZeroMQ caps one inbound frame per connection (``ZMQ_MAXMSGSIZE``, checked on the frame's
length before anything is allocated, during the handshake too), but it accepts any number of
connections, and each may hold one frame of up to that size while its handshake is pending:
twelve tcp peers that sent a CURVE greeting and then 60 MiB of a "command" took the relay
from 33 to 770 MB, without ever authenticating.

:class:`Admission` watches one listening socket's connections through a ZeroMQ socket
monitor (``ZMQ_EVENT_ACCEPTED`` and ``DISCONNECTED``, each with the connection's file
descriptor), in a thread of its own so that a long task in the owner's loop does not delay it.
Whether a tcp connection has authenticated is read from the kernel (``TCP_INFO``): a CURVE
server sends its READY only after the ZAP handler said yes, so a connection to which it has
sent more than the greeting and WELCOME has authenticated (libzmq 4.3's handshake events carry
no descriptor). It keeps

- at most ``max_pending`` tcp connections that have not authenticated; beyond that it cuts
  extra ones among those that cannot have authenticated: any older than ``OLD_S`` first (the
  oldest first), then the newest, so that of a burst one handshake goes on while the others'
  clients connect again. A connection that has received more than a handshake
  (``HANDSHAKE_RECV_MAX``) without authenticating is cut at once. Looked at as connections
  are accepted and every ``SWEEP_S`` while any is pending. Cut: its socket is shut down;
  ZeroMQ sees the end of the stream, closes it and frees what it held;
- at most ``max_connections`` connections in all. When all are taken, a new connection of a
  peer (over ipc the process that opened it, as the kernel says: ``SO_PEERCRED``; over tcp the
  address it comes from) that would still hold fewer than the peer holding the most takes the
  place of that peer's newest connection that cannot have authenticated (shut down); any other
  is shut down at once, unless it may itself have authenticated (kept). So one process of the
  SoC's own user holding every place (a HELLO flood on ~1,000 connections) does not keep
  another client out (issue 40);
- handshakes that last at most ``HANDSHAKE_IVL_MS`` (``ZMQ_HANDSHAKE_IVL``; ZeroMQ closes
  slower ones).

**A cut shuts down the connection it was decided for, never another**: the monitor's events are
read late on a busy host, and by then a connection's descriptor number may have been closed and
given to a newer connection (beside a HELLO flood a client's verified connection was shut down
so, in place of a flood connection that had closed). Each connection is known by its socket's
inode, read with its peer when its ACCEPTED event is taken; a cut duplicates the descriptor and
shuts the socket down only if that duplicate is the same socket (held by the duplicate, it cannot
change in between), and the kernel's counters are read only from the same socket.

**A connection whose handshake succeeded is never cut** (its client's messages would be lost
with it: a client sends as soon as it has the READY). Reading the counters and cutting are
not one step, so a connection must not be able to get its READY in between: each look holds
``_VERDICTS``, which the ZAP handler (``vdsp_board.identity.curve.Gate``) takes before each answer
(``zap_verdict``). A connection that has received less than a whole client handshake
(``HANDSHAKE_MIN``) has not been asked about yet, so its READY waits for the look to end; one
that has received a whole handshake may be cut only while no yes is in flight (``_Ledger``).
A connection cut before its handshake succeeded loses nothing: its client's ZeroMQ keeps what
it sent queued and connects again.

ipc peers are the SoC's own user (the runtime directory is private): they are only counted,
and, given ``accepted`` (``vdsp_board.identity.peerproof.Accepted``), who opened each connection is
recorded as it is accepted (a pidfd of its process, or its pid and start time), for the owner
proofs of kernels without ``SO_PEERPIDFD``.

``max_pending`` is derived from ``PREAUTH_BUDGET``: pending connections × the largest frame
one may hold stays within it. So whatever unauthenticated peers send, the growth they cause
in one process is at most ``PREAUTH_BUDGET`` (128 MB) plus ZeroMQ's small per-connection
buffers. See PROTOCOL.md §3.4.
"""
from __future__ import annotations

import collections
import logging
import os
import resource
import socket
import struct
import threading
import time

import zmq

from vdsp_board.identity import peercred
from vdsp_board.observability.log import RateLimited
from vdsp_board.identity.peerproof import Accepted

log = logging.getLogger("vdsp.admission")

PREAUTH_BUDGET = 128 * 1000 * 1000     # bytes unauthenticated peers may make one process hold
PER_CONNECTION_OVERHEAD = 64 << 10     # ZeroMQ's buffers and engine of one connection, rounded up
MAX_PENDING_CAP = 32                   # handshakes in progress at once, at most, whatever the frame size
MAX_CONNECTIONS = 1024                 # connections of one listening socket (authenticated or not)
HANDSHAKE_IVL_MS = 5000                # a handshake not done by then is closed by ZeroMQ
# Handshake events carry no descriptor in libzmq 4.3 (monitor v1), so whether a connection has
# authenticated is read from the kernel (TCP_INFO), not from them.
FD_MARGIN = 64                         # descriptors beyond a listening socket's connections (files, pipes, ZeroMQ's own)
_EVENTS = zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED | zmq.EVENT_CLOSED | zmq.EVENT_MONITOR_STOPPED
_GONE = zmq.EVENT_DISCONNECTED | zmq.EVENT_CLOSED
_TCP_INFO_BYTES_ACKED = 120             # offsets of tcpi_bytes_acked and tcpi_bytes_received (u64) in
_TCP_INFO_BYTES_RECEIVED = 128          # struct tcp_info (Linux >= 4.1),
_TCP_INFO_BYTES_SENT = 200              # and of tcpi_bytes_sent (Linux >= 4.19; before it, the acked bytes)
SWEEP_S = 0.02                          # how often connections still in their handshake are looked at
IDLE_POLL_MS = 1000                     # otherwise: stop() wakes the thread at once (MONITOR_STOPPED); this
#                                         only bounds how late it ends if that event is lost (10 Hz cost ~1 ms/s)
DRAIN_MAX = 4096                        # monitor events taken in one step (then the connections are judged)
# What a CURVE server sends before its READY (which follows the ZAP handler's yes): the ZMTP
# greeting (64 bytes) and WELCOME (170); READY is at least 32 more. A connection to which the
# server has sent this much has authenticated.
AUTH_SENT_MIN = 64 + 170 + 32
# The least a CURVE client sends before the server can ask the ZAP handler about it: the greeting
# (64), HELLO (200 bytes, in a 2-byte frame header) and INITIATE (at least 257 bytes, so in a
# 9-byte header). A connection that has received less cannot be authenticated until the ZAP
# handler's next yes, which waits while an admission cuts connections (``zap_verdict``).
HANDSHAKE_MIN = 64 + 2 + 200 + 9 + 257
HANDSHAKE_RECV_MAX = 64 << 10           # a client's CURVE handshake is under 1 KiB: more is no handshake
OLD_S = 1.0                             # a handshake older than this is cut first (a ZAP answer takes ms)

# Held by an admission from its look at the kernel's counters to its last cut, and by the ZAP
# handler while it counts a yes: a connection the counters show short of a whole handshake cannot
# get its READY in between (see ``_Ledger``).
_VERDICTS = threading.Lock()


class _Ledger:
    """The ZAP handler's yeses of this process whose connection no admission has seen
    authenticated yet ("in flight": its READY may be on its way). Each READY follows one yes, so
    while none is in flight, no connection can authenticate before the ZAP handler's next yes,
    which waits for ``_VERDICTS``. A yes whose connection closed before it was seen is settled
    once every admission has looked, after it, and found no connection that has sent a whole
    handshake without authenticating (where its connection would be). Guarded by ``_VERDICTS``."""

    def __init__(self) -> None:
        self.given = 0
        self.seen = 0
        self.admissions: list[Admission] = []

    def in_flight(self) -> int:
        return self.given - self.seen

    def authenticated(self) -> None:
        self.seen = min(self.given, self.seen + 1)     # a server without a ZAP handler says no yes

    def settle(self) -> None:
        if self.given > self.seen and all(a.looked_at == self.given and a.whole == 0 for a in self.admissions):
            self.seen = self.given


_LEDGER = _Ledger()


def zap_verdict(allowed: bool) -> bool:
    """The process's ZAP handler's answer (``vdsp_board.identity.curve.Gate``), called just before it is
    sent: it waits while an admission cuts connections, and a yes is counted (``_Ledger``)."""
    with _VERDICTS:
        if allowed:
            _LEDGER.given += 1
    return allowed


def max_pending_for(max_frame: int, budget: int = PREAUTH_BUDGET) -> int:
    """Pending handshakes allowed when each may hold a frame of ``max_frame`` bytes."""
    return max(1, min(MAX_PENDING_CAP, budget // (max_frame + PER_CONNECTION_OVERHEAD)))


def limit_frames(sock: zmq.Socket, max_frame: int) -> None:
    """``ZMQ_MAXMSGSIZE`` and ``ZMQ_HANDSHAKE_IVL`` of a server socket (before bind)."""
    sock.maxmsgsize = max_frame
    sock.handshake_ivl = HANDSHAKE_IVL_MS


def room_for(connections: int) -> None:
    """Let this process open ``connections`` descriptors more than it holds now (+ FD_MARGIN): the
    soft RLIMIT_NOFILE raised toward the hard one, which needs no privilege. A normal user's default
    soft limit is 1,024, MAX_CONNECTIONS itself: a listening socket that reached its cap of
    connections then left no descriptor to accept with, and every new connection failed, a
    legitimate client's too (a flood of 1,024 connections shut the relay's door for everyone). Where
    the hard limit is lower than that, the cap is what it is: nothing is raised past the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return
    try:
        held = len(os.listdir("/proc/self/fd"))
    except OSError:
        held = 64
    want = held + connections + FD_MARGIN
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if want > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (OSError, ValueError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, want, exc)


class Admission:
    """Bounds the connections of the listening socket ``sock`` (start before its bind; see the
    module's docstring). ``name`` names the server in log lines. Call :meth:`stop` before
    closing ``sock`` and terminating its context."""

    def __init__(self, sock: zmq.Socket, name: str, *, max_frame: int, max_pending: int | None = None,
                 max_connections: int = MAX_CONNECTIONS, accepted: Accepted | None = None) -> None:
        limit_frames(sock, max_frame)
        room_for(max_connections)
        self.name = name
        self.accepted = accepted
        self.max_pending = max_pending if max_pending is not None else max_pending_for(max_frame)
        self.max_connections = max_connections
        self.conns: dict[int, _Conn] = {}        # fd -> connection, in order of arrival
        self.held: collections.Counter[tuple] = collections.Counter()     # peer -> its connections in conns
        self.evicted = self.refused = self.displaced = 0          # counters, for tests and the log
        self.closes = 0                          # connections closed so far (read by the owner's loop)
        self.looked_at = -1                      # the ledger's yeses at this admission's last full look
        self.whole = 0                           # then: connections with a whole handshake, not authenticated
        self.warn = RateLimited(log)
        self._sock = sock
        self._mon = sock.get_monitor_socket(_EVENTS)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        with _VERDICTS:
            _LEDGER.admissions.append(self)
        self._thread = threading.Thread(target=self._run, name=f"admission-{name}", daemon=True)
        self._thread.start()

    def counts(self) -> tuple[int, int]:
        """(tcp connections not authenticated yet, all connections) now."""
        with self._lock:
            return sum(1 for c in self.conns.values() if c.pending), len(self.conns)

    def stop(self) -> None:
        """End the monitor (before the socket is closed): first disable it (its PAIR socket is
        still open: disabling after closing that blocks), then let the thread close the PAIR."""
        try:
            self._sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self._stop.set()
        self._thread.join(2.0)
        self._leave()
        if self.accepted is not None:
            self.accepted.clear()       # the records' pidfds: the socket's connections close with it

    # --- the monitor thread -------------------------------------------------------------------
    def _run(self) -> None:
        mon = self._mon
        try:
            while not self._stop.is_set():
                pending = any(c.pending for c in self.conns.values())    # only this thread changes conns
                mon.poll(int(SWEEP_S * 1000) if pending else IDLE_POLL_MS)
                with self._lock, _VERDICTS:
                    stopped, drained = self._drain()
                    if stopped:
                        break
                    self._sweep(time.monotonic(), drained)
        except zmq.ZMQError:
            pass
        finally:
            mon.close(0)
            self._leave()

    def _leave(self) -> None:
        """No more looks from this admission: the ledger no longer waits for them."""
        with _VERDICTS:
            if self in _LEDGER.admissions:
                _LEDGER.admissions.remove(self)

    def _drain(self) -> tuple[bool, bool]:
        """Take the monitor's events (up to DRAIN_MAX): (it stopped, none is left)."""
        for _ in range(DRAIN_MAX):
            try:
                frames = self._mon.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return False, True
            if len(frames) != 2 or len(frames[0]) != 6:
                continue
            event, fd = struct.unpack("=hi", frames[0])
            if event == zmq.EVENT_MONITOR_STOPPED:
                return True, False
            self._on_event(event & 0xFFFF, fd, frames[1].decode(errors="replace"))
        return False, False

    def _on_event(self, event: int, fd: int, endpoint: str) -> None:
        if event == zmq.EVENT_ACCEPTED:
            peer, inode = self._peer(fd, endpoint)
            self._drop(fd)        # a descriptor number reused: a new connection
            if (len(self.conns) >= self.max_connections and not self._make_room(peer)
                    and self._may_cut(fd, endpoint, inode)):
                self.refused += 1
                self.warn.warn("full", "%s: %d connections (the limit): refused a new one", self.name,
                               self.max_connections)
                _cut(fd, endpoint, inode)
                return
            self.conns[fd] = _Conn(endpoint, time.monotonic(), peer, inode)
            self.held[peer] += 1
        elif event & _GONE:
            self._drop(fd)
            if self.accepted is not None:
                self.accepted.forget(fd)
            if event & zmq.EVENT_DISCONNECTED:
                self.closes += 1

    def _may_cut(self, fd: int, endpoint: str, inode: int | None) -> bool:
        """May the connection ``fd`` (its socket's ``inode``) be closed now without losing what its
        peer sent after a successful handshake? ipc: the SoC's own user, closed as before. tcp: not
        if it may have authenticated (or may be about to, its yes in flight)."""
        if not endpoint.startswith("tcp://"):
            return True
        sent, received = _tcp_counts(fd, endpoint, inode)
        return sent is not None and self._unauthenticated(sent, received)

    @staticmethod
    def _unauthenticated(sent: int, received: int) -> bool:
        """The counters of a tcp connection, read under ``_VERDICTS``: it has not authenticated,
        and cannot before ``_VERDICTS`` is let go (short of a whole handshake, or no yes in flight)."""
        return sent < AUTH_SENT_MIN and (received < HANDSHAKE_MIN or _LEDGER.in_flight() == 0)

    def _peer(self, fd: int, endpoint: str) -> tuple[tuple, int | None]:
        """Whose connection ``fd``, just accepted, is: the process that opened it (ipc; recorded for
        the owner proofs, ``peerproof.Accepted``), else the address it comes from; and its socket's
        inode, read from the same socket (None: no longer one of ours, nothing to cut)."""
        sock = _ours(fd, endpoint)
        if sock is None:
            return ("fd", fd), None
        try:
            inode = os.fstat(sock.fileno()).st_ino
            if endpoint.startswith("ipc://"):
                if self.accepted is not None:
                    self.accepted.record(sock)
                return ("process", peercred.peer_cred(sock)[0]), inode
            return ("address", sock.getpeername()[0]), inode
        except OSError:
            return ("fd", fd), None
        finally:
            sock.detach()

    def _make_room(self, peer: tuple) -> bool:
        """Every place is taken: if ``peer`` would hold fewer connections than the peer holding
        the most even with this one, that peer's newest connection that may be cut (``_may_cut``)
        is shut down for it (True). One that has closed since (its descriptor maybe another's now:
        ``_cut`` says so) is passed over for the next newest; its DISCONNECTED event follows."""
        most, count = self.held.most_common(1)[0]
        if self.held[peer] + 1 >= count:
            return False
        for fd in reversed(self.conns):       # newest first; the table changes only as the loop returns
            conn = self.conns[fd]
            if conn.peer == most and self._may_cut(fd, conn.endpoint, conn.inode) and _cut(fd, conn.endpoint,
                                                                                           conn.inode):
                self._drop(fd)
                self.displaced += 1
                self.warn.warn("displaced", "%s: %d connections (the limit): closed the newest of the %d of %s for a "
                               "connection of another", self.name, self.max_connections, count, most)
                return True
        return False

    def _drop(self, fd: int) -> _Conn | None:
        conn = self.conns.pop(fd, None)
        if conn is not None:
            self.held[conn.peer] -= 1
            if not self.held[conn.peer]:
                del self.held[conn.peer]
        return conn

    def _sweep(self, now: float, drained: bool) -> None:
        """Judge the tcp connections not authenticated yet from the kernel's counters (under
        ``_VERDICTS``): the server has sent its READY (authenticated), the peer has sent more than
        a handshake (cut: a peer sends nothing more before it has the READY, and what it sends
        after carries the acknowledgement of it), and if more than ``max_pending`` remain, cut
        those that cannot have authenticated: first any older than OLD_S (the oldest first),
        then the newest, so that one handshake of a burst ends while the others wait for their
        client to connect again (their messages wait in its queue: nothing is lost)."""
        pending = []
        for fd, conn in list(self.conns.items()):
            if not conn.pending:
                continue
            sent, received = _tcp_counts(fd, conn.endpoint, conn.inode)
            if sent is None:
                continue            # gone (its number maybe another's now): its DISCONNECTED event follows
            if sent >= AUTH_SENT_MIN:
                conn.pending = False
                _LEDGER.authenticated()
            elif received > HANDSHAKE_RECV_MAX:
                self._evict(fd, "it sent %d bytes without authenticating" % received)
            else:
                pending.append((conn.since, fd, sent, received))
        if drained:
            self.whole = sum(1 for p in pending if p[3] >= HANDSHAKE_MIN)
            self.looked_at = _LEDGER.given
            _LEDGER.settle()
        excess = len(pending) - self.max_pending
        if excess <= 0:
            return
        cuttable = [(since, fd) for since, fd, sent, received in pending if self._unauthenticated(sent, received)]
        old = sorted(c for c in cuttable if now - c[0] >= OLD_S)
        young = sorted((c for c in cuttable if now - c[0] < OLD_S), reverse=True)
        for _, fd in (old + young)[:excess]:
            self._evict(fd, "%d handshakes in progress (the limit)" % self.max_pending)

    def _evict(self, fd: int, why: str) -> None:
        conn = self._drop(fd)
        assert conn is not None
        self.evicted += 1
        self.warn.warn("evict", "%s: closed a tcp connection that had not authenticated: %s", self.name, why)
        _cut(fd, conn.endpoint, conn.inode)


class _Conn:
    __slots__ = ("endpoint", "pending", "since", "peer", "inode")

    def __init__(self, endpoint: str, since: float, peer: tuple, inode: int | None) -> None:
        self.endpoint, self.peer = endpoint, peer
        self.inode = inode                              # its socket's, as its ACCEPTED event was taken
        self.since = since                              # when its ACCEPTED event was taken (monotonic)
        self.pending = endpoint.startswith("tcp://")    # ipc peers are the SoC's own user: nothing to prove


def _ours(fd: int, endpoint: str, inode: int | None = None) -> socket.socket | None:
    """A (detachable) socket object for ``fd`` if it still is a connection accepted on ``endpoint``
    (its local address is the listener's) and, given ``inode``, that connection's socket, else
    None: the number may have been reused meanwhile for another of this process's sockets or
    another connection, which must not be touched."""
    try:
        if inode is not None and os.fstat(fd).st_ino != inode:
            return None
        sock = socket.socket(fileno=fd)
    except OSError:
        return None
    try:
        local = sock.getsockname()
        if endpoint.startswith("tcp://") and sock.family in (socket.AF_INET, socket.AF_INET6):
            if str(local[1]) == endpoint.rsplit(":", 1)[1]:
                return sock
        elif endpoint.startswith("ipc://") and sock.family == socket.AF_UNIX:
            path = endpoint[len("ipc://"):]
            if local == path or (path.startswith("@") and local == b"\0" + path[1:].encode()):   # abstract
                return sock
    except (OSError, IndexError):
        pass
    sock.detach()
    return None


def _tcp_counts(fd: int, endpoint: str, inode: int | None) -> tuple[int | None, int]:
    """(bytes the server sent, bytes received) on the tcp connection ``fd`` whose socket is
    ``inode`` (``TCP_INFO``, one consistent reading; sent: those acknowledged before Linux 4.19);
    (None, 0) if it is gone (its number maybe another connection's now) or unreadable."""
    sock = _ours(fd, endpoint, inode)
    if sock is None:
        return None, 0
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
        if len(info) < _TCP_INFO_BYTES_RECEIVED + 8:
            return None, 0
        sent, received = struct.unpack_from("=QQ", info, _TCP_INFO_BYTES_ACKED)
        if len(info) >= _TCP_INFO_BYTES_SENT + 8:
            sent = struct.unpack_from("=Q", info, _TCP_INFO_BYTES_SENT)[0]
        return int(sent), int(received)
    except OSError:
        return None, 0
    finally:
        sock.detach()


def _cut(fd: int, endpoint: str, inode: int | None) -> bool:
    """Shut down the connection ``fd`` accepted on ``endpoint`` whose socket is ``inode`` (ZeroMQ's,
    not closed here: ZeroMQ sees the end of the stream and closes it itself, freeing what it held).
    The check and the shutdown are on a duplicate of ``fd``, which holds the socket it names:
    ZeroMQ closing ``fd`` and a new connection taking its number in between cannot make it another
    connection's. False (nothing done): ``fd`` is no longer that connection, or no inode is known."""
    if inode is None:
        return False
    try:
        dup = os.dup(fd)
    except OSError:
        return False
    try:
        sock = _ours(dup, endpoint, inode)
        if sock is None:
            return False
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            sock.detach()
        return True
    finally:
        os.close(dup)

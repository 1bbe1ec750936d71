"""Whose turn it is to read the blocking client's links (leader/follower), and the reading itself.

Invariant: at most one thread reads the links at a time, the holder of ``turn``; it feeds the
session what arrives (``Links.dispatch``, under the session's owner lock) and keeps the clock
(``Links.tick``). Which thread that is:

- a thread blocked in ``Request.wait`` that finds the turn free takes it and reads until its own
  request ends: its reply wakes the thread that waits for it, as a raw socket's ``recv`` does, with
  no second thread woken in between;
- a thread that finds the turn taken sleeps on its own eventfd (``arm_side.task``) until its
  request ends or the turn is handed to it (the reader that leaves wakes the first follower);
- while no thread waits, the background thread reads: it sleeps on the links, so a reply nobody
  waits for completes its task and runs its done-callbacks at once, and on the clock's ticks.

The live links' fds are in one epoll set (``on_links``), which the background thread's set
watches only while no waiting thread reads ("armed"): a waiting thread takes the turn from the
sleeping background thread with one epoll_ctl (disarm) and hands it back with one more (arm),
neither of which wakes it. Both are EPOLL_CTL_MOD of an entry made once (events 0: disarmed;
EPOLLIN: armed): adding and removing a nested epoll set each time, as before, cost about 1 µs
more per wait (the kernel allocates, frees and checks the nesting on each). A done-callback runs
in the thread that reads (it holds the turn): it may submit, not wait (ApiUseError: the reply
would never be read).

ZeroMQ's FD is edge-triggered (``arm_side.channel``): a send may take in the signal of a message
that waits. Every live link is ``watched``: such a send says so, and the sender (``missed``) reads
that message itself when no thread holds the turn (one round, as a reader: the background thread,
asleep on the links, is not woken, and a done-callback may run in the sending thread), else kicks
the sleeper (``wake``) on both kick fds (the leader's and the background thread's), whoever sleeps.
Before, every such send kicked: in a pipelined loop (a window of tasks, one submitted as the
oldest ends) that woke the background thread for ~40 % of the tasks, a thread switch and a GIL
hand-over each.

So a link's socket is read by one thread at a time, not by one thread for good: the turn passes
with the waits, which is what keeps a sequential task to one thread woken, as the raw socket's.
"""
from __future__ import annotations

import functools
import logging
import os
import select
import threading
import time
from types import ModuleType
from typing import Any, Callable

from protocol import errors, header, wire
from protocol.constants import HEARTBEAT_INTERVAL_MS, Command
from arm_side.channel import Channel
from arm_side.peer import PeerState
from arm_side.task import BOARD_MODELS, Request, Task, defer_wakes, undefer_wakes, wake_deferred, waker
from vdsp_board.sockets import zsock

_C: ModuleType | None
try:
    from arm_side import _taskpath as _C    # the compiled build's (arm_side/taskpath.c): _lead's loop in C
except ImportError:
    _C = None

log = logging.getLogger("vdsp.sdk")


def bind_compiled(owner: Any, name: str, python: Callable, compiled: Callable, *lane: Any) -> None:
    """``owner.<name>`` becomes ``compiled`` (the compiled build's, arm_side/taskpath.c) with its
    lane, ``(python, *lane)``: ``python`` is that method of ``owner``'s class, bound, which
    ``compiled`` hands every call it does not take itself. help() and inspect.signature() say of
    it what they say of ``python``."""
    call = functools.partial(compiled, (python, *lane))
    call.__doc__ = python.__doc__
    setattr(call, "__wrapped__", python)
    owner.__dict__[name] = call
_TICK_S = HEARTBEAT_INTERVAL_MS / 4000      # between two ticks of the clock


def _eventfd() -> int:
    return os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)


def _take(fd: int) -> None:
    try:
        os.eventfd_read(fd)
    except BlockingIOError:
        pass


class Reading:
    """The reading of ``links`` (``arm_side.links.Links``) by turns; ``closed()``: the client closed."""

    def __init__(self, links: Any, closed: Callable[[], bool]) -> None:
        self.links, self.closed = links, closed
        self.turn = threading.Lock()
        self._kicks = threading.Lock()      # writing a kick fd vs closing it
        self.reader = 0                     # the thread that holds the turn (its ident), 0: none
        self.followers: list = []           # the wakers of the threads waiting for the turn, in order
        self.next_tick = 0.0
        self.kick_lead, self.kick_idle = _eventfd(), _eventfd()
        self.on_links = select.epoll()      # the live links' fds
        self.leading = select.epoll()       # a waiting thread that reads sleeps on the links and its kick
        self._links_fd = self.on_links.fileno()
        self.leading.register(self._links_fd, select.EPOLLIN)
        self.leading.register(self.kick_lead, select.EPOLLIN)
        self.idle = select.epoll()          # the background thread: its kick, the links while armed
        self.idle.register(self.kick_idle, select.EPOLLIN)
        self.idle.register(self._links_fd, 0)     # in the set for good: armed and disarmed by modify
        self.armed = False
        self.shut = False                   # closed: the fds above go with the turn's last holder
        self._version: Any = None
        self._live: list = []               # the links read: open, their peer alive
        self._fds: dict[int, Any] = {}      # fd in on_links -> its link
        self._lane_made: tuple | None = None    # _lane's, for the links of _version

    # --- the links read -------------------------------------------------------------------
    def wake(self) -> None:
        """The thread that sleeps on the links (a leader or the background) must look again: a
        send took in the signal of a message, the links changed, the client closes."""
        with self._kicks:
            for fd in (self.kick_lead, self.kick_idle):
                if fd >= 0:
                    os.eventfd_write(fd, 1)

    def missed(self, link: Any = None) -> None:
        """A send on ``link`` took in the signal of a message that waits (``Channel.send``): read it
        now in this thread if no thread reads (it holds the turn for one round: what completes
        there runs its done-callbacks here), else kick the thread that reads. A send takes in the
        signal of its own socket only, so only ``link`` is read then (None: every link; in direct
        mode a round of all four links cost a drain each, two syscalls apiece, for ~40 % of a
        window's sends)."""
        if not self.turn.acquire(False):
            self.wake()
            return
        if self.shut:
            self.turn.release()
            return
        self._holding(self._safe_round if link is None else lambda: self._safe_one(link))

    def _holding(self, read: Callable[[], None]) -> None:
        """This thread took the turn: ``read()`` as the thread that reads (the wake-ups of the
        threads whose requests complete deferred until it sleeps or leaves), then give it up."""
        self.reader = threading.get_ident()
        defer_wakes()
        try:
            read()
        finally:
            try:
                self._leave()
            finally:
                undefer_wakes()

    def _safe_round(self) -> None:
        try:
            self._round()
        except Exception:   # what a peer sent is not the error of the caller that reads
            log.exception("SDK reader error")

    def _safe_one(self, link: Any) -> None:
        """Dispatch what waits on ``link``, one of the links read (else a whole round: the links
        changed since the last, ``_sync`` makes them again)."""
        try:
            known = self._fds.get(link.fd)
            same = known is link and (self.links.version, PeerState.generation) == self._version
            if not same:
                self._round()
                return
            lane = self._lane() if _C is not None else None
            if lane is not None and _C is not None:
                _C.read(lane, link)     # the same in C (arm_side/taskpath.c)
                return
            incoming = link.drain()
            if incoming:
                self.links.dispatch(link, incoming, time.monotonic())
        except Exception:   # what a peer sent is not the error of the caller that reads
            log.exception("SDK reader error")

    def _reader_error(self, exc: BaseException) -> None:
        """A round's Exception in the compiled loop (``arm_side/taskpath.c``): logged, as the Python
        loop's ``except Exception`` logs it; the reading goes on."""
        log.error("SDK reader error", exc_info=exc)

    def _lane(self) -> tuple | None:
        """What the compiled loop reads the links by (``arm_side/taskpath.c`` names the items), or
        None when no link is read now (every round is then ``_round``'s)."""
        links = self.links
        live = self._live if (links.version, PeerState.generation) == self._version else self._sync()
        made = self._lane_made
        if made is not None and made[11] == self._version:
            return made
        if not live:
            return None
        session = links.session
        self._lane_made = (self.leading.fileno(), self.kick_lead, self._links_fd, self._fds, session.pending,
                           links.owned, session.receive, links.carry_out, header.Header.parse, wire.unpack_body,
                           Command.RESULT, self._version, links, PeerState, _TICK_S,
                           session.peers if session.mode == "direct" else None, live, Task, links.client.tracer,
                           BOARD_MODELS, header.Header, Channel, Channel.drain, zsock.fastest("drain"))
        return self._lane_made

    def forget(self, link: Any) -> None:
        """``link`` closes: out of the epoll set first (its fd number may be a new link's soon)."""
        fd = link.fd
        if self._fds.get(fd) is link:
            del self._fds[fd]
            try:
                self.on_links.unregister(fd)
            except (OSError, ValueError):
                pass

    def _sync(self) -> list:
        """The links to read, their fds in ``on_links``: made again when the links changed (one
        opened or released, a peer died), under the session's owner (the links' table)."""
        links = self.links
        version = (links.version, PeerState.generation)    # a link closes only as it is released (version)
        if version == self._version:
            return self._live
        with links.owned:
            live = [link for link in links.by_key.values() if not link.closed and link.peer.alive]
            want = {link.fd: link for link in live}
            for fd, link in list(self._fds.items()):
                if want.get(fd) is not link:
                    self.forget(link)
            for fd, link in want.items():
                if fd not in self._fds:
                    self.on_links.register(fd, select.EPOLLIN)
                    self._fds[fd] = link
                link.watched = True     # a send that takes in a message's signal says so
            self._version, self._live = version, live
        return live

    def _round(self, woken: bool = False) -> None:
        """Dispatch what waits on the links; tick the clock when due. The drain ends when a socket's
        EVENTS say nothing waits, which re-arms its edge-triggered fd. ``woken``: the thread woke
        for the links' fds and was not kicked: of several links, only those whose fds fire are
        drained (a quiet fd's link has nothing new: its last drain emptied it, and a send that
        took in the signal of a message since kicked); after the links changed, all are."""
        links = self.links
        dispatch = links.dispatch
        same = (links.version, PeerState.generation) == self._version      # _sync's own test, without its call
        if _C is not None:
            lane = self._lane()
            if lane is not None:    # the same round in C (arm_side/taskpath.c)
                _C.round(self, lane, woken and same)
                return
        now = time.monotonic()      # when what is drained now was heard, and the clock's time
        live = self._live if same else self._sync()
        if woken and same and len(live) > 1:       # direct mode: a core's control link and firmware link each
            fds, live = self._fds, []
            for fd, _ in self.on_links.poll(0):
                link = fds.get(fd)
                if link is not None:
                    live.append(link)
        for link in live:
            incoming = link.drain()
            if incoming:
                dispatch(link, incoming, now)
        if now >= self.next_tick:
            self.links.tick(now)
            self.next_tick = now + _TICK_S

    def _arm(self, on: bool) -> None:
        if on != self.armed:
            self.idle.modify(self._links_fd, select.EPOLLIN if on else 0)
            self.armed = on

    def _leave(self, deferred: list | None = None) -> None:
        """Give the turn up: the background thread sleeps on the links again, the waiters of what
        completed wake (``deferred``: this thread's list of them, if the caller has it at hand),
        and the first follower is told the turn is free."""
        if self.shut:
            self._close_fds()
        elif not self.armed:            # _arm(True), without its call
            self.idle.modify(self._links_fd, select.EPOLLIN)
            self.armed = True
        self.reader = 0
        self.turn.release()
        if deferred is None:
            wake_deferred()
        else:
            while deferred:             # wake_deferred()
                deferred.pop().wake()
        followers = self.followers
        if followers:
            followers[0].wake()

    # --- a waiting thread -----------------------------------------------------------------
    def mine(self) -> bool:
        """This thread reads (a done-callback runs in it)."""
        return self.reader == threading.get_ident()

    def wait(self, req: Request, timeout_s: float | None, me: int = 0, deadline: float | None = None) -> None:
        """Block until ``req`` ends, reading the links while no other thread does. Raises
        TaskTimeout (the request stays in flight), ApiUseError once the client is closed. ``me``:
        this thread's ident, if the caller has it at hand; ``deadline``: when ``timeout_s`` ends
        (``time.monotonic()``), if the caller already began it (the compiled ``Client.wait_for``,
        after its own lead)."""
        if deadline is None and timeout_s is not None:
            deadline = time.monotonic() + timeout_s
        sleeper = None
        try:
            # the usual case first: the turn is free, and this thread reads until req ends (_lead
            # looks at closed() and the deadline itself; the loop below, after it, raises)
            if self.turn.acquire(False):
                if self.shut:
                    self.turn.release()
                    raise errors.ApiUseError("the SoC connection was closed while waiting")
                self._lead(req, deadline, me)
            while not req._done:
                if self.closed():
                    raise errors.ApiUseError("the SoC connection was closed while waiting")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise errors.TaskTimeout(f"request {req.msg_id} not done after {(timeout_s or 0) * 1000:.0f} "
                                             "ms; it is still in flight, wait again to collect it")
                if self.turn.acquire(False):
                    if self.shut:
                        self.turn.release()
                        raise errors.ApiUseError("the SoC connection was closed while waiting")
                    self._lead(req, deadline, me)
                elif sleeper is None:       # a follower: woken when req ends, or the turn is free
                    with req._cb_lock:
                        if req._done:
                            return
                        sleeper = waker()
                        req._callbacks.append(sleeper)
                    self.followers.append(sleeper)      # then the turn is tried again: it may be free now
                else:
                    sleeper.sleep(remaining)
        finally:
            if sleeper is not None:
                self.followers.remove(sleeper)
                if not req._done:
                    with req._cb_lock:
                        if sleeper in req._callbacks:
                            req._callbacks.remove(sleeper)

    def _lead(self, req: Request, deadline: float | None, me: int = 0) -> None:
        """Holding the turn: read until ``req`` ends, ``deadline`` passes or the client closes, as
        :meth:`_holding` reads (written out here: this is every sequential task's path). It sleeps
        first: a message waiting now has its fd's signal pending (nobody read the socket since it
        came), or a send took that signal in and kicked (``wake``), or it was opened and kicked:
        no drain is needed before the first sleep."""
        self.reader = me or threading.get_ident()
        deferred = defer_wakes()
        try:
            if self.armed:                      # _arm(False), without its call
                self.idle.modify(self._links_fd, 0)
                self.armed = False
            lane = self._lane() if _C is not None else None
            if lane is not None and _C is not None:
                _C.lead(self, req, deadline, lane, deferred, self.closed)
                return
            leading, kick, closed, monotonic = self.leading, self.kick_lead, self.closed, time.monotonic
            links = self.links
            while not (req._done or closed()):
                now = monotonic()
                timeout = self.next_tick - now
                if deadline is not None:
                    if deadline <= now:
                        return
                    if deadline - now < timeout:
                        timeout = deadline - now
                while deferred:                 # wake_deferred()
                    deferred.pop().wake()
                woken = False
                for fd, _ in leading.poll(timeout if timeout > 0.0 else 0.0):
                    if fd == kick:
                        _take(kick)
                        woken = False
                        break
                    woken = True
                try:
                    live = self._live
                    if woken and len(live) == 1 and (links.version, PeerState.generation) == self._version:
                        # one link (relay mode), woken by its fd: _round(True) and Links.dispatch
                        # written out, as what they do for it
                        link = live[0]
                        incoming = link.drain()
                        now = monotonic()
                        if incoming:
                            peer, receive = link.peer, links.session.receive
                            with links.owned:
                                for frames in incoming:
                                    actions = receive(peer, frames, now)
                                    if actions:
                                        links.carry_out(actions)
                        if now >= self.next_tick:
                            links.tick(now)
                            self.next_tick = now + _TICK_S
                    else:
                        self._round(woken)
                except Exception:   # what a peer sent is not the error of the caller that reads
                    log.exception("SDK reader error")
        finally:
            try:
                self._leave(deferred)
            finally:
                undefer_wakes()

    # --- the background thread ------------------------------------------------------------
    def background(self) -> None:
        """The background thread: reads while no waiting thread does, until the client closes."""
        defer_wakes()
        idle, kick = self.idle, self.kick_idle
        while not self.closed():
            try:
                if self.turn.acquire(timeout=max(0.001, self.next_tick - time.monotonic())):
                    if self.shut:
                        self.turn.release()
                        return
                    self.reader = threading.get_ident()
                    try:
                        self._round()
                    finally:
                        self._leave()
                if self.closed():
                    return
                for fd, _ in idle.poll(max(0.0, self.next_tick - time.monotonic())):
                    if fd == kick:
                        _take(kick)
            except Exception:  # the reader must survive anything a peer sends
                if not self.closed():
                    log.exception("SDK reader error")
                    time.sleep(0.05)
                wake_deferred()

    def close(self) -> None:
        """The client closed: the epoll sets and kick fds close now, or (closed from a
        done-callback, which holds the turn) when the turn is given up."""
        self.shut = True
        if self.mine():
            return
        if self.turn.acquire(timeout=2):
            try:
                self._close_fds()
            finally:
                self.turn.release()

    def _close_fds(self) -> None:
        if self.kick_lead < 0:
            return
        for ep in (self.idle, self.leading, self.on_links):
            ep.close()
        with self._kicks:
            fds, self.kick_lead, self.kick_idle = (self.kick_lead, self.kick_idle), -1, -1
        for fd in fds:
            os.close(fd)

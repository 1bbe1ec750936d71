"""The SDK's blocking driver: a :class:`~arm_side.session.Session` (the conversation) over a
transport's links (``arm_side.links``), with one reader thread.

Threads: the caller's threads send directly (each link's socket under its lock). One thread,
the reader, receives: it sleeps on every link's fd, feeds the session what arrives (which
completes the requests keyed by msg_id: their done-callbacks run there, at once, whoever waits or
not), keeps the clock (heartbeats, liveness) and carries out the session's actions. A thread
blocked in ``Request.wait`` sleeps on an eventfd of its own, which the reader writes when it
completes the request (``arm_side.task``): last thing before it sleeps again, so that the woken
thread finds the GIL free (a hand-off costs one wake-up, not two). A send that takes in the edge
of a message the reader sleeps past wakes the reader (``arm_side.channel``).
"""
from __future__ import annotations

import logging
import os
import select
import threading
import time
from typing import Any, assert_never

from protocol import errors, messages, wire
from protocol.constants import HEARTBEAT_INTERVAL_MS
from protocol.task_options import DEFAULT, TaskOptions
from arm_side import tracing
from arm_side.links import Links, resume
from arm_side.session import PeerState, Session
from arm_side.steps import Pause, Steps, Wait
from arm_side.task import Request, Task, defer_wakes, wake_deferred

log = logging.getLogger("vdsp.sdk")


class Client:
    """Connection to a SoC through ``transport``'s links, to the servers its ``discovery`` names
    (default: the transport's; ``arm_side.discovery``); ``owner`` is the DDR owner our HELLOs claim
    (``lock_fd``: our fd holding its lock, named in them); ``own_transport``: closing the client
    closes the transport too. ``busy_poll_us`` is accepted and has no effect: one thread reads
    the replies, and a thread spinning beside it would hold the GIL the woken waiter needs."""

    def __init__(self, transport: Any, *, owner: int, connect_timeout_s: float = 20.0, busy_poll_us: int = 0,
                 own_transport: bool = True, lock_fd: int | None = None, discovery: Any = None) -> None:
        self.transport, self.own_transport = transport, own_transport
        self.discovery = discovery if discovery is not None else transport.discovery
        self.session = Session(self.discovery.mode, owner, lock_fd)
        self.mode, self.ids, self.pending = self.session.mode, self.session.ids, self.session.pending
        self.core_states, self.event_callbacks = self.session.core_states, self.session.event_callbacks
        self.closed = False
        self.memory: Any = None  # set by Soc: the MemoryManager for strict-mode hooks
        self.tracer = tracing.sdk_tracer()      # SoC trace stamps (no-ops unless tracing is on)
        self.connect_timeout_s = connect_timeout_s
        self._kick = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)     # wakes the reader
        self._kick_lock = threading.Lock()      # closing the kick fd vs writing it
        self._reconnecting = threading.Lock()
        self.links = Links(self, self.session, transport, self.discovery, self._open_link, self._release_link,
                           self._relay_link, self._wake_reader)
        self.reader = threading.Thread(target=self._read, name="vdsp-sdk-reader", daemon=True)
        self.reader.start()
        try:
            self._run(self.session.connect(self.discovery, connect_timeout_s, time.monotonic))
        except BaseException:
            self.close()
            raise

    @property
    def peers(self) -> list[PeerState]:
        return self.session.peers

    @property
    def owner(self) -> int:
        """The DDR owner our HELLOs and TASK bodies name (the session's)."""
        return self.session.owner

    @owner.setter
    def owner(self, owner: int) -> None:
        self.session.owner = owner

    # --- connecting -----------------------------------------------------------------------
    def _run(self, steps: Steps) -> None:
        """Carry out a connect sequence of the session (``Session.connect``), blocking: the
        shared runner (``Links.run``) does every step but the waits, done here."""
        runner = self.links.run(steps)
        step = resume(runner)
        while step is not None:
            failed: BaseException | None = None
            try:
                match step:
                    case Wait(request, seconds):
                        try:
                            self.wait_for(request, seconds)
                        except errors.TaskTimeout:
                            pass
                    case Pause(_, seconds):
                        time.sleep(seconds)
                    case _:
                        assert_never(step)
            except BaseException as exc:
                failed = exc        # the session's to handle: thrown in through the runner
            step = resume(runner, failed)

    def _relay_link(self):
        """The relay's link, connected again if it died (a restarted relay answers at the same
        endpoint). Raises RelayUnavailable if none answers (``Session.connect_relay``)."""
        if not self.session.peers[0].alive:
            with self._reconnecting:
                peer = self.session.peers[0]
                if not peer.alive:
                    self.links.release_peer(peer)
                    try:
                        self._run(self.session.connect_relay(self.discovery, self.connect_timeout_s, time.monotonic))
                    except BaseException:
                        self.links.release_peer(self.session.peers[0])
                        raise
        return self.links["relay"]

    def _open_link(self, endpoint: str, name: str, watch: bool, server_key: str = ""):
        return self.transport.open(endpoint, name, watch=watch, server_key=server_key)

    def _release_link(self, link) -> None:
        self.transport.release(link)

    # --- sending --------------------------------------------------------------------------
    def submit(self, op: int, inputs: list, outputs: list, params: dict, options: TaskOptions = DEFAULT, *,
               out_mems: list | None = None, raw: list | None = None) -> Task:
        """Send a TASK. Raises InvalidArgument / InvalidCore / TaskNumExceedLimit / CoreOffline /
        RelayUnavailable, ApiUseError once closed."""
        if self.closed:
            raise errors.ApiUseError("this SoC connection is closed")
        return self.links.submit(op, inputs, outputs, params, options, out_mems=out_mems, raw=raw)

    def request(self, msg: wire.Message, peer_name: str | None = None) -> Request:
        """Send a non-task request (QUERY, CONTROL, CANCEL) to the relay or a named core."""
        return self.links.request(self.links.link(self.session.request_link(peer_name)), msg)

    def release(self, task: Task) -> str:
        """CANCEL ``task`` where it is; waits up to 5 s for the answer (``Task.release``)."""
        key = self.session.cancel_link(task)
        link = self.links.get(key) if key is not None else None
        reply = None
        if link is not None:
            try:
                reply = self.links.request(link, messages.cancel(next(self.ids), task.msg_id)).wait(5000)
            except errors.VdspError:
                pass
        return self.session.cancelled(task, reply)

    def after_task(self, task: Task) -> None:
        if self.memory is not None:
            for mem in task.outputs:
                self.memory.mark_device_written(mem)

    # --- waiting --------------------------------------------------------------------------
    def wait_for(self, req: Request, timeout_s: float | None) -> None:
        """Block until ``req`` is done (the reader completes it and wakes this thread). Raises
        TaskTimeout (req stays in flight); ApiUseError in a done-callback (it runs in the reader:
        the reply waited for would never be read) or once the connection is closed."""
        if req._done:
            return
        if threading.current_thread() is self.reader:
            raise errors.ApiUseError(f"request {req.msg_id}: a done-callback cannot wait for a reply (it runs in "
                                     "the SDK's reader thread, which reads the replies)")
        req._block(timeout_s, lambda: self.closed)

    # --- the reader -----------------------------------------------------------------------
    def _wake_reader(self) -> None:
        with self._kick_lock:
            if self._kick >= 0:
                os.eventfd_write(self._kick, 1)

    def _read(self) -> None:
        """The reader thread: the one thread that reads the links."""
        deferred = defer_wakes()
        poll, kick = select.poll(), self._kick
        state: list = [None, [], poll]      # the links' version, the links read, their poll set
        next_tick = 0.0
        while not self.closed:
            try:
                next_tick = self._read_once(state, kick, next_tick, deferred)
            except Exception:  # the reader must survive anything a peer sends
                if not self.closed:
                    log.exception("SDK reader error")
                    time.sleep(0.05)
                wake_deferred()

    def _read_once(self, state: list, kick: int, next_tick: float, deferred: list) -> float:
        """Dispatch what waits on the links, then sleep on them (and the kick) until something
        may wait, or the clock's next tick. Returns when that next tick is.

        A drain ends when the socket's EVENTS say nothing waits, which re-arms its edge-triggered
        fd: sleeping on it right after misses nothing. A send meanwhile (``watched``) wakes us.
        The waiters of what completed are woken last thing before the sleep, which lets go of
        the GIL they need (``arm_side.task``). ``state``: the links read and their poll set, made
        again when the links changed (one opened, closed, or its peer died)."""
        version = (self.links.version, [link.peer.alive and not link.closed for link in self.links.by_key.values()])
        if state[0] != version:
            links = [link for link in self.links.values() if not link.closed and link.peer.alive]
            poll = select.poll()
            for fd in (*(link.fd for link in links), kick):
                poll.register(fd, select.POLLIN)
            state[:] = [version, links, poll]
        links, poll = state[1], state[2]
        for link in links:      # watched from before this drain until the sleep ends
            link.watched = True
        try:
            for link in links:
                incoming = link.drain()
                if incoming:
                    self.links.dispatch(link, incoming)
            now = time.monotonic()
            if now >= next_tick:
                self.links.tick(now)
                next_tick = now + HEARTBEAT_INTERVAL_MS / 4000
            timeout_ms = max(0.0, (next_tick - now) * 1000)
            while deferred:     # the waiters of what completed: now, then sleep at once
                deferred.pop().wake()
            for fd, _ in poll.poll(timeout_ms):
                if fd == kick:
                    try:
                        os.eventfd_read(kick)
                    except BlockingIOError:
                        pass
        finally:
            for link in links:
                link.watched = False
        return next_tick

    # --- closing --------------------------------------------------------------------------
    def close(self) -> None:
        """Disconnect: DISCONNECT to each live server, every request still in flight fails with
        ApiUseError, the reader ends, the links close."""
        if self.closed:
            return
        for peer in self.session.peers:
            link = self.links.get(peer.name)
            if peer.alive and link is not None and not link.closed:
                try:
                    link.send(wire.encode(messages.disconnect()))
                except Exception:
                    pass
        self.closed = True
        self._wake_reader()
        if threading.current_thread() is not self.reader:
            self.reader.join(timeout=2)
        self.session.fail_all(errors.ApiUseError("the SoC connection was closed"))
        self.links.release_all()
        if self.own_transport:
            self.transport.close()
        if not self.reader.is_alive():      # else (a done-callback closed us) it ends with the fd open
            with self._kick_lock:
                kick, self._kick = self._kick, -1
            os.close(kick)

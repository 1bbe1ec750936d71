"""The SDK's client: a :class:`~arm_side.session.Session` (the conversation) over a
:class:`~arm_side.transport.Transport` (the links), with the threads that read replies.

Threads: the caller's threads send directly (under each link's lock). Replies are read by
whoever holds ``leader``: a thread blocked in ``wait`` reads its own reply (no thread
hand-off on the fast path); when nobody waits, the background thread reads (for callbacks
and asyncio) and sends heartbeats. A waiter that arrives while the background thread leads
kicks it through a pipe so that it yields at once.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from protocol import errors, messages, wire
from protocol.constants import HEARTBEAT_INTERVAL_MS
from protocol.task_options import DEFAULT, TaskOptions
from arm_side import tracing
from arm_side.busy_retry import BusyRetry
from arm_side.connect_wait import CoreWait, RelayWait
from arm_side.session import CLOSE_FW, HELLO_FW, OPEN_FW, SEND, PeerState, Session
from arm_side.task import Request, Task
from arm_side.transport import Transport
from vdsp_board.fdwait import PollSet
from vdsp_board.procfacts import ProcFacts

log = logging.getLogger("vdsp.sdk")
SLICE_S = 0.05


class Client:
    """Connection to a SoC through ``transport``; ``owner`` is the DDR owner our HELLOs claim
    (``lock_fd``: our fd holding its lock, named in them);
    ``own_transport``: closing the client closes the transport too."""

    def __init__(self, transport: Transport, *, owner: int, connect_timeout_s: float = 20.0,
                 busy_poll_us: int = 0, own_transport: bool = True, lock_fd: int | None = None) -> None:
        self.transport, self.owner, self.own_transport = transport, owner, own_transport
        self.session = Session(transport.mode, owner, lock_fd)
        self.mode, self.ids, self.pending = transport.mode, self.session.ids, self.session.pending
        self.core_states, self.event_callbacks = self.session.core_states, self.session.event_callbacks
        self.links: dict[str, Any] = {}          # peer name (or "<core>.fw") -> link
        self.cv = threading.Condition()
        self.leader = threading.Lock()
        self._counts = threading.Lock()   # guards sync_waiters and _callback_pending (cheaper than cv)
        self.sync_waiters = 0
        self._followers = 0          # threads blocked on cv (not reading)
        self._callback_pending = 0   # requests with done-callbacks not yet complete
        self._bg_leading = False
        self._bg_wake = threading.Event()
        self.closed = False
        self.memory: Any = None  # set by Soc: the MemoryManager for strict-mode hooks
        self.tracer = tracing.sdk_tracer()      # SoC trace stamps (no-ops unless tracing is on)
        self._kick_r, self._kick_w = os.pipe()
        self._poll = PollSet()          # what the reader sleeps on (poll: any fd number, unlike select)
        os.set_blocking(self._kick_r, False)
        os.set_blocking(self._kick_w, False)
        self.connect_timeout_s = connect_timeout_s
        self._facts = ProcFacts()    # what the kernel says of a local server's process (liveness)
        self._reconnecting = threading.Lock()
        # Busy polling (like SO_BUSY_POLL): a synchronous waiter spins this long before it
        # blocks, which saves the wake-up of a sleeping thread at the cost of a busy CPU.
        self.busy_poll_s = max(0, busy_poll_us) / 1e6
        self._bg = threading.Thread(target=self._background, name="vdsp-sdk-io", daemon=True)
        self._bg.start()
        try:
            transport.before_hello(owner)
            if self.mode == "relay":
                self._connect_relay()
            else:
                self._connect_direct()
        except BaseException:
            self.close()
            raise

    @property
    def peers(self) -> list[PeerState]:
        return self.session.peers

    # --- connecting -----------------------------------------------------------------------
    def _connect_relay(self) -> None:
        """Connect to the relay (see ``_await_relay``). Raises RelayUnavailable; the next call
        then tries again."""
        endpoint = self.transport.servers()["relay"]
        link = self._open(endpoint, "relay", watch=True)
        peer = PeerState("relay", time.monotonic())
        link.peer = peer
        self.session.peers[:] = [peer]
        self.links["relay"] = link   # pumped from now on: the READY arrives on it
        try:
            info = self._await_relay(link, endpoint)
        except BaseException:
            peer.alive = False
            self._close_links(peer)
            raise
        self.transport.lost(link)  # forget a connection that closed before this READY came
        self._carry_out(self.session.connected(peer, info, time.monotonic()))

    def _await_relay(self, link, endpoint: str) -> dict:
        """HELLO the relay; its READY body, waited for as ``RelayWait`` says.

        Raises RelayUnavailable saying which process and why, or the error the relay answered with.
        """
        wait = RelayWait(self.transport, endpoint, self.connect_timeout_s, time.monotonic())

        def ready(req: Request) -> dict:
            try:
                while not req.done():
                    refusal = self.transport.refused(link)
                    if refusal:
                        raise errors.KeyRefused(refusal)
                    try:
                        req.wait(wait.next_slice(time.monotonic()) * 1000)
                    except errors.TaskTimeout:
                        pass
                return req.wait()
            except errors.CoreBusy:
                wait.answered()
                raise
        return self._hello(link, ready)

    def _hello(self, link, ready) -> dict:
        """Say HELLO on ``link``; the READY body ``ready(request)`` waits for. A HELLO answered
        HB_DSP_BUSY is said again after a pause (``arm_side.busy_retry``) within the connect timeout."""
        busy = BusyRetry(time.monotonic() + self.connect_timeout_s)
        while True:
            req = self._request(link, self.session.hello())
            try:
                return ready(req)
            except errors.CoreBusy as exc:
                time.sleep(busy.pause(exc, time.monotonic()))
            finally:
                self.session.forget(req.msg_id)

    def _connect_direct(self) -> None:
        now = time.monotonic()
        for name, endpoint in self.transport.servers().items():
            link = self._open(endpoint, name, watch=True)    # a core that exits: known at once
            peer = PeerState(name, now)
            link.peer = peer
            self.session.peers.append(peer)
            self.links[name] = link
            try:
                info = self._await_core(link, endpoint)
            except errors.KeyRefused:
                peer.alive = False      # no DISCONNECT on a link the server refused (a send would block)
                raise
            except errors.TaskTimeout as exc:
                log.warning("core %s does not answer at %s: %s", name, endpoint, exc.message)
                self.transport.release(link)
                peer.alive = False
                self.core_states[name] = "unreachable"
                continue
            self._carry_out(self.session.connected(peer, info, time.monotonic()))
        if not any(p.alive for p in self.session.peers):
            raise errors.CoreOffline("no DSP core answers: is the SoC up? (vdsp up -d)")

    def _await_core(self, link, endpoint: str) -> dict:
        """HELLO a core; its READY, waited for as ``CoreWait`` says. Raises TaskTimeout saying why
        not longer, KeyRefused at once if the server refuses our key, or the error the server answered with."""
        wait = CoreWait(self.transport, endpoint, self.connect_timeout_s, time.monotonic())

        def ready(req: Request) -> dict:
            while True:
                refusal = self.transport.refused(link)
                if refusal:
                    raise errors.KeyRefused(refusal)
                slice_s = wait.next_slice(time.monotonic())    # raises TaskTimeout when waiting is pointless
                try:
                    return req.wait(slice_s * 1000)
                except errors.TaskTimeout:
                    pass
        return self._hello(link, ready)

    def _carry_out(self, actions: list) -> None:
        """Do what the session asked: open or close a firmware link (direct mode), send."""
        for kind, peer, data in actions:
            if kind == SEND:
                link = self.links.get(peer.name)
                if link is not None:
                    try:
                        self._dispatch_all(link, link.send(data))
                    except Exception:      # a heartbeat that cannot go: liveness will tell
                        pass
            elif kind == CLOSE_FW:
                link = self.links.pop(f"{peer.name}.fw", None)
                if link is not None:
                    self.transport.release(link)
            elif kind == OPEN_FW:
                old = self.links.pop(f"{peer.name}.fw", None)
                if old is not None:
                    self.transport.release(old)
                endpoint = self.transport.firmware_endpoint(data, self.links[peer.name].endpoint)
                link = self.links[f"{peer.name}.fw"] = self._open(endpoint, f"{peer.name}.fw",
                                                                  server_key=peer.info.get("fw_server_key", ""))
                link.peer = peer
                self.session.fw_hello_sent(peer, self._request(link, self.session.hello()))
            elif kind == HELLO_FW:      # the firmware answered our HELLO HB_DSP_BUSY: again
                link = self.links.get(f"{peer.name}.fw")
                if link is not None:
                    self.session.fw_hello_sent(peer, self._request(link, self.session.hello()))

    # --- sending --------------------------------------------------------------------------
    def _open(self, endpoint: str, name: str, watch: bool = False, server_key: str = ""):
        """A link to ``endpoint`` (``watch``: its server's exit is heard at once; ``server_key``: a
        firmware's own CURVE key on tcp, as its core announced it)."""
        return self.transport.open(endpoint, name, watch=watch, server_key=server_key)

    def _request(self, link, msg: wire.Message, req: Request | None = None) -> Request:
        req = req or Request(self, msg.msg_id)
        self._send(link, wire.encode(msg), req)
        return req

    def _send(self, link, frames: list, req: Request) -> None:
        """Track ``req`` and send its ``frames`` on ``link`` (dispatching what came meanwhile)."""
        pending, msg_id = self.pending, req.msg_id
        pending[msg_id] = req
        try:
            incoming = link.send(frames)
        except errors.VdspError:
            pending.pop(msg_id, None)
            raise
        except Exception as exc:      # the transport's own failure (a ZMQError)
            pending.pop(msg_id, None)
            raise errors.RelayUnavailable(f"cannot send to {link.name}: {exc}") from exc
        if incoming:
            self._dispatch_all(link, incoming)

    def _relay_link(self):
        """The relay's link, reconnected if it died (a restarted relay answers at the same
        endpoint). Raises RelayUnavailable if none answers (see ``_await_relay``)."""
        if not self.session.peers[0].alive:
            with self._reconnecting:
                peer = self.session.peers[0]
                if not peer.alive:
                    self._close_links(peer)
                    self._connect_relay()
        return self.links["relay"]

    def _close_links(self, peer: PeerState) -> None:
        for key in (peer.name, f"{peer.name}.fw"):
            link = self.links.pop(key, None)
            if link is not None:
                self.transport.release(link)

    def submit(self, op: int, inputs: list, outputs: list, params: dict, options: TaskOptions = DEFAULT, *,
               out_mems: list | None = None, raw: list | None = None) -> Task:
        """Send a TASK. Raises InvalidArgument / InvalidCore / TaskNumExceedLimit / CoreOffline."""
        if self.closed:
            raise errors.ApiUseError("this SoC connection is closed")
        msg_id, frames = self.session.task_frames(op, inputs, outputs, params, options, raw=raw)
        task = Task(self, msg_id, op, out_mems or [], options=options)
        self.tracer.submit_task(msg_id, op, options, inputs, outputs)
        if self.mode == "relay":
            self._send(self._relay_link(), frames, task)
            return task
        peer = self.session.route(options.core, bool(inputs or outputs))
        link = self.links.get(f"{peer.name}.fw")
        if link is None:    # the reader is opening it this very moment (the core just came up)
            raise errors.CoreOffline(f"{peer.name}: its firmware link is not open yet; try again")
        task.core = peer.name
        peer.inflight.add(msg_id)
        self._send(link, frames, task)
        return task

    def request(self, msg: wire.Message, peer_name: str | None = None) -> Request:
        """Send a non-task request (QUERY, CONTROL, CANCEL) to the relay or a named core."""
        if self.mode == "relay":
            return self._request(self._relay_link(), msg)
        peer = next((p for p in self.session.peers if p.name == peer_name), None)
        if peer is None or not peer.alive:
            raise errors.InvalidCore(f"no reachable core named {peer_name!r}")
        return self._request(self.links[peer.name], msg)

    def release(self, task: Task) -> str:
        link = None
        if self.mode == "relay" and self.session.peers[0].alive:
            link = self.links.get("relay")
        elif self.mode == "direct":
            peer = next((p for p in self.session.peers if task.msg_id in p.inflight), None)
            link = self.links.get(f"{peer.name}.fw") if peer is not None else None
        reply = None
        if link is not None:
            try:
                reply = self._request(link, messages.cancel(next(self.ids), task.msg_id)).wait(5000)
            except errors.VdspError:
                pass
        return self.session.cancelled(task, reply)

    def after_task(self, task: Task) -> None:
        if self.memory is not None:
            for mem in task.outputs:
                self.memory.mark_device_written(mem)

    # --- receiving ------------------------------------------------------------------------
    def _dispatch_all(self, link, incoming: list) -> None:
        receive, peer, now = self.session.receive, link.peer, time.monotonic()
        for frames in incoming:
            actions, wake = receive(peer, frames, now)
            if actions:
                self._carry_out(actions)
            if wake:
                self._notify()

    def _links(self) -> list:
        return [link for link in list(self.links.values()) if not link.closed and link.peer.alive]

    def _spin(self, channels: list, seconds: float) -> bool:
        """Poll the channels without sleeping for up to ``seconds``; True once something came."""
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for ch in channels:
                incoming = ch.drain()
                if incoming:
                    self._dispatch_all(ch, incoming)
                    return True
        return False

    def _pump(self, timeout: float, kick: bool = False, spin: float = 0.0) -> None:
        """Read and dispatch what is waiting, sleeping up to ``timeout`` if nothing is
        (after spinning up to ``spin`` seconds)."""
        channels = self._links()
        if spin and self._spin(channels, min(spin, timeout)):
            return
        got = False
        for ch in channels:     # watched from before this last drain until the sleep ends (see
            ch.watched = True   # Channel.watched); one thread pumps at a time (``leader``)
        try:
            for ch in channels:
                incoming = ch.drain()
                if incoming:
                    got = True
                    self._dispatch_all(ch, incoming)
            if got:
                return
            fds = [ch.fd for ch in channels]
            if kick:
                fds.append(self._kick_r)
            if fds:
                self._poll.wait(fds, timeout)
            else:
                time.sleep(timeout)
        finally:
            for ch in channels:
                ch.watched = False
        if kick:
            try:
                os.read(self._kick_r, 4096)
            except BlockingIOError:
                pass
        for ch in channels:
            incoming = ch.drain()
            if incoming:
                self._dispatch_all(ch, incoming)

    def need_reader(self) -> None:
        """A request got a done-callback (callbacks, asyncio): until it completes, the
        background thread reads whenever no synchronous waiter does."""
        with self._counts:
            self._callback_pending += 1
        self._bg_wake.set()

    def reader_released(self) -> None:
        with self._counts:
            self._callback_pending -= 1

    def _notify(self) -> None:
        """Wake threads blocked on ``cv`` (cheap no-op when there are none)."""
        if self._followers:
            with self.cv:
                self.cv.notify_all()

    def wait_for(self, req: Request, timeout_s: float | None) -> None:
        """Block until ``req`` is done. Raises TaskTimeout (req stays in flight)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._counts:
            self.sync_waiters += 1
        if self._bg_leading:
            try:
                os.write(self._kick_w, b"k")
            except BlockingIOError:
                pass
        try:
            while not req._done:
                remaining = SLICE_S if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    raise errors.TaskTimeout(f"request {req.msg_id} not done after {(timeout_s or 0) * 1000:.0f} ms; "
                                             "it is still in flight, wait again to collect it")
                if self.leader.acquire(blocking=False):
                    try:
                        spin = self.busy_poll_s
                        while not req._done and (deadline is None or time.monotonic() < deadline):
                            self._pump(min(remaining, SLICE_S), spin=spin)
                            spin = 0.0  # spin once per wait, then block
                    finally:
                        self.leader.release()
                        if self._followers:
                            self._notify()
                else:
                    req.followed = True
                    with self.cv:
                        self._followers += 1
                        try:
                            self.cv.wait_for(lambda: req.done() or not self.leader.locked(),
                                             timeout=min(remaining, SLICE_S))
                        finally:
                            self._followers -= 1
                if self.closed and not req.done():
                    raise errors.ApiUseError("the SoC connection was closed while waiting")
        finally:
            with self._counts:
                self.sync_waiters -= 1
                if self.sync_waiters == 0 and self._callback_pending:
                    self._bg_wake.set()  # callbacks still to deliver: the background reads

    def _background(self) -> None:
        while not self.closed:
            try:
                self._tick(time.monotonic())
                if self.sync_waiters == 0 and self.leader.acquire(blocking=False):
                    self._bg_leading = True
                    try:
                        if self.sync_waiters == 0:  # re-checked: a waiter may have come meanwhile
                            # Block reading only while callbacks wait for completions; otherwise
                            # just take in what is there (heartbeats, events) and sleep below.
                            self._pump(HEARTBEAT_INTERVAL_MS / 4000 if self._callback_pending else 0, kick=True)
                    finally:
                        self._bg_leading = False
                        self.leader.release()
                        self._notify()
                if not self._callback_pending or self.sync_waiters:
                    self._bg_wake.wait(HEARTBEAT_INTERVAL_MS / 4000)
                    self._bg_wake.clear()
            except Exception:  # the reader must survive anything a peer sends
                if not self.closed:
                    log.exception("SDK background thread error")
                    time.sleep(0.05)

    def _tick(self, now: float) -> None:
        actions = self.session.tick(now, lambda peer: self.transport.lost(self.links.get(peer.name)),
                                    self._fact)
        if actions:
            self._carry_out(actions)
        if any(not p.alive for p in self.session.peers):
            with self.cv:
                self.cv.notify_all()

    def _fact(self, peer: PeerState):
        """What the kernel says of ``peer``'s process, when it runs on this host (an ipc link)."""
        link = self.links.get(peer.name)
        local = link is not None and str(getattr(link, "endpoint", "")).startswith("ipc://")
        return self._facts.fact(peer.pid if local else None, time.monotonic())

    # --- closing --------------------------------------------------------------------------
    def close(self) -> None:
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
        self._bg_wake.set()     # the reader may be napping on the event, not reading the kick pipe
        try:
            os.write(self._kick_w, b"q")
        except OSError:
            pass
        self._bg.join(timeout=2)
        self.session.fail_all(errors.ApiUseError("the SoC connection was closed"))
        for link in list(self.links.values()):
            self.transport.release(link)
        self.links.clear()
        if self.own_transport:
            self.transport.close()
        os.close(self._kick_r)
        os.close(self._kick_w)

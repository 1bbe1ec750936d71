"""The SDK's connection engine: relay mode or direct mode, one reader at a time.

Threads: the caller's threads send directly (under each channel's lock). Replies
are read by whoever holds ``leader``: a thread blocked in ``wait`` reads its own
reply (no thread hand-off on the fast path); when nobody waits, the background
thread reads (for callbacks and asyncio) and sends heartbeats. A waiter that
arrives while the background thread leads kicks it through a pipe so that it
yields at once.
"""
from __future__ import annotations

import itertools
import logging
import os
import select
import threading
import time

import zmq
from zmq.utils.monitor import parse_monitor_message

from protocol import errors, messages, wire
from protocol.cancel import CancelOutcome
from protocol.constants import (HEARTBEAT_INTERVAL_MS, MAX_TASKS_PER_CLIENT, PRIORITY_HIGHEST, Command,
                                Core)
from protocol.liveness import Liveness
from arm_side.channel import Channel
from arm_side.task import Request, Task
from arm_side import autostart
from vdsp_sim.board import acl, curve, ddr, runtime

log = logging.getLogger("vdsp.sdk")
SLICE_S = 0.05
_CORE_VALUES = frozenset(int(c) for c in Core)


class Peer:
    """A server we heartbeat: the relay, or a core's control endpoint (direct mode)."""

    def __init__(self, name: str, channel: Channel, now: float) -> None:
        self.name, self.channel = name, channel
        channel.peer = self
        self.liveness = Liveness(now, HEARTBEAT_INTERVAL_MS)
        self.alive = True
        self.connected = False                  # READY received: liveness applies from then on
        self.info: dict = {}
        self.fw: Channel | None = None          # direct mode: the core's firmware channel
        self.fw_hello: Request | None = None    # direct mode: our HELLO on ``fw`` (proves our owner there)
        self.fw_refused: errors.VdspError | None = None     # direct mode: the firmware refused that HELLO
        self.inflight: set[int] = set()         # direct mode: msg_ids sent to this core
        self.monitor: zmq.Socket | None = None  # relay mode: hears the connection close (relay died)

    def connect(self, info: dict) -> None:
        """READY received: liveness starts now, at the interval the peer announced."""
        self.info = info
        interval = info.get("heartbeat_ms")
        now = time.monotonic()
        self.liveness = Liveness(now, interval if isinstance(interval, int) and interval > 0 else HEARTBEAT_INTERVAL_MS)
        self.connected = True


class Client:
    """Connection to a SoC. ``mode`` is ``relay`` or ``direct``."""

    def __init__(self, mode: str, *, owner: int, connect_timeout_s: float = 20.0,
                 autostart_relay: bool = True, busy_poll_us: int = 0) -> None:
        if mode not in ("relay", "direct"):
            raise errors.InvalidArgument(f"VDSP_RPC_MODE must be relay or direct, got {mode!r}")
        self.mode, self.owner = mode, owner
        self.rt = runtime.runtime_dir()
        self.ctx = zmq.Context()
        self.ids = itertools.count(1)
        self.pending: dict[int, Request] = {}
        self.peers: list[Peer] = []
        self.cv = threading.Condition()
        self.leader = threading.Lock()
        self.sync_waiters = 0
        self._followers = 0          # threads blocked on cv (not reading)
        self._callback_pending = 0   # requests with done-callbacks not yet complete
        self._bg_leading = False
        self._bg_wake = threading.Event()
        self.closed = False
        self.memory = None  # set by Soc: the MemoryManager for strict-mode hooks
        self.event_callbacks: list = []
        self.core_states: dict[str, str] = {}
        self._kick_r, self._kick_w = os.pipe()
        os.set_blocking(self._kick_r, False)
        os.set_blocking(self._kick_w, False)
        self.connect_timeout_s, self.autostart_relay = connect_timeout_s, autostart_relay
        self._reconnecting = threading.Lock()
        # Busy polling (like SO_BUSY_POLL): a synchronous waiter spins this long before it
        # blocks, which saves the wake-up of a sleeping thread at the cost of a busy CPU.
        self.busy_poll_s = max(0, busy_poll_us) / 1e6
        self._bg = threading.Thread(target=self._background, name="vdsp-sdk-io", daemon=True)
        self._bg.start()
        try:
            self._declare_key()
            if mode == "relay":
                self._connect_relay()
            else:
                self._connect_direct()
        except BaseException:
            self.close()
            raise

    # --- connecting -----------------------------------------------------------------------
    def _declare_key(self) -> None:
        """Over tcp a server verifies our owner by the CURVE key our owner names in its access
        list (PROTOCOL.md §16): name ours before the first HELLO. Raises FileNotFound /
        InvalidArgument (no usable key file), SysRegisterMemFailed (the list cannot be written)."""
        endpoints = [runtime.relay_endpoint(self.rt)] if self.mode == "relay" else \
            list(runtime.core_endpoints(self.rt).values())
        if not self.owner or not any(curve.is_tcp(e) for e in endpoints):
            return
        owner = ddr.current_owner()
        if owner.id == self.owner:
            acl.own_list(owner).set_key(curve.client_public_key())

    def _hello(self, channel: Channel, timeout_s: float) -> dict:
        req = self._request(channel, messages.hello(next(self.ids), "client", pid=os.getpid(), owner=self.owner,
                                                    name=f"pid{os.getpid()}"))
        try:
            return req.wait(timeout_s * 1000)
        finally:
            self.pending.pop(req.msg_id, None)

    def _connect_relay(self) -> None:
        """Connect to the relay (see ``_await_relay``). Raises RelayUnavailable; the next call
        then tries again."""
        endpoint = runtime.relay_endpoint(self.rt)
        channel = Channel(self.ctx, endpoint, "relay")
        peer = Peer("relay", channel, time.monotonic())
        with channel.lock:   # a relay that dies closes the connection: we hear it at once
            peer.monitor = channel.sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        self.peers = [peer]  # pumped from now on: the READY arrives on it
        try:
            info = self._await_relay(channel, endpoint)
        except BaseException:
            peer.alive = False
            self._close_peer(peer)
            raise
        self._disconnected(peer)  # forget a connection that closed before this READY came
        peer.connect(info)
        for core in info.get("cores", []):
            self.core_states[core["name"]] = core["state"]

    def _await_relay(self, channel: Channel, endpoint: str) -> dict:
        """HELLO the relay; its READY body. A local (ipc) relay that does not answer within
        PROBE_S (at once if its socket file is missing) is handled as ``autostart.plan`` says:
        wait for the SoC supervisor to restart it, start one for the cores that run, or fail.

        Raises RelayUnavailable saying which, or the error the relay answered with.
        """
        req = self._request(channel, messages.hello(next(self.ids), "client", pid=os.getpid(), owner=self.owner,
                                                    name=f"pid{os.getpid()}"))
        try:
            now = time.monotonic()
            deadline = now + self.connect_timeout_s
            decide_at = None
            if self.autostart_relay and endpoint.startswith("ipc://"):
                decide_at = now + (autostart.PROBE_S if os.path.exists(endpoint[6:]) else 0.0)
            message, supervised = f"no relay answers at {endpoint}", False
            while not req.done():
                now = time.monotonic()
                if decide_at is not None and now >= decide_at:
                    decide_at = None
                    plan = autostart.plan(self.rt, endpoint)
                    message = plan.message
                    if plan.action == "fail":
                        raise errors.RelayUnavailable(message)
                    if plan.action == "start":
                        autostart.start_relay(self.rt)
                    else:   # the supervisor restarts its relay; starting another would race it
                        supervised = True
                        deadline = min(deadline, now + autostart.SUPERVISOR_WAIT_S)
                if supervised:
                    problem = autostart.supervisor_problem(self.rt)
                    if problem:
                        raise errors.RelayUnavailable(f"no relay answers at {endpoint}: {problem}")
                if now >= deadline:
                    raise errors.RelayUnavailable(message)
                try:
                    req.wait(max(1.0, min(0.1, deadline - now) * 1000))
                except errors.TaskTimeout:
                    pass
            return req.wait()
        finally:
            self.pending.pop(req.msg_id, None)

    def _connect_direct(self) -> None:
        now = time.monotonic()
        for name, endpoint in runtime.core_endpoints(self.rt).items():
            channel = Channel(self.ctx, endpoint, name)
            peer = Peer(name, channel, now)
            self.peers.append(peer)
            try:
                peer.info = self._hello(channel, self.connect_timeout_s)
            except errors.TaskTimeout:
                log.warning("core %s does not answer at %s", name, endpoint)
                channel.close()
                peer.alive = False
                self.core_states[name] = "unreachable"
                continue
            peer.connect(peer.info)
            self._direct_core_state(peer, peer.info.get("state", "offline"), peer.info)
        if not any(p.alive for p in self.peers):
            raise errors.CoreOffline("no DSP core answers: is the SoC up? (vdsp up -d)")

    def _direct_core_state(self, peer: Peer, state: str, body: dict) -> None:
        """Direct mode: follow a core's state; tasks in flight on a core that stops fail."""
        self.core_states[peer.name] = state
        if state == "running":
            endpoint = runtime.connectable(body.get("fw_endpoint", ""), peer.channel.endpoint)
            if peer.fw is None or peer.fw.endpoint != endpoint:
                if peer.fw is not None:
                    peer.fw.close()
                self._forget_fw_hello(peer)
                peer.fw = Channel(self.ctx, endpoint, f"{peer.name}.fw")
                peer.fw.peer = peer
                self._hello_fw(peer)
            peer.info.update({k: v for k, v in body.items() if k != "state"})
            return
        if peer.fw is not None:
            peer.fw.close()
            peer.fw = None
            self._forget_fw_hello(peer)
        exc_cls = {"crashed": errors.CoreCrashed, "dead": errors.CoreDead}.get(state, errors.CoreOffline)
        for msg_id in list(peer.inflight):
            req = self.pending.pop(msg_id, None)
            if req is not None:
                req._complete(None, exc_cls(f"{peer.name} {state}"))
        peer.inflight.clear()

    def _hello_fw(self, peer: Peer) -> None:
        """Direct mode: tell a firmware, before any task goes there, which owner we are; it checks
        the claim against our process (or our key on tcp) and refuses our buffers without it.

        Not waited for: a firmware running a long task answers only after it, and messages
        on one connection arrive in order, so tasks may follow at once. A refusal is logged
        and kept: later tasks with buffers to that firmware raise it (ClaimRefused)."""
        msg = messages.hello(next(self.ids), "client", pid=os.getpid(), owner=self.owner, name=f"pid{os.getpid()}")
        peer.fw_refused = None
        req = peer.fw_hello = self._request(peer.fw, msg)

        def refused(r: Request, peer: Peer = peer) -> None:
            if isinstance(r.error, errors.ClaimRefused) and peer.fw_hello is r:
                peer.fw_refused = r.error
                log.error("the firmware of %s refused our HELLO: %s", peer.name, r.error)
        req.add_done_callback(refused)

    def _forget_fw_hello(self, peer: Peer) -> None:
        req, peer.fw_hello = peer.fw_hello, None
        if req is not None and self.pending.pop(req.msg_id, None) is not None:
            req._complete({}, None)

    # --- sending --------------------------------------------------------------------------
    def _request(self, channel: Channel, msg: wire.Message, req: Request | None = None) -> Request:
        req = req or Request(self, msg.msg_id)
        self.pending[msg.msg_id] = req
        try:
            incoming = channel.send(wire.encode(msg))
        except zmq.ZMQError as exc:
            self.pending.pop(msg.msg_id, None)
            raise errors.RelayUnavailable(f"cannot send to {channel.name}: {exc}") from exc
        self._dispatch_all(channel, incoming)
        return req

    def _ensure_relay(self) -> Peer:
        """The relay peer, reconnected if it died (a restarted relay answers at the same
        endpoint). Raises RelayUnavailable if none answers (see ``_await_relay``)."""
        peer = self.peers[0]
        if not peer.alive:
            with self._reconnecting:
                peer = self.peers[0]
                if not peer.alive:
                    self._close_peer(peer)
                    self._connect_relay()
                    peer = self.peers[0]
        return peer

    def _close_peer(self, peer: Peer) -> None:
        with peer.channel.lock:
            if peer.monitor is not None:
                if not peer.channel.closed:
                    try:
                        peer.channel.sock.disable_monitor()
                    except zmq.ZMQError:
                        pass
                peer.monitor.close(0)
                peer.monitor = None
        peer.channel.close()
        if peer.fw is not None:
            peer.fw.close()

    def _disconnected(self, peer: Peer) -> bool:
        """True if the peer's connection closed since the last look (its process is gone)."""
        with peer.channel.lock:
            if peer.monitor is None or peer.channel.closed:
                return False
            gone = False
            while True:
                try:
                    frames = peer.monitor.recv_multipart(zmq.NOBLOCK)
                except zmq.ZMQError:
                    return gone
                try:
                    gone = gone or parse_monitor_message(frames)["event"] == zmq.EVENT_DISCONNECTED
                except (ValueError, KeyError, IndexError):
                    pass

    def submit(self, op: int, inputs: list, outputs: list, params: dict, *, core: int = Core.ANY,
               priority: int = 0, custom_id: int = 0, out_mems: list | None = None,
               raw: list | None = None) -> Task:
        """Send a TASK. Raises InvalidArgument / InvalidCore / TaskNumExceedLimit / CoreOffline."""
        if self.closed:
            raise errors.ApiUseError("this SoC connection is closed")
        if core not in _CORE_VALUES:
            raise errors.InvalidCore(f"core must be CORE_ANY (0), CORE_0 (1) or CORE_1 (2), got {core!r}")
        if not isinstance(priority, int) or not 0 <= priority <= PRIORITY_HIGHEST:
            raise errors.InvalidArgument(f"priority must be an int in 0..255, got {priority!r}")
        if not isinstance(op, int) or not 0 <= op <= 0xFFFE:
            raise errors.InvalidArgument(f"cmd must be an operator id in 0x0000..0xfffe, got {op!r}")
        msg_id = next(self.ids)
        msg = messages.task(msg_id, op, inputs=inputs, outputs=outputs, params=params, owner=self.owner,
                            priority=priority, core=int(core), custom_id=custom_id, raw=raw)
        task = Task(self, msg_id, op, out_mems or [])
        if self.mode == "relay":
            peer = self._ensure_relay()
            return self._request(peer.channel, msg, task)
        peer = self._pick_direct(Core(core))
        if peer.fw_refused is not None and (inputs or outputs):
            raise errors.ClaimRefused(f"{peer.name}: {peer.fw_refused.message}")
        task.core = peer.name
        peer.inflight.add(msg_id)
        self._request(peer.fw, msg, task)
        return task

    def _pick_direct(self, core: Core) -> Peer:
        in_flight = sum(len(p.inflight) for p in self.peers)
        if in_flight >= MAX_TASKS_PER_CLIENT:
            raise errors.TaskNumExceedLimit(f"{in_flight} tasks already in flight (limit {MAX_TASKS_PER_CLIENT})")
        if core is Core.ANY:
            running = [p for p in self.peers if p.fw is not None and p.alive]
            if not running:
                raise errors.CoreOffline(f"no running core ({self.core_states})")
            return min(running, key=lambda p: len(p.inflight))
        if core.index >= len(self.peers):
            raise errors.InvalidCore(f"this SoC has {len(self.peers)} cores")
        peer = self.peers[core.index]
        if peer.fw is None or not peer.alive:
            state = self.core_states.get(peer.name, "offline")
            exc_cls = {"crashed": errors.CoreCrashed, "dead": errors.CoreDead}.get(state, errors.CoreOffline)
            raise exc_cls(f"{peer.name} is {state}")
        return peer

    def request(self, msg: wire.Message, peer_name: str | None = None) -> Request:
        """Send a non-task request (QUERY, CONTROL, CANCEL) to the relay or a named core."""
        if self.mode == "relay":
            return self._request(self._ensure_relay().channel, msg)
        peer = next((p for p in self.peers if p.name == peer_name), None)
        if peer is None or not peer.alive:
            raise errors.InvalidCore(f"no reachable core named {peer_name!r}")
        return self._request(peer.channel, msg)

    def release(self, task: Task) -> str:
        channel = None
        if self.mode == "relay" and self.peers[0].alive:
            channel = self.peers[0].channel
        elif self.mode == "direct":
            peer = next((p for p in self.peers if task.msg_id in p.inflight), None)
            channel = peer.fw if peer is not None else None
        outcome = CancelOutcome.RUNNING
        if channel is not None:
            try:
                reply = self._request(channel, messages.cancel(next(self.ids), task.msg_id)).wait(5000)
                outcome = CancelOutcome.of(reply.get("state"))
            except errors.VdspError:
                pass
        if outcome is CancelOutcome.UNKNOWN:   # not waiting there; it was in flight when released
            outcome = CancelOutcome.RUNNING     # (Task.release answers for finished ones): it ran, unseen
        if self.pending.pop(task.msg_id, None) is not None or outcome is CancelOutcome.CANCELLED:
            task._complete(None, errors.TaskCancelled(f"task {task.msg_id} released"))
        for peer in self.peers:
            peer.inflight.discard(task.msg_id)
        return outcome.value

    def after_task(self, task: Task) -> None:
        if self.memory is not None:
            for mem in task.outputs:
                self.memory.mark_device_written(mem)

    # --- receiving ------------------------------------------------------------------------
    def _dispatch_all(self, channel: Channel, incoming: list) -> None:
        for frames in incoming:
            self._dispatch(channel, frames)

    def _dispatch(self, channel: Channel, frames: list) -> None:
        peer = channel.peer
        if peer is not None:
            peer.liveness.last_heard = time.monotonic()
        try:
            header = wire.parse_header(frames[0])
        except (errors.VdspError, IndexError) as exc:
            log.warning("dropped malformed message from %s: %s", channel.name, exc)
            return
        cmd, msg_id = header[0], header[4]
        if cmd is Command.HEARTBEAT:
            return
        try:
            body = wire.unpack_body(bytes(frames[1])) if len(frames) > 1 else {}
        except errors.VdspError as exc:
            body, cmd = exc.to_wire(), Command.ERROR
        if cmd is Command.EVENT:
            self._on_event(peer, body)
            return
        req = self.pending.pop(msg_id, None)
        if req is None:
            return  # released, or timed out and forgotten
        if self.mode == "direct":
            for p in self.peers:
                p.inflight.discard(msg_id)
        error = errors.from_wire(body) if cmd is Command.ERROR else None
        req._complete(body, error, header, frames[2:])
        if req.followed:
            self._notify()


    def _on_event(self, peer: Peer | None, body: dict) -> None:
        core, state = body.get("core", "?"), body.get("state", "?")
        if self.mode == "direct" and peer is not None:
            self._direct_core_state(peer, state, body)
        else:
            self.core_states[core] = state
        for cb in list(self.event_callbacks):
            try:
                cb(body)
            except Exception:
                log.exception("event callback raised")
        self._notify()

    def _channels(self) -> list[Channel]:
        out = []
        for peer in self.peers:
            if peer.alive and not peer.channel.closed:
                out.append(peer.channel)
            if peer.fw is not None and not peer.fw.closed:
                out.append(peer.fw)
        return out

    def _spin(self, channels: list[Channel], seconds: float) -> bool:
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
        channels = self._channels()
        if spin and self._spin(channels, min(spin, timeout)):
            return
        got = False
        for ch in channels:
            incoming = ch.drain()
            if incoming:
                got = True
                self._dispatch_all(ch, incoming)
        if got:
            return
        fds = [ch.fd for ch in channels] + ([self._kick_r] if kick else [])
        if fds:
            select.select(fds, [], [], timeout)
        else:
            time.sleep(timeout)
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
        with self.cv:
            self._callback_pending += 1
        self._bg_wake.set()

    def reader_released(self) -> None:
        with self.cv:
            self._callback_pending -= 1

    def _notify(self) -> None:
        """Wake threads blocked on ``cv`` (cheap no-op when there are none)."""
        if self._followers:
            with self.cv:
                self.cv.notify_all()

    def wait_for(self, req: Request, timeout_s: float | None) -> None:
        """Block until ``req`` is done. Raises TaskTimeout (req stays in flight)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self.cv:
            self.sync_waiters += 1
        if self._bg_leading:
            try:
                os.write(self._kick_w, b"k")
            except BlockingIOError:
                pass
        try:
            while not req.done():
                remaining = SLICE_S if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    raise errors.TaskTimeout(f"request {req.msg_id} not done after {timeout_s * 1000:.0f} ms; "
                                             "it is still in flight, wait again to collect it")
                if self.leader.acquire(blocking=False):
                    try:
                        spin = self.busy_poll_s
                        while not req.done() and (deadline is None or time.monotonic() < deadline):
                            self._pump(min(remaining, SLICE_S), spin=spin)
                            spin = 0.0  # spin once per wait, then block
                    finally:
                        self.leader.release()
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
            with self.cv:
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
        """Heartbeats out; peers silent for the liveness window, or whose connection closed
        (relay mode), are dead."""
        for peer in list(self.peers):
            if not peer.alive or not peer.connected:
                continue
            if self._disconnected(peer):
                self._peer_dead(peer, "its connection closed")
            elif peer.liveness.dead(now):
                self._peer_dead(peer)
            elif peer.liveness.send_due(now):
                try:
                    self._dispatch_all(peer.channel, peer.channel.send(wire.encode(messages.heartbeat())))
                except zmq.ZMQError:
                    pass

    def _peer_dead(self, peer: Peer, why: str = "") -> None:
        peer.alive = False
        if self.mode == "relay":
            why = why or f"silent for {peer.liveness.window:.1f}s (heartbeats lost)"
            log.error("relay %s: failing %d request(s)", why, len(self.pending))
            for msg_id in list(self.pending):
                req = self.pending.pop(msg_id, None)
                if req is not None:
                    req._complete(None, errors.RelayUnavailable(f"relay server stopped answering: {why}"))
        else:
            log.error("core %s silent for %.1fs: declared dead", peer.name, peer.liveness.window)
            self._direct_core_state(peer, "dead", {})
        with self.cv:
            self.cv.notify_all()

    # --- closing --------------------------------------------------------------------------
    def close(self) -> None:
        if self.closed:
            return
        for peer in self.peers:
            if peer.alive and not peer.channel.closed:
                try:
                    peer.channel.send(wire.encode(messages.disconnect()))
                except zmq.ZMQError:
                    pass
        self.closed = True
        try:
            os.write(self._kick_w, b"q")
        except OSError:
            pass
        self._bg.join(timeout=2)
        for req in list(self.pending.values()):
            req._complete(None, errors.ApiUseError("the SoC connection was closed"))
        self.pending.clear()
        for peer in self.peers:
            self._close_peer(peer)
        self.ctx.term()
        os.close(self._kick_r)
        os.close(self._kick_w)

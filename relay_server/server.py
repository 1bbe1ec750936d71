"""The relay: many ARM client processes, two DSP cores, one priority scheduler.

Clients talk to a ROUTER; each core is a :class:`CoreLink` (control DEALER +
firmware DEALER). The relay schedules a TASK by its fixed header (priority,
core, custom_id, msg_id) and unpacks its body once, to check that every handle
belongs to the owner the client proved in its HELLO or lies within a grant
(``vdsp_sim.board.ownership``); it forwards the frames unchanged, so the firmware, which
trusts the relay's check (the relay proves itself in its own HELLO there), sees
exactly what the client sent. It rewrites ``msg_id`` to its own id on the way
to the core and back on the way to the client. In a RESULT/ERROR
reply to a task the relay sets the header's ``core`` to the core that ran it
and ``custom_id`` to the microseconds the task waited in the queue.

What a client can make the relay hold is bounded: tasks in flight
(``max_tasks_per_client``), bytes of queued tasks per client and in all
(``MAX_CLIENT_BYTES``, ``MAX_QUEUED_BYTES``: CoreBusy beyond), and replies
waiting for a client that does not read them (``CLIENT_SNDHWM`` messages;
the excess is dropped and counted). Warnings about one peer are rate-limited.
"""
from __future__ import annotations

import itertools
import logging
import os
import struct
import time

import zmq

from protocol import errors, messages, wire
from protocol.constants import (HEARTBEAT_INTERVAL_MS, LIVENESS, MAX_RAW_FRAME, MAX_TASKS_PER_CLIENT, Command,
                                Core)
from protocol.liveness import Liveness
from relay_server.corelink import CoreLink
from relay_server.scheduler import Job, Scheduler
from vdsp_sim.board import curve, ddr, runtime
from vdsp_sim.board.log import RateLimited
from vdsp_sim.board.ownership import Ownership
from vdsp_sim.board.zsock import send_frames

log = logging.getLogger("vdsp.relay")
_U64 = struct.Struct("<Q")
REAP_EVERY_S = 1.0
_EVENTS, _POLLIN, _NOBLOCK = int(zmq.EVENTS), int(zmq.POLLIN), int(zmq.NOBLOCK)
_CORE_INDEX = {int(Core.ANY): None, int(Core.CORE_0): 0, int(Core.CORE_1): 1}  # header core -> index
TICK_MS = 20
MAX_CLIENT_BYTES = 256 << 20    # bytes of one client's tasks the relay holds (queued, not yet sent)
MAX_QUEUED_BYTES = 1 << 30      # the same, all clients together
CLIENT_SNDHWM = 1000            # replies waiting for one client before the next is dropped


class Client:
    __slots__ = ("identity", "owner", "pid", "name", "liveness", "jobs", "held_bytes", "dropped", "peer")

    def __init__(self, identity: bytes, now: float, heartbeat_ms: int, peer: str = "") -> None:
        self.identity = identity
        self.peer = peer       # "" on ipc; the CURVE name (admin:NAME / client:NAME) on tcp
        self.owner: int | None = None   # the DDR owner its HELLO proved (None: none proved)
        self.pid = self.held_bytes = self.dropped = 0
        self.name = ""
        self.liveness = Liveness(now, heartbeat_ms)
        self.jobs: dict[int, Job] = {}  # client msg_id -> job, queued or running


def _retag(header: bytes, msg_id: int, core: int | None = None, queue_us: int | None = None) -> bytes:
    """A copy of a 24-byte header with a new msg_id (and core / custom_id for replies)."""
    buf = bytearray(header)
    _U64.pack_into(buf, 8, msg_id)
    if core is not None:
        buf[7] = core
    if queue_us is not None:
        struct.pack_into("<q", buf, 16, queue_us)
    return bytes(buf)


def _size(frames: list) -> int:
    return sum(len(f) for f in frames)


class RelayServer:
    def __init__(self, bind: str, cores: dict[str, str], *, heartbeat_ms: int = HEARTBEAT_INTERVAL_MS,
                 credit: int = 8, max_queued: int = 8192,
                 max_tasks_per_client: int = MAX_TASKS_PER_CLIENT) -> None:
        self.heartbeat_ms, self.credit = heartbeat_ms, credit
        self.max_tasks_per_client = max_tasks_per_client
        self.ctx = zmq.Context()
        self.front = self.ctx.socket(zmq.ROUTER)
        self.front.linger = 0
        self.front.router_mandatory = True
        self.front.sndhwm = CLIENT_SNDHWM        # per client: a client that never reads cannot grow us
        self.front.rcvhwm = 10000
        self.front.maxmsgsize = MAX_RAW_FRAME    # a larger frame closes that connection before it is read
        self.gate = curve.Gate(self.ctx, curve.keys_dir()) if curve.is_tcp(bind) else None
        self.ownership = Ownership("relay", gate=self.gate)
        self.fw_hellos: dict[int, str] = {}      # relay_id of our HELLO to a firmware -> core name
        self.greeted: dict[int, zmq.Socket] = {}  # core index -> the firmware socket we said HELLO on
        curve.secure_server(self.front, bind)
        self.front.bind(bind)
        self.bind = bind
        now = time.monotonic()
        self.started = now
        self.cores = [CoreLink(self.ctx, i, name, ep, now, heartbeat_ms) for i, (name, ep) in enumerate(cores.items())]
        self.by_name = {c.name: c for c in self.cores}
        self.sched = Scheduler(len(self.cores), max_queued)
        self.clients: dict[bytes, Client] = {}
        self.ids = itertools.count(1)
        self.jobs: dict[int, Job] = {}          # relay_id -> job (queued or running)
        self.forwarded: dict[int, tuple[bytes, int, int]] = {}  # relay_id -> (client, msg_id, core index)
        self.cancels: dict[int, tuple[bytes, int, int]] = {}    # relay_id -> (client, msg_id, core index)
        self.pending_hello: list[tuple[bytes, int]] = []
        self.stats = {"submitted": 0, "completed": 0, "failed": 0, "rejected": 0, "dropped_replies": 0}
        self.held_bytes = 0                      # payload bytes of queued tasks, all clients
        self.warn = RateLimited(log)
        self.running = True
        self.fw_socks: dict[zmq.Socket, CoreLink] = {}
        self.poller = zmq.Poller()
        self.poller.register(self.front, zmq.POLLIN)
        for core in self.cores:
            self.poller.register(core.ctl, zmq.POLLIN)

    # --- sending --------------------------------------------------------------------------
    def to_client(self, identity: bytes, frames: list) -> None:
        try:
            send_frames(self.front, [identity, *frames], _NOBLOCK)
        except zmq.Again:
            self.stats["dropped_replies"] += 1
            client = self.clients.get(identity)
            if client is not None:
                client.dropped += 1
            self.warn.warn(("slow", identity), "client %s is not reading its replies (%d waiting); dropped a "
                           "message", identity.hex(), CLIENT_SNDHWM)
        except zmq.ZMQError as exc:  # EHOSTUNREACH: the client is gone
            self.warn.warn(("gone", identity), "client %s unreachable (%s)", identity.hex(), exc.strerror)

    def fail(self, job: Job, exc: errors.VdspError) -> None:
        """End ``job`` with an error sent to its client (unless released)."""
        self._forget(job)
        self.stats["failed"] += 1
        if not job.discard:
            self.to_client(job.client, wire.encode(messages.error(job.client_msg_id, exc)))

    def _forget(self, job: Job) -> None:
        self.jobs.pop(job.relay_id, None)
        self._release(job)
        client = self.clients.get(job.client)
        if client is not None:
            client.jobs.pop(job.client_msg_id, None)

    def _release(self, job: Job) -> None:
        """The relay no longer holds ``job``'s payload (sent to a core, or ended)."""
        if job.payload is not None:
            size = _size(job.payload)
            self.held_bytes -= size
            client = self.clients.get(job.client)
            if client is not None:
                client.held_bytes -= size
            job.payload = None

    # --- client side ----------------------------------------------------------------------
    def on_client(self, identity: bytes, frames: list, peer: str = "", meta: object = None) -> None:
        """One message of client ``identity``; ``meta`` a frame of it received with ``copy=False``
        (who sent a HELLO: ``vdsp_sim.board.ownership``), ``peer`` its CURVE name on tcp."""
        now = time.monotonic()
        client = self.clients.get(identity)
        if client is None:
            client = self.clients[identity] = Client(identity, now, self.heartbeat_ms, peer)
        client.liveness.heard(now)
        try:
            wire.check_frames(frames)
            cmd, op, priority, core, msg_id, custom_id = wire.parse_header(frames[0])
        except errors.VdspError as exc:
            msg_id = wire.peek_msg_id(frames)
            self.warn.warn(("bad", identity), "rejected message from client %s: %s", identity.hex(), exc)
            if msg_id:  # 0 = one-way message (heartbeat, event): nobody to answer
                self.to_client(identity, wire.encode(messages.error(msg_id, exc)))
            return
        if cmd is Command.TASK:
            self.submit(client, frames, priority, core, msg_id, custom_id, now)
        elif cmd is Command.HEARTBEAT:
            pass
        else:
            self.on_client_request(client, frames, cmd, msg_id, meta)

    def submit(self, client: Client, frames: list, priority: int, core: int, msg_id: int,
               custom_id: int, now: float) -> None:
        def reject(exc: errors.VdspError) -> None:
            self.stats["rejected"] += 1
            self.to_client(client.identity, wire.encode(messages.error(msg_id, exc)))

        if core not in _CORE_INDEX or (core and _CORE_INDEX[core] >= len(self.cores)):
            return reject(errors.InvalidCore(f"core {core} is not ANY (0), CORE_0 (1) or CORE_1 (2) of this SoC"))
        try:    # the body once: well-formed handles, each the client's own or granted to it
            body = wire.unpack_body(frames[1])
            messages.check_body(wire.Message(Command.TASK, msg_id, body))
            self.ownership.check_task(client.owner, body)
        except errors.VdspError as exc:
            return reject(exc)
        if msg_id in client.jobs:
            return reject(errors.InvalidArgument(f"msg_id {msg_id} is already in flight for this client"))
        if len(client.jobs) >= self.max_tasks_per_client:
            return reject(errors.TaskNumExceedLimit(
                f"{len(client.jobs)} tasks already in flight for this client (limit {self.max_tasks_per_client})"))
        index = _CORE_INDEX[core]
        usable = self.cores if index is None else (self.cores[index],)
        if not any(c.state == "running" for c in usable):
            if index is not None and usable[0].state == "crashed":
                return reject(errors.CoreCrashed(f"{usable[0].name} is crashed"))
            if index is not None and usable[0].state == "dead":
                return reject(errors.CoreDead(f"{usable[0].name} stopped answering heartbeats"))
            names = ", ".join(f"{c.name} {c.state}" for c in self.cores)
            return reject(errors.CoreOffline(f"no running core for this task ({names})"))
        if self.sched.full():
            return reject(errors.CoreBusy(f"relay queue is full ({self.sched.max_queued} tasks); retry later"))
        size = _size(frames)
        if client.held_bytes + size > MAX_CLIENT_BYTES or self.held_bytes + size > MAX_QUEUED_BYTES:
            return reject(errors.CoreBusy(
                f"relay holds {client.held_bytes} bytes of this client's queued tasks and {self.held_bytes} in all "
                f"(limits {MAX_CLIENT_BYTES} and {MAX_QUEUED_BYTES}); retry later"))
        job = Job(next(self.ids), client.identity, msg_id, priority, custom_id, index, frames, now)
        client.held_bytes += size
        self.held_bytes += size
        client.jobs[msg_id] = job
        self.jobs[job.relay_id] = job
        self.sched.push(job)
        self.stats["submitted"] += 1
        self.dispatch()

    def on_client_request(self, client: Client, frames: list, cmd: Command, msg_id: int,
                          meta: object = None) -> None:
        try:
            msg = messages.check_body(wire.decode(frames))
        except errors.VdspError as exc:
            self.to_client(client.identity, wire.encode(messages.error(msg_id, exc)))
            return
        body = msg.body
        if cmd is Command.HELLO:
            client.pid, client.name = body.get("pid", 0), body.get("name", "")
            try:
                client.owner = self.ownership.claim(body, meta, client.peer)
            except errors.ClaimRefused as exc:
                client.owner = None
                self.to_client(client.identity, wire.encode(messages.error(msg_id, exc)))
                return
            self.pending_hello.append((client.identity, msg_id))
            self.answer_hellos(time.monotonic())
        elif cmd is Command.CANCEL:
            self.cancel(client, msg_id, body["target"])
        elif cmd is Command.QUERY:
            try:
                reply = messages.result(msg_id, self.query(body["what"]))
            except errors.VdspError as exc:
                reply = messages.error(msg_id, exc)
            self.to_client(client.identity, wire.encode(reply))
        elif cmd is Command.CONTROL:
            core = self.by_name.get(body["core"])
            if core is None:
                exc = errors.InvalidCore(f"no core named {body['core']!r}; cores: {', '.join(self.by_name)}")
                self.to_client(client.identity, wire.encode(messages.error(msg_id, exc)))
                return
            if body.get("value") is not None and self.gate is not None and not curve.is_admin(client.peer):
                exc = errors.RemoteprocDenied(f"writing {body.get('attr')!r} of {body['core']} needs an admin key "
                                              f"over tcp (this peer is {client.peer or 'unnamed'})")
                self.to_client(client.identity, wire.encode(messages.error(msg_id, exc)))
                return
            relay_id = next(self.ids)
            self.forwarded[relay_id] = (client.identity, msg_id, core.index)
            msg.msg_id = relay_id
            core.send_ctl(msg)
        elif cmd is Command.DISCONNECT:
            self.drop_client(client, "disconnected")
        else:
            exc = errors.ApiUseError(f"the relay does not accept {cmd.name} from clients")
            self.to_client(client.identity, wire.encode(messages.error(msg_id, exc)))

    def cancel(self, client: Client, msg_id: int, target: int) -> None:
        """Release a task: queued here -> removed; sent ahead to a firmware -> ask it to drop
        the task if it has not started (the firmware's answer settles the reply); running ->
        its result is discarded."""
        job = client.jobs.get(target)
        if job is None:
            state = "unknown"
        elif self.sched.remove(job):
            self._forget(job)
            state = "cancelled"
        else:
            job.discard = True
            core = next((c for c in self.cores if job.relay_id in c.inflight), None)
            if core is not None and core.fw is not None:
                relay_id = next(self.ids)
                self.cancels[relay_id] = (client.identity, msg_id, core.index)
                send_frames(core.fw, wire.encode(messages.cancel(relay_id, job.relay_id)))
                return
            state = "running"
        self.to_client(client.identity, wire.encode(messages.result(msg_id, {"state": state, "target": target})))

    def drop_client(self, client: Client, why: str) -> None:
        """Forget a departed client: its queued tasks never run, tasks sent ahead to a firmware
        are cancelled there if they have not started, running ones finish unseen."""
        dropped = cancelled = 0
        for job in list(client.jobs.values()):
            job.discard = True
            if self.sched.remove(job):
                self._forget(job)
                dropped += 1
                continue
            core = next((c for c in self.cores if job.relay_id in c.inflight), None)
            if core is not None and core.fw is not None:
                relay_id = next(self.ids)
                self.cancels[relay_id] = (None, 0, core.index)   # nobody to tell the outcome
                send_frames(core.fw, wire.encode(messages.cancel(relay_id, job.relay_id)))
                cancelled += 1
        self.sched.forget_client(client.identity)
        self.clients.pop(client.identity, None)
        log.info("client %s (pid %d) %s: %d queued task(s) dropped, %d sent ahead cancelled, %d running "
                 "discarded%s", client.identity.hex(), client.pid, why, dropped, cancelled,
                 len(client.jobs) - dropped, f"; {client.dropped} replies it did not read were dropped"
                 if client.dropped else "")

    def answer_hellos(self, now: float) -> None:
        """READY once every core has answered (or the liveness window passed)."""
        if not self.pending_hello:
            return
        known = all(c.state != "unknown" for c in self.cores)
        if not known and now - self.started <= LIVENESS * self.heartbeat_ms / 1000:
            return
        running = any(c.state == "running" for c in self.cores)
        body = {"cores": [c.describe() for c in self.cores], "heartbeat_ms": self.heartbeat_ms,
                "state": "running" if running else "offline"}
        for identity, msg_id in self.pending_hello:
            self.to_client(identity, wire.encode(messages.ready(msg_id, "dsp_relay_server", "relay", **body)))
        self.pending_hello.clear()

    def query(self, what: str) -> dict:
        if what == "cores":
            return {"cores": [c.describe() for c in self.cores]}
        if what == "stats":
            return {**self.stats, "queued": self.sched.queued, "clients": len(self.clients),
                    "queued_bytes": self.held_bytes,
                    "inflight": {c.name: len(c.inflight) for c in self.cores}, "pid": os.getpid()}
        raise errors.InvalidArgument(f"unknown query {what!r}; the relay answers 'cores' and 'stats'")

    # --- core side ------------------------------------------------------------------------
    def dispatch(self) -> None:
        """Fill every running core up to its credit, least-loaded core first."""
        if not self.sched.queued:
            return
        for core in sorted(self.cores, key=lambda c: len(c.inflight)):
            while core.state == "running" and len(core.inflight) < self.credit:
                job = self.sched.pop_for(core.index)
                if job is None:
                    break
                job.core_name, job.started = core.name, time.monotonic()
                core.inflight[job.relay_id] = job
                frames = job.payload
                send_frames(core.fw, [_retag(frames[0], job.relay_id), *frames[1:]])
                self._release(job)

    def on_fw(self, core: CoreLink, frames: list) -> None:
        core.liveness.heard(time.monotonic())
        if len(frames) < 2 or len(frames[0]) != wire.HEADER_SIZE:
            log.warning("%s: malformed reply from firmware dropped", core.name)
            return
        relay_id = _U64.unpack_from(frames[0], 8)[0]
        job = core.inflight.pop(relay_id, None)
        if job is None:
            if relay_id in self.fw_hellos:
                self._fw_greeted(self.fw_hellos.pop(relay_id), frames)
            else:
                self._cancel_answered(relay_id, frames)
            return
        self._forget(job)
        self.stats["completed"] += 1
        if not job.discard:
            queue_us = int((job.started - job.enqueued) * 1e6)
            header = _retag(frames[0], job.client_msg_id, 1 << core.index, queue_us)
            self.to_client(job.client, [header, *frames[1:]])
        self.dispatch()

    def _greet_fw(self, core: CoreLink) -> None:
        """Say HELLO as the relay on a newly opened firmware socket, before any task goes there:
        the firmware then trusts our ownership checks for the tasks we forward."""
        if core.fw is None or self.greeted.get(core.index) is core.fw:
            return
        self.greeted[core.index] = core.fw
        relay_id = next(self.ids)
        self.fw_hellos[relay_id] = core.name
        if len(self.fw_hellos) > 64:     # unanswered greetings of firmwares long gone
            del self.fw_hellos[next(iter(self.fw_hellos))]
        send_frames(core.fw, wire.encode(messages.hello(relay_id, "relay", pid=os.getpid(), name="dsp_relay_server")))

    def _fw_greeted(self, core_name: str, frames: list) -> None:
        if len(frames[0]) == wire.HEADER_SIZE and frames[0][3] == Command.ERROR:
            try:
                why = wire.unpack_body(bytes(frames[1])).get("message", "?")
            except errors.VdspError as exc:
                why = exc.message
            log.error("%s: the firmware refused the relay's HELLO (%s): tasks with buffers will be refused there",
                      core_name, why)

    def _cancel_answered(self, relay_id: int, frames: list) -> None:
        """The firmware's verdict on a CANCEL we forwarded: tell the client."""
        pending = self.cancels.pop(relay_id, None)
        if pending is None:
            log.warning("reply for unknown task %d dropped", relay_id)
            return
        identity, msg_id, _ = pending
        if identity is None:      # a cancel sent for a departed client
            return
        try:
            verdict = wire.unpack_body(bytes(frames[1])).get("state")
        except errors.VdspError:
            verdict = None
        state = "cancelled" if verdict == "cancelled" else "running"
        self.to_client(identity, wire.encode(messages.result(msg_id, {"state": state})))

    def on_ctl(self, core: CoreLink, frames: list) -> None:
        now = time.monotonic()
        core.liveness.heard(now)
        try:
            msg = messages.check_body(wire.decode(frames))
        except errors.VdspError as exc:
            log.warning("%s: malformed control message dropped: %s", core.name, exc)
            return
        if msg.command is Command.READY:
            was = core.state
            self.core_state(core, msg.body.get("state", "offline"), msg.body, "ready")
            if was in ("unknown", "dead"):
                log.info("%s: %s, firmware %s, %d operators", core.name, core.state,
                         core.firmware_version, len(core.operators))
            self.answer_hellos(now)
        elif msg.command is Command.EVENT:
            self.core_state(core, msg.body["state"], msg.body, msg.body.get("reason", ""))
            self._broadcast(frames)
        elif msg.command in (Command.RESULT, Command.ERROR):
            target = self.forwarded.pop(msg.msg_id, None)
            if target is not None:
                self.to_client(target[0], [_retag(frames[0], target[1]), *frames[1:]])

    def _broadcast(self, frames: list) -> None:
        for identity in list(self.clients):
            self.to_client(identity, frames)

    def core_state(self, core: CoreLink, state: str, body: dict, reason: str) -> None:
        """Apply a core's new state; a core that stops running fails its tasks."""
        if state != "running" and core.state == "running" or state == "dead":
            exc_cls = {"crashed": errors.CoreCrashed, "dead": errors.CoreDead}.get(state, errors.CoreOffline)
            self.fail_core(core, exc_cls(f"{core.name} {state} ({reason})" if reason else f"{core.name} {state}"))
        if state == "dead":
            core.close_fw()
            core.state = "dead"
            self._broadcast(wire.encode(messages.event(core.name, "dead", reason=reason)))
        else:
            core.apply(body, state)
            self._greet_fw(core)
        if not any(c.state == "running" for c in self.cores):
            self.fail_stranded()
        self.dispatch()

    def fail_stranded(self) -> None:
        """No core runs: tasks queued for ANY would wait for ever; fail them now."""
        jobs = self.sched.drain_any()
        if jobs:
            names = ", ".join(f"{c.name} {c.state}" for c in self.cores)
            log.warning("no core running (%s): failing %d queued task(s)", names, len(jobs))
        for job in jobs:
            self.fail(job, errors.CoreOffline(f"no core is running ({', '.join(f'{c.name} {c.state}' for c in self.cores)})"))

    def fail_core(self, core: CoreLink, exc: errors.VdspError) -> None:
        if isinstance(exc, errors.CoreDead):  # a silent core will not answer CONTROLs either
            for relay_id, (identity, msg_id, index) in list(self.forwarded.items()):
                if index == core.index:
                    del self.forwarded[relay_id]
                    self.to_client(identity, wire.encode(messages.error(msg_id, type(exc)(exc.message))))
        for relay_id, (identity, msg_id, index) in list(self.cancels.items()):
            if index == core.index:  # its task ends with the core; the result is discarded anyway
                del self.cancels[relay_id]
                if identity is not None:
                    self.to_client(identity, wire.encode(messages.result(msg_id, {"state": "running"})))
        jobs = list(core.inflight.values())
        core.inflight.clear()
        jobs += self.sched.drain_pinned(core.index)
        if jobs:
            log.warning("%s: failing %d task(s): %s", core.name, len(jobs), exc.message)
        for job in jobs:
            self.fail(job, type(exc)(exc.message))

    # --- loop -----------------------------------------------------------------------------
    def timers(self, now: float) -> None:
        for core in self.cores:
            core.maybe_hello(now, next(self.ids))
            if core.state not in ("unknown", "dead") and core.liveness.dead(now):
                log.error("%s: no heartbeat for %.1fs, declared dead", core.name, core.liveness.window)
                self.core_state(core, "dead", {}, "heartbeats lost")
            elif core.state not in ("unknown", "dead") and core.liveness.send_due(now):
                core.send_ctl(messages.heartbeat())
        beat = wire.encode(messages.heartbeat())
        for client in list(self.clients.values()):
            if client.liveness.dead(now):
                self.drop_client(client, "gone silent")
            elif client.liveness.send_due(now):
                self.to_client(client.identity, beat)
        self.answer_hellos(now)

    def _sync_fw_sockets(self) -> None:
        """Poll exactly the open firmware sockets (they open and close with core state)."""
        live = {c.fw: c for c in self.cores if c.fw is not None}
        for sock in [s for s in self.fw_socks if s not in live]:
            self.poller.unregister(sock)
        for sock in live:
            if sock not in self.fw_socks:
                self.poller.register(sock, zmq.POLLIN)
        self.fw_socks = live

    def run(self) -> None:
        log.info("Init relay server on %s", self.bind)
        next_reap = next_timers = 0.0
        ctl_socks = {c.ctl: c for c in self.cores}
        while self.running:
            for sock, _ in self.poller.poll(TICK_MS):
                if sock is self.front:
                    self._drain_front()
                elif sock in self.fw_socks:
                    core = self.fw_socks[sock]
                    self._drain(sock, lambda f, c=core: self.on_fw(c, f))
                elif sock in ctl_socks:
                    core = ctl_socks[sock]
                    self._drain(sock, lambda f, c=core: self.on_ctl(c, f))
            if any(self.fw_socks.get(c.fw) is not c for c in self.cores if c.fw is not None) \
                    or any(s.closed for s in self.fw_socks):
                self._sync_fw_sockets()
            now = time.monotonic()
            if now >= next_timers:
                self.timers(now)
                self._sync_fw_sockets()
                next_timers = now + TICK_MS / 1000
            if now >= next_reap:
                ddr.reap()
                next_reap = now + REAP_EVERY_S
        self.close()

    def _drain_front(self) -> None:
        front = self.front
        for _ in range(256):
            if not front.getsockopt(_EVENTS) & _POLLIN:
                return
            # The identity frame carries the peer's properties (its pid on ipc, its CURVE name on tcp).
            meta = front.recv(_NOBLOCK, copy=False)
            if not meta.more:
                continue
            frames = front.recv_multipart(_NOBLOCK)
            self.on_client(meta.bytes, frames, curve.peer_name(meta) if self.gate is not None else "", meta)

    @staticmethod
    def _drain(sock: zmq.Socket, handle) -> None:
        for _ in range(256):
            if sock.closed or not sock.getsockopt(_EVENTS) & _POLLIN:
                return
            handle(sock.recv_multipart(_NOBLOCK))

    def close(self) -> None:
        for job in list(self.jobs.values()):
            self.fail(job, errors.RelayUnavailable("relay server is shutting down"))
        for core in self.cores:
            core.send_ctl(messages.disconnect())
            core.close()
        self.front.close(0)
        if self.gate is not None:
            self.gate.stop()
        self.ctx.term()
        runtime.unlink_ipc(self.bind)

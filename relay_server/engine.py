"""The relay's conversation with its clients and cores, without sockets or a clock of its own.

Inputs (each with the time ``now``): a message from a client (:meth:`on_client`), from a
core's firmware link (:meth:`on_fw`) or control link (:meth:`on_ctl`), a clock tick
(:meth:`tick`), and a reply the adapter could not deliver (:meth:`reply_dropped`).
Outputs: :attr:`out`, a list the adapter carries out in order and then clears — the effects
of ``relay_server.effects``: ``ToClient``, ``ToCtl``, ``ToFw``, ``OpenFwLink`` and ``CloseFwLink``.

A TASK is scheduled by its fixed header (priority, core, custom_id, msg_id) and its body
is unpacked once, to check that every handle belongs to the owner the client proved in
its HELLO or lies within a grant (``ownership``): a body whose verdict cannot change (no
grant used) is remembered by its bytes and not unpacked again for that binding
(``ownership.PassedBodies``, PROTOCOL.md §6.6); the frames are forwarded unchanged but
for the msg_id (the relay's own on the way to the core, the client's on the way back). In
a RESULT/ERROR reply to a task the header's ``core`` is the core that ran it (a bit) and
``custom_id`` the microseconds the task waited in the queue.

What a client can make the relay hold is bounded: tasks in flight (``max_tasks_per_client``),
bytes of queued tasks per client and in all (``MAX_CLIENT_BYTES``, ``MAX_QUEUED_BYTES``:
CoreBusy beyond); the adapter bounds replies waiting for a client that does not read.

Each step of a task and each core state change is told to ``observer`` (``relay_server.observe``:
the ``stats`` QUERY's figures, and the injected trace and metrics sinks).
"""
from __future__ import annotations

import itertools
import logging

from protocol import errors, header, messages, wire
from protocol.cancel import CancelOutcome
from protocol.constants import HEARTBEAT_INTERVAL_MS, HUNG_AFTER_MS, LIVENESS, MAX_TASKS_PER_CLIENT, Command, Core
from protocol.core_state import CoreState, error_for
from protocol.liveness import Liveness, ProcFact
from relay_server.cores import CoreView
from relay_server.effects import CloseFwLink, Effect, OpenFwLink, ToClient, ToCtl, ToFw
from relay_server.observe import RelayObserver
from relay_server.scheduler import Job, Scheduler
from vdsp_board.observability.log import RateLimited
from vdsp_board.identity.ownership import PassedBodies

log = logging.getLogger("vdsp.relay")
_CORE_INDEX = {int(Core.ANY): None, int(Core.CORE_0): 0, int(Core.CORE_1): 1}  # header core -> index
MAX_CLIENT_BYTES = 256 << 20    # bytes of one client's tasks the relay holds (queued, not yet sent)
MAX_QUEUED_BYTES = 1 << 30      # the same, all clients together
DISCONNECT_RECHECK_S = 3.0       # after a client connection closed, exited clients are looked for this long
RECHECK_EVERY_S = 0.1            # ... this often
MAX_FW_HELLOS = 64              # our unanswered greetings of firmwares remembered
CANCEL_WAIT_S = 1.0             # a CANCEL forwarded to a firmware is answered `running` if it has not answered by then
# Tasks sent ahead to each core's firmware (--credit). 16, not 8: under a pipelined PING load the
# relay, SDK and firmwares then take replies and tasks in larger batches (CPU per task 1.37-1.54x
# the raw-pyzmq baseline vs 1.63-1.96x, tasks/s 0.56-0.63x vs 0.44-0.53x, runs alternated); the
# firmware keeps them in priority order, so a later priority-255 task still runs next.
CREDIT = 16


class ClientConn:
    __slots__ = ("identity", "owner", "pid", "kernel_pid", "name", "liveness", "jobs", "held_bytes", "dropped", "peer")

    def __init__(self, identity: bytes, now: float, heartbeat_ms: int, peer: str = "",
                 hung_ms: int = HUNG_AFTER_MS) -> None:
        self.identity = identity
        self.peer = peer       # "" on ipc; the CURVE name (admin:NAME / client:NAME) on tcp
        self.owner: int | None = None   # the DDR owner its HELLO proved (None: none proved)
        self.pid = self.held_bytes = self.dropped = 0
        self.kernel_pid: int | None = None     # its process, as the kernel told the adapter (ipc; 0: unknown)
        self.name = ""
        self.liveness = Liveness(now, heartbeat_ms, hung_ms)
        self.jobs: dict[int, Job] = {}  # client msg_id -> job, queued or running


def _size(frames: list) -> int:
    return sum(map(len, frames))


def _inflight_count(core: CoreView) -> int:
    return len(core.inflight)


class RelayEngine:
    """``ownership``: judge of HELLO claims and TASK handles (``vdsp_board.identity.ownership.Ownership``);
    ``admin_only_writes``: CONTROL writes need an admin peer (tcp); ``hung_ms``: silence after
    which a peer may be hung (``protocol.liveness``); ``facts(pid, now) -> ProcFact``: what the
    kernel says of a local peer's process (the adapter reads /proc; default: nothing known)."""

    def __init__(self, cores: dict[str, str], now: float, *, ownership, pid: int = 0,
                 heartbeat_ms: int = HEARTBEAT_INTERVAL_MS, hung_ms: int = HUNG_AFTER_MS, credit: int = CREDIT,
                 max_queued: int = 8192, max_tasks_per_client: int = MAX_TASKS_PER_CLIENT,
                 admin_only_writes: bool = False, is_admin=lambda peer: False,
                 observer: RelayObserver | None = None, facts=lambda pid, now: ProcFact.UNKNOWN) -> None:
        self.heartbeat_ms, self.hung_ms, self.credit, self.pid = heartbeat_ms, hung_ms, credit, pid
        self.facts = facts
        self.identity = ""    # how this relay proves its ipc clients (vdsp_board.identity.peerproof.describe; the adapter's)
        self._recheck_until = 0.0        # clients are looked at on ticks until then (a disconnect)
        self._next_recheck = 0.0
        self.max_tasks_per_client = max_tasks_per_client
        self.ownership, self.admin_only_writes, self.is_admin = ownership, admin_only_writes, is_admin
        self.started = now
        self.cores = [CoreView(i, name, ep, now, heartbeat_ms, hung_ms) for i, (name, ep) in enumerate(cores.items())]
        self.by_name = {c.name: c for c in self.cores}
        self.sched = Scheduler(len(self.cores), max_queued)
        self.clients: dict[bytes, ClientConn] = {}
        self.ids = itertools.count(1)
        self.jobs: dict[int, Job] = {}          # relay_id -> job (queued or running)
        self.forwarded: dict[int, tuple[bytes, int, int]] = {}  # relay_id -> (client, msg_id, core index)
        # relay_id of a CANCEL we forwarded -> (client to answer (None: nobody), its msg_id, core index,
        # relay_id of the task, when we answer `running` without the firmware's verdict)
        self.cancels: dict[int, tuple[bytes | None, int, int, int, float]] = {}
        self.fw_hellos: dict[int, str] = {}      # relay_id of our HELLO to a firmware -> core name
        self.pending_hello: list[tuple[bytes, int]] = []
        self.stats = {"submitted": 0, "completed": 0, "failed": 0, "rejected": 0, "dropped_replies": 0}
        self.held_bytes = 0                      # payload bytes of queued tasks, all clients
        self.warn = RateLimited(log)
        self.passed = PassedBodies()             # TASK bodies whose verdict cannot change (ownership)
        self.out: list[Effect] = []
        self.obs = observer if observer is not None else RelayObserver()
        self.obs.bind(self)

    # --- outputs --------------------------------------------------------------------------
    def to_client(self, identity: bytes, frames: list) -> None:
        self.out.append(ToClient(identity, frames))

    def _reply(self, identity: bytes, msg: wire.Message) -> None:
        self.out.append(ToClient(identity, wire.encode(msg)))

    def to_ctl(self, core: CoreView, msg: wire.Message) -> None:
        self.out.append(ToCtl(core.index, wire.encode(msg)))

    def reply_dropped(self, identity: bytes) -> None:
        """The adapter could not deliver a message to ``identity`` (it does not read)."""
        self.stats["dropped_replies"] += 1
        client = self.clients.get(identity)
        if client is not None:
            client.dropped += 1

    # --- jobs -----------------------------------------------------------------------------
    def fail(self, job: Job, exc: errors.VdspError, core: CoreView | None = None) -> None:
        """End ``job`` with an error sent to its client (unless released); ``core``: the core
        it was in flight at."""
        self._forget(job)
        self.stats["failed"] += 1
        self.obs.failed(job, exc, core)
        if not job.discard:
            self._reply(job.client, messages.error(job.client_msg_id, exc))

    def _forget(self, job: Job) -> None:
        self.jobs.pop(job.relay_id, None)
        self._release(job)
        client = self.clients.get(job.client)
        if client is not None:
            client.jobs.pop(job.client_msg_id, None)

    def _release(self, job: Job) -> None:
        """The relay no longer holds ``job``'s payload (sent to a core, or ended)."""
        if job.payload is not None:
            size = job.size
            self.held_bytes -= size
            client = self.clients.get(job.client)
            if client is not None:
                client.held_bytes -= size
            job.payload = None

    # --- client side ----------------------------------------------------------------------
    def on_client(self, identity: bytes, frames: list, now: float, peer: str = "", meta: object = None) -> None:
        """One message of client ``identity``; ``meta`` tells who sent it (a frame received with
        ``copy=False``: see ``ownership``), ``peer`` its CURVE name on tcp."""
        client = self.clients.get(identity)
        if client is None:
            client = self.clients[identity] = ClientConn(identity, now, self.heartbeat_ms, peer, self.hung_ms)
        client.liveness.last_heard = now     # Liveness.heard inline: no call into interpreted code per message
        try:
            wire.check_frames(frames)
            head = header.Header.parse(frames[0])
        except errors.VdspError as exc:
            msg_id = wire.peek_msg_id(frames)
            self.warn.warn(("bad", identity), "rejected message from client %s: %s", identity.hex(), exc)
            if msg_id:  # 0 = one-way message (heartbeat, event): nobody to answer
                self._reply(identity, messages.error(msg_id, exc))
            return
        if head.command is Command.TASK:
            self.submit(client, frames, head, now)
        elif head.command is not Command.HEARTBEAT:
            self.on_client_request(client, frames, head, now, meta)

    def submit(self, client: ClientConn, frames: list, head: header.Header, now: float) -> None:
        size = _size(frames)
        exc = self._refusal(client, frames, head, size)
        if exc is not None:
            self.stats["rejected"] += 1
            self.obs.rejected(client, head, exc, now)
            self._reply(client.identity, messages.error(head.msg_id, exc))
            return
        msg_id = head.msg_id
        job = Job(next(self.ids), client.identity, msg_id, head.priority, head.custom_id, _CORE_INDEX[head.core],
                  frames, now)
        job.op, job.size = head.op, size
        client.held_bytes += size
        self.held_bytes += size
        client.jobs[msg_id] = job
        self.jobs[job.relay_id] = job
        self.sched.push(job)
        self.stats["submitted"] += 1
        self.obs.enqueued(job, client, head.op, size, now)
        self.dispatch(now)

    def _refusal(self, client: ClientConn, frames: list, head: header.Header, size: int) -> errors.VdspError | None:
        """Why the relay refuses this TASK, or None: every check, for every task."""
        msg_id, core = head.msg_id, head.core
        if core not in _CORE_INDEX or (core and (_CORE_INDEX[core] or 0) >= len(self.cores)):
            return errors.InvalidCore(f"core {core} is not ANY (0), CORE_0 (1) or CORE_1 (2) of this SoC")
        raw, owner = frames[1], client.owner
        if not self.passed.known(owner, raw):
            try:    # the body once: well-formed handles, each the client's own or granted to it
                body = wire.unpack_body(raw)
                messages.check_task_body(body)
                self.ownership.check_task(owner, body)
            except errors.VdspError as exc:
                return exc
            self.passed.remember(owner, raw, body)
        if msg_id in client.jobs:
            return errors.InvalidArgument(f"msg_id {msg_id} is already in flight for this client")
        if len(client.jobs) >= self.max_tasks_per_client:
            return errors.TaskNumExceedLimit(
                f"{len(client.jobs)} tasks already in flight for this client (limit {self.max_tasks_per_client})")
        index = _CORE_INDEX[core]
        usable = self.cores if index is None else (self.cores[index],)
        for c in usable:
            if c.state is CoreState.RUNNING:
                break
        else:
            if index is not None:
                return error_for(usable[0].state, usable[0].name)
            names = ", ".join(f"{c.name} {c.state.value}" for c in self.cores)
            return errors.CoreOffline(f"no running core for this task ({names})")
        if self.sched.full():
            return errors.CoreBusy(f"relay queue is full ({self.sched.max_queued} tasks); retry later")
        if client.held_bytes + size > MAX_CLIENT_BYTES or self.held_bytes + size > MAX_QUEUED_BYTES:
            return errors.CoreBusy(
                f"relay holds {client.held_bytes} bytes of this client's queued tasks and {self.held_bytes} in all "
                f"(limits {MAX_CLIENT_BYTES} and {MAX_QUEUED_BYTES}); retry later")
        return None

    def on_client_request(self, client: ClientConn, frames: list, head: header.Header, now: float,
                          meta: object = None) -> None:
        msg_id = head.msg_id
        try:
            msg = messages.check_body(wire.decode(frames))
        except errors.VdspError as exc:
            self._reply(client.identity, messages.error(msg_id, exc))
            return
        body, cmd = msg.body, head.command
        if cmd is Command.HELLO:
            client.pid, client.name = body.get("pid", 0), body.get("name", "")
            try:
                client.owner = self.ownership.claim(body, meta, client.peer)
            except errors.ClaimRefused as exc:
                client.owner = None
                self._reply(client.identity, messages.error(msg_id, exc))
                return
            self.pending_hello.append((client.identity, msg_id))
            self.answer_hellos(now)
        elif cmd is Command.CANCEL:
            self.cancel(client, msg_id, body["target"], now)
        elif cmd is Command.QUERY:
            try:
                reply = messages.result(msg_id, self.query(body["what"], now))
            except errors.VdspError as exc:
                reply = messages.error(msg_id, exc)
            self._reply(client.identity, reply)
        elif cmd is Command.CONTROL:
            self.control(client, msg)
        elif cmd is Command.DISCONNECT:
            self.drop_client(client, "disconnected")
        else:
            refused = errors.ApiUseError(f"the relay does not accept {cmd.name} from clients")
            self._reply(client.identity, messages.error(msg_id, refused))

    def control(self, client: ClientConn, msg: wire.Message) -> None:
        """Forward a CONTROL to its core; the answer comes back through :meth:`on_ctl`."""
        body = msg.body
        core = self.by_name.get(body["core"])
        if core is None:
            exc: errors.VdspError = errors.InvalidCore(f"no core named {body['core']!r}; cores: {', '.join(self.by_name)}")
            return self._reply(client.identity, messages.error(msg.msg_id, exc))
        if body.get("value") is not None and self.admin_only_writes and not self.is_admin(client.peer):
            exc = errors.RemoteprocDenied(f"writing {body.get('attr')!r} of {body['core']} needs an admin key "
                                          f"over tcp (this peer is {client.peer or 'unnamed'})")
            return self._reply(client.identity, messages.error(msg.msg_id, exc))
        relay_id = next(self.ids)
        self.forwarded[relay_id] = (client.identity, msg.msg_id, core.index)
        msg.msg_id = relay_id
        self.to_ctl(core, msg)

    def cancel(self, client: ClientConn, msg_id: int, target: int, now: float) -> None:
        """Release a task: queued here -> removed; sent ahead to a firmware -> ask it to drop
        the task if it has not started (the firmware's answer settles the reply, or `running`
        CANCEL_WAIT_S later without it); running -> its result is discarded."""
        job = client.jobs.get(target)
        if job is None:
            outcome = CancelOutcome.UNKNOWN
        elif self.sched.remove(job):
            self._forget(job)
            self.obs.cancelled(job)
            outcome = CancelOutcome.CANCELLED
        else:
            job.discard = True
            core = next((c for c in self.cores if job.relay_id in c.inflight), None)
            asked = any(c[3] == job.relay_id for c in self.cancels.values())   # one question per task
            if core is not None and core.fw_open and not asked:
                self._cancel_at_fw(core, job, client.identity, msg_id, now + CANCEL_WAIT_S)
                return
            outcome = CancelOutcome.RUNNING
        self._reply(client.identity, messages.result(msg_id, {"state": outcome.value, "target": target}))

    def _cancel_at_fw(self, core: CoreView, job: Job, identity: bytes | None, msg_id: int,
                      due: float = float("inf")) -> None:
        relay_id = next(self.ids)
        self.cancels[relay_id] = (identity, msg_id, core.index, job.relay_id, due)
        self.out.append(ToFw(core.index, wire.encode(messages.cancel(relay_id, job.relay_id))))

    def drop_client(self, client: ClientConn, why: str) -> None:
        """Forget a departed client: its queued tasks never run, tasks sent ahead to a firmware
        are cancelled there if they have not started, running ones finish unseen."""
        dropped = cancelled = 0
        busy = bool(client.jobs or client.dropped)    # a client that only asked questions departs quietly
        for job in list(client.jobs.values()):
            job.discard = True
            if self.sched.remove(job):
                self._forget(job)
                self.obs.cancelled(job)
                dropped += 1
                continue
            core = next((c for c in self.cores if job.relay_id in c.inflight), None)
            if core is not None and core.fw_open:
                self._cancel_at_fw(core, job, None, 0)     # nobody to tell the outcome
                cancelled += 1
        self.sched.forget_client(client.identity)
        self.clients.pop(client.identity, None)
        self.obs.forget_client(client.identity)
        log.log(logging.INFO if busy else logging.DEBUG,
                "client %s (pid %d) %s: %d queued task(s) dropped, %d sent ahead cancelled, %d running "
                 "discarded%s", client.identity.hex(), client.pid, why, dropped, cancelled,
                 len(client.jobs) - dropped, f"; {client.dropped} replies it did not read were dropped"
                 if client.dropped else "")

    def answer_hellos(self, now: float) -> None:
        """READY once every core has answered (or the liveness window passed)."""
        if not self.pending_hello:
            return
        known = all(c.state is not CoreState.UNKNOWN for c in self.cores)
        if not known and now - self.started <= LIVENESS * self.heartbeat_ms / 1000:
            return
        running = any(c.state is CoreState.RUNNING for c in self.cores)
        body = {"cores": [c.describe() for c in self.cores], "heartbeat_ms": self.heartbeat_ms,
                "hung_ms": self.hung_ms, "pid": self.pid, "state": "running" if running else "offline"}
        for identity, msg_id in self.pending_hello:
            self._reply(identity, messages.ready(msg_id, "dsp_relay_server", "relay", **body))
        self.pending_hello.clear()

    def query(self, what: str, now: float | None = None) -> dict:
        if what == "cores":
            return {"cores": [c.describe() for c in self.cores], "identity": self.identity}
        if what == "stats":
            return {**self.stats, "queued": self.sched.queued, "clients": len(self.clients),
                    "queued_bytes": self.held_bytes,
                    "inflight": {c.name: len(c.inflight) for c in self.cores}, "pid": self.pid,
                    **self.obs.stats(self.obs.now if now is None else now)}
        raise errors.InvalidArgument(f"unknown query {what!r}; the relay answers 'cores' and 'stats'")

    # --- core side ------------------------------------------------------------------------
    def dispatch(self, now: float) -> None:
        """Fill every running core up to its credit, least-loaded core first."""
        sched = self.sched
        if not sched.queued:
            return
        cores, credit, running = self.cores, self.credit, CoreState.RUNNING
        for core in cores:      # the common case under load: every core is full
            if len(core.inflight) < credit and core.fw_open and core.state is running:
                break
        else:
            return
        if len(cores) == 2:
            if len(cores[1].inflight) < len(cores[0].inflight):
                cores = cores[::-1]
        elif len(cores) > 2:
            cores = sorted(cores, key=_inflight_count)
        out = self.out
        for core in cores:
            if core.state is not running or not core.fw_open:
                continue
            inflight = core.inflight
            while len(inflight) < credit:
                job = sched.pop_for(core.index)
                if job is None:
                    break           # nothing queued this core may take (others may have pinned tasks)
                job.core_name, job.started = core.name, now
                inflight[job.relay_id] = job
                frames = job.payload
                out.append(ToFw(core.index, [header.retag(frames[0], job.relay_id), *frames[1:]]))
                self._release(job)
                self.obs.dispatched(job, core, now)
            if not sched.queued:
                return

    def on_fw(self, index: int, frames: list, now: float) -> None:
        core = self.cores[index]
        core.liveness.last_heard = now       # Liveness.heard inline (as in on_client)
        relay_id = header.msg_id_of(frames[0]) if len(frames) >= 2 else None
        if relay_id is None:
            log.warning("%s: malformed reply from firmware dropped", core.name)
            return
        job = core.inflight.pop(relay_id, None)
        if job is None:
            if relay_id in self.fw_hellos:
                self._fw_greeted(self.fw_hellos.pop(relay_id), core, frames)
            else:
                self._cancel_answered(relay_id, frames)
            return
        self._forget(job)
        self.stats["completed"] += 1
        self.obs.replied(job, core, frames, now)
        if not job.discard:
            queue_us = int((job.started - job.enqueued) * 1e6)
            head = header.retag(frames[0], job.client_msg_id, core=1 << core.index, custom_id=queue_us)
            self.to_client(job.client, [head, *frames[1:]])
        self.dispatch(now)

    def _greet_fw(self, core: CoreView) -> None:
        """Say HELLO as the relay on a newly opened firmware link, before any task goes there:
        the firmware then trusts our ownership checks for the tasks we forward."""
        if not core.fw_open or core.greeted == core.fw_generation:
            return
        core.greeted = core.fw_generation
        relay_id = next(self.ids)
        self.fw_hellos[relay_id] = core.name
        if len(self.fw_hellos) > MAX_FW_HELLOS:     # unanswered greetings of firmwares long gone
            del self.fw_hellos[next(iter(self.fw_hellos))]
        self.out.append(ToFw(core.index, wire.encode(
            messages.hello(relay_id, "relay", pid=self.pid, name="dsp_relay_server"))))

    def _fw_greeted(self, core_name: str, core: CoreView, frames: list) -> None:
        """The firmware's answer to our HELLO (on ``core``'s open link: an old link's socket is
        closed, so no answer to an older HELLO comes here)."""
        if header.command_of(frames[0]) == Command.ERROR:
            try:
                body = wire.unpack_body(bytes(frames[1]))
                why, code = str(body.get("message", "?")), body.get("code")
            except errors.VdspError as exc:
                why, code = exc.message, None
            if code == errors.CoreBusy.code:     # it verifies many HELLOs now: ours again at the next tick
                if core.name == core_name:
                    core.greeted = 0
                self.warn.warn(("fw-busy", core_name), "%s: the firmware answered the relay's HELLO: %s; saying it "
                               "again", core_name, why)
                return
            log.error("%s: the firmware refused the relay's HELLO (%s): tasks with buffers will be refused there",
                      core_name, why)
            if core.name == core_name:
                core.fw_answered(why)
        elif core.name == core_name:
            core.fw_answered(None)

    def _cancel_answered(self, relay_id: int, frames: list) -> None:
        """The firmware's verdict on a CANCEL we forwarded: tell the client. ``unknown`` there
        means the task no longer waits in the firmware: it runs (its result is discarded)."""
        pending = self.cancels.pop(relay_id, None)
        if pending is None:
            log.warning("reply for unknown task %d dropped", relay_id)
            return
        identity, msg_id = pending[0], pending[1]
        if identity is None:      # a cancel sent for a departed client, or answered at its deadline
            return
        try:
            verdict = CancelOutcome.of(wire.unpack_body(bytes(frames[1])).get("state"))
        except errors.VdspError:
            verdict = CancelOutcome.RUNNING
        outcome = CancelOutcome.CANCELLED if verdict is CancelOutcome.CANCELLED else CancelOutcome.RUNNING
        self._reply(identity, messages.result(msg_id, {"state": outcome.value}))

    def on_ctl(self, index: int, frames: list, now: float) -> None:
        core = self.cores[index]
        core.liveness.heard(now)
        try:
            msg = messages.check_body(wire.decode(frames))
        except errors.VdspError as exc:
            log.warning("%s: malformed control message dropped: %s", core.name, exc)
            return
        if msg.command is Command.READY:
            was = core.state
            self.core_state(core, CoreState.of(msg.body.get("state", "offline")), msg.body, "ready", now)
            if was in (CoreState.UNKNOWN, CoreState.DEAD):
                if core.firmware_version:
                    log.info("%s: %s, firmware %s, %d operators", core.name, core.state.value,
                             core.firmware_version, len(core.operators))
                else:    # still booting its firmware: "Connect to vdsp coreN success!" follows
                    log.info("%s: %s, no firmware running yet", core.name, core.state.value)
            self.answer_hellos(now)
        elif msg.command is Command.EVENT:
            self.core_state(core, CoreState.of(msg.body["state"]), msg.body, msg.body.get("reason", ""), now)
            self._broadcast(frames)
        elif msg.command in (Command.RESULT, Command.ERROR):
            target = self.forwarded.pop(msg.msg_id, None)
            if target is not None:
                self.to_client(target[0], [header.retag(frames[0], target[1]), *frames[1:]])

    def _broadcast(self, frames: list) -> None:
        for identity in list(self.clients):
            self.to_client(identity, frames)

    def core_state(self, core: CoreView, state: CoreState, body: dict, reason: str, now: float) -> None:
        """Apply a core's new state; a core that stops running fails its tasks, and so does a core
        process or firmware that was replaced without our noticing (their tasks died with them)."""
        if state is not core.state or reason not in ("ready", ""):
            self.obs.core_state(core, state, reason, now)
        if core.restarted(body):
            self.fail_core(core, errors.CoreDead(f"{core.name} restarted (core process {core.pid}); "
                                                 "its tasks in flight died with the previous one"))
            self._close_fw(core)    # a new firmware: open the link afresh and say HELLO there first
        elif core.fw_open and state is CoreState.RUNNING and body.get("fw_pid") not in (None, core.fw_pid):
            self.fail_core(core, errors.CoreCrashed(f"{core.name}: its firmware was replaced (pid {body['fw_pid']})"))
            self._close_fw(core)
        if state is not CoreState.RUNNING and core.state is CoreState.RUNNING or state is CoreState.DEAD:
            self.fail_core(core, error_for(state, core.name, reason))
        if state is CoreState.DEAD:
            self._close_fw(core)
            core.state, core.reason = CoreState.DEAD, reason
            self._broadcast(wire.encode(messages.event(core.name, "dead", reason=reason)))
        else:
            endpoint = core.apply(body, state)
            if state is CoreState.RUNNING and (not core.fw_open or endpoint != core.fw_endpoint
                                               or core.announced_key != core.fw_key):
                self._close_fw(core)
                core.open_fw(endpoint)
                self.out.append(OpenFwLink(core.index, endpoint))
                log.info("Connect to vdsp core%d success!", core.index)
            elif state is not CoreState.RUNNING:
                self._close_fw(core)
            self._greet_fw(core)
        if not any(c.state is CoreState.RUNNING for c in self.cores):
            self.fail_stranded()
        self.dispatch(now)

    def _close_fw(self, core: CoreView) -> None:
        """Close the firmware link with linger 0: no stale task can reach a restarted firmware."""
        if core.fw_open:
            core.fw_open = False
            self.out.append(CloseFwLink(core.index))

    def fw_link_stuck(self, index: int, now: float) -> None:
        """A message for core ``index``'s firmware could not be queued on its link: that link has no
        connection that takes messages (libzmq ended it when the firmware denied our CURVE key, and
        does not connect again; an ipc link is connected once, and its attempt failed or its
        connection closed: ``vdsp_board.sockets.ipclink``), or a full queue. What was sent ahead there will not arrive: those
        tasks fail (HB_DSP_CORE_OFFLINE), and the link is opened afresh and greeted again, so that
        the next tasks try a new connection instead of waiting behind a dead one."""
        core = self.cores[index]
        if not core.fw_open:
            return
        endpoint = core.fw_endpoint
        log.error("%s: its firmware link at %s takes no messages: failing its tasks, connecting again",
                  core.name, endpoint)
        self.fail_core(core, errors.CoreOffline(
            f"{core.name}: the link to its firmware at {endpoint} takes no messages (did the firmware refuse "
            "the relay's key?); the relay connects again"))
        self._close_fw(core)
        if core.state is CoreState.RUNNING and endpoint is not None:
            core.open_fw(endpoint)
            self.out.append(OpenFwLink(core.index, endpoint))
            self._greet_fw(core)
        self.dispatch(now)

    def fail_stranded(self) -> None:
        """No core runs: tasks queued for ANY would wait for ever; fail them now."""
        jobs = self.sched.drain_any()
        names = ", ".join(f"{c.name} {c.state.value}" for c in self.cores)
        if jobs:
            log.warning("no core running (%s): failing %d queued task(s)", names, len(jobs))
        for job in jobs:
            self.fail(job, errors.CoreOffline(f"no core is running ({names})"))

    def fail_core(self, core: CoreView, exc: errors.VdspError) -> None:
        if isinstance(exc, errors.CoreDead):  # a silent core will not answer CONTROLs either
            for relay_id, (identity, msg_id, index) in list(self.forwarded.items()):
                if index == core.index:
                    del self.forwarded[relay_id]
                    self._reply(identity, messages.error(msg_id, type(exc)(exc.message)))
        for relay_id, (asker, msg_id, index, _, _) in list(self.cancels.items()):
            if index == core.index:  # its task ends with the core; the result is discarded anyway
                del self.cancels[relay_id]
                if asker is not None:
                    self._reply(asker, messages.result(msg_id, {"state": CancelOutcome.RUNNING.value}))
        running = list(core.inflight.values())
        core.inflight.clear()
        jobs = running + self.sched.drain_pinned(core.index)
        if jobs:
            log.warning("%s: failing %d task(s): %s", core.name, len(jobs), exc.message)
        for i, job in enumerate(jobs):
            self.fail(job, type(exc)(exc.message), core if i < len(running) else None)

    def ctl_lost(self, index: int, now: float) -> None:
        """The control connection to a core closed: its process exited (a core closes that socket
        only when it ends), a kernel fact. The core is dead now: its tasks fail with
        ``HB_DSP_CORE_DEAD`` at once. Say HELLO at once too; it goes out when the link (over ipc a
        new one, which the server made first) connects, so a restarted core knows us at once."""
        core = self.cores[index]
        if core.state not in (CoreState.UNKNOWN, CoreState.DEAD):
            pid = f" (pid {core.pid})" if core.pid else ""
            log.error("%s: core process%s gone: its control connection closed", core.name, pid)
            self.core_state(core, CoreState.DEAD, {}, f"core process{pid} exited: connection closed", now)
        self.to_ctl(core, messages.hello(next(self.ids), "relay", name="dsp_relay_server"))

    def ctl_relinked(self, index: int) -> None:
        """A new control link to core ``index`` (the last one's ipc connection attempt failed or its
        connection closed; ``vdsp_board.sockets.ipclink``): say HELLO on it, which goes out once it connects."""
        self.to_ctl(self.cores[index], messages.hello(next(self.ids), "relay", name="dsp_relay_server"))

    def client_disconnected(self, now: float) -> None:
        """Some client connection closed (the socket does not say whose): drop at once every
        client whose process, as the kernel named it at connect, has exited. A process closes its
        sockets before it becomes a zombie, so the clients are looked at again on each tick for
        DISCONNECT_RECHECK_S more."""
        self._recheck_until = now + DISCONNECT_RECHECK_S
        self._drop_exited_clients(now)

    def _drop_exited_clients(self, now: float) -> None:
        looked: dict[int, ProcFact] = {}
        for client in list(self.clients.values()):
            if client.kernel_pid and self._client_fact(client.kernel_pid, now, looked) is ProcFact.GONE:
                self.drop_client(client, f"disconnected (process {client.kernel_pid} exited)")

    def _client_fact(self, pid: int | None, now: float, looked: dict[int, ProcFact]) -> ProcFact:
        """What the kernel says of a client's process, looked up once per sweep (``looked``): one
        process may hold many connections (a flood held 1,024, and a sweep read its /proc entry for each)."""
        if not pid:
            return ProcFact.UNKNOWN
        fact = looked.get(pid)
        if fact is None:
            fact = looked[pid] = self.facts(pid, now)
        return fact

    def _fact(self, pid: int | None, local: bool, now: float) -> ProcFact:
        return self.facts(pid, now) if local and pid else ProcFact.UNKNOWN

    # --- time -----------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Heartbeats out, HELLO retries to silent cores, hung peers declared dead (silent past
        ``hung_ms`` and, where the kernel shows their process, not progressing), CANCELs a
        firmware has not answered within CANCEL_WAIT_S answered `running`."""
        for relay_id, (asker, msg_id, index, target, due) in list(self.cancels.items()) if self.cancels else ():
            if now >= due:      # the firmware has not answered in time: it may run the task (discarded)
                self.cancels[relay_id] = (None, 0, index, target, float("inf"))
                if asker is not None:
                    self._reply(asker, messages.result(msg_id, {"state": CancelOutcome.RUNNING.value}))
        if now < self._recheck_until and now >= self._next_recheck:
            self._next_recheck = now + RECHECK_EVERY_S
            self._drop_exited_clients(now)
        for core in self.cores:
            if core.hello_due(now):
                self.to_ctl(core, messages.hello(next(self.ids), "relay", name="dsp_relay_server"))
            self._greet_fw(core)        # again, if its firmware answered our HELLO HB_DSP_BUSY
            if core.state in (CoreState.UNKNOWN, CoreState.DEAD):
                continue
            live = core.liveness
            fact = self._fact(core.pid, core.endpoint.startswith("ipc://"), now) if live.overdue(now) else None
            if fact is not None and live.hung(now, fact):
                why = f"hung: silent for {live.silent(now):.1f} s (process {fact.value})"
                log.error("%s: %s, declared dead", core.name, why)
                self.core_state(core, CoreState.DEAD, {}, why, now)
            elif live.send_due(now):
                self.to_ctl(core, messages.heartbeat())
        beat = wire.encode(messages.heartbeat())
        looked: dict[int, ProcFact] = {}
        for client in list(self.clients.values()):
            live = client.liveness
            if live.overdue(now) and live.hung(now, self._client_fact(client.kernel_pid, now, looked)):
                self.drop_client(client, f"gone silent for {live.silent(now):.1f} s")
            elif live.send_due(now):
                self.to_client(client.identity, beat)
        self.answer_hellos(now)

    def shutdown(self) -> None:
        """Fail every task (the relay is going away) and say DISCONNECT to each core."""
        for job in list(self.jobs.values()):
            self.fail(job, errors.RelayUnavailable("relay server is shutting down"))
        for core in self.cores:
            self.to_ctl(core, messages.disconnect())

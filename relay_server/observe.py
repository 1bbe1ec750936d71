"""What the relay engine tells about its tasks and cores, for ``vdsp top``, traces and metrics.

The engine calls one :class:`RelayObserver` at each step of a task (``enqueued``,
``dispatched``, ``replied``, ``failed``, ``rejected``, ``cancelled``) and at each change of
a core's state, with its clock ``now``. The observer keeps the figures of the ``stats``
QUERY (always: a few dict and deque operations per task), and passes each step on to the
trace recorder while tracing is on (an injected sink: see ``vdsp_board.observability.trace``) and to a
metrics sink if one is attached (``relay_server.metrics``). No sockets, files or clock here.
Compiled with the engine (``vdsp_sim.native_build.MODULES``): its steps are native calls there,
so nothing may patch its names.
"""
from __future__ import annotations

import collections
from typing import Any

from protocol import errors, header, wire
from protocol.constants import Command
from vdsp_board.observability.trace import NullRecorder

SAMPLES = 512          # latencies kept per operator for p50/p99 (the most recent ones)
TOP_CLIENTS = 8


def priority_class(priority: int) -> str:
    """The class a priority falls in (the loadtest's names): preempt 255, high >=128, normal >=64, low."""
    if priority >= 255:
        return "preempt"
    if priority >= 128:
        return "high"
    if priority >= 64:
        return "normal"
    return "low"


_ERROR = int(Command.ERROR)


def reply_code(frames: list) -> int:
    """0 for a RESULT, the error code of an ERROR reply (unpacked only then)."""
    if header.command_of(frames[0]) != _ERROR:
        return 0
    try:
        return int(wire.unpack_body(bytes(frames[1])).get("code", errors.OperatorFailed.code))
    except (errors.VdspError, TypeError, ValueError, IndexError):
        return errors.OperatorFailed.code


class CoreUse:
    """Time a core had tasks at its firmware (busy), from the moments its in-flight count
    left and reached zero."""

    __slots__ = ("busy_s", "since")

    def __init__(self) -> None:
        self.busy_s = 0.0
        self.since: float | None = None

    def busy_until(self, now: float) -> float:
        return self.busy_s + (now - self.since if self.since is not None else 0.0)


class RelayObserver:
    def __init__(self, trace=None, metrics=None) -> None:
        self.trace = trace if trace is not None else NullRecorder()
        self.metrics = metrics
        self.engine: Any = None     # the RelayEngine it observes (set by the engine)
        self.now = 0.0
        self.latency: dict[int, collections.deque] = {}      # op -> recent submit-to-reply seconds
        self.done_by_op: collections.Counter = collections.Counter()
        self.failed_by_op: collections.Counter = collections.Counter()
        self.failed_by_code: collections.Counter = collections.Counter()
        self.by_client: dict[bytes, list] = {}               # identity -> [name, pid, submitted, done]
        self.use: dict[int, CoreUse] = {}

    def bind(self, engine) -> None:
        self.engine = engine
        self.use = {c.index: CoreUse() for c in engine.cores}

    # --- the trace's counters ---------------------------------------------------------------
    def _inflight(self) -> tuple:
        return tuple([len(c.inflight) for c in self.engine.cores])

    # --- steps of a task ----------------------------------------------------------------------
    def enqueued(self, job, client, op: int, size: int, now: float) -> None:
        self.now = now
        entry = self.by_client.get(client.identity)
        if entry is None:
            entry = self.by_client[client.identity] = [client.name or f"pid{client.pid}", client.pid, 0, 0]
        entry[2] += 1
        if self.trace.on:
            self.trace.emit("enq", (job.relay_id, job.client_msg_id, client.pid, client.owner, op, job.priority,
                                    job.custom_id, job.core, size, self.engine.sched.queued, self._inflight()))
        if self.metrics is not None:
            self.metrics.enqueued(job, op)

    def dispatched(self, job, core, now: float) -> None:
        self.now = now
        if len(core.inflight) == 1:
            self.use[core.index].since = now
        if self.trace.on:
            self.trace.emit("disp", (job.relay_id, core.name, self.engine.sched.queued, self._inflight()))

    def _core_idle(self, core, now: float) -> None:
        use = self.use.get(core.index)
        if use is not None and not core.inflight and use.since is not None:
            use.busy_s += now - use.since
            use.since = None

    def replied(self, job, core, frames: list, now: float) -> None:
        """The firmware answered ``job`` (RESULT or ERROR); ``core.inflight`` no longer holds it."""
        self.now = now
        if not core.inflight:
            self._core_idle(core, now)
        op = job.op
        samples = self.latency.get(op)
        if samples is None:
            samples = self.latency[op] = collections.deque(maxlen=SAMPLES)
        samples.append(now - job.enqueued)
        entry = self.by_client.get(job.client)
        if entry is not None:
            entry[3] += 1
        code = 0 if header.command_of(frames[0]) != _ERROR else reply_code(frames)     # a RESULT: no call
        if code:
            self.failed_by_op[op] += 1
            self.failed_by_code[code] += 1
        else:
            self.done_by_op[op] += 1
        if self.trace.on:
            self.trace.emit("reply", (job.relay_id, core.name, code, self.engine.sched.queued, self._inflight()))
        if self.metrics is not None:
            self.metrics.finished(job, core.name, code, now - job.enqueued, job.started - job.enqueued)

    def failed(self, job, exc: errors.VdspError, core=None) -> None:
        """The relay ended ``job`` with ``exc`` (its core stopped, the relay shuts down...)."""
        if core is not None:
            self._core_idle(core, self.now)
        self.failed_by_op[job.op] += 1
        self.failed_by_code[exc.code] += 1
        if self.trace.on:
            self.trace.emit("fail", {"rid": job.relay_id, "code": exc.code, "core": job.core_name,
                                     "q": self.engine.sched.queued, "fl": self._inflight()})
        if self.metrics is not None:
            self.metrics.finished(job, job.core_name or "none", exc.code, None, None)

    def rejected(self, client, head, exc: errors.VdspError, now: float) -> None:
        """A TASK refused before it was queued."""
        self.now = now
        self.failed_by_code[exc.code] += 1
        if self.trace.on:
            self.trace.emit("reject", {"cid": head.msg_id, "cpid": client.pid, "owner": client.owner,
                                       "op": head.op, "code": exc.code})
        if self.metrics is not None:
            self.metrics.rejected_task(head, exc.code)

    def cancelled(self, job) -> None:
        """A queued task removed (released, or its client left)."""
        if self.trace.on:
            self.trace.emit("cancel", {"rid": job.relay_id, "q": self.engine.sched.queued, "fl": self._inflight()})

    def core_state(self, core, state, reason: str, now: float) -> None:
        self.now = now
        if self.trace.on:
            self.trace.emit("core", {"core": core.name, "state": state.value, "reason": reason})
        if self.metrics is not None:
            self.metrics.core_state(core.name, state.value, reason)

    # --- the stats QUERY ------------------------------------------------------------------------
    def stats(self, now: float) -> dict:
        """Figures for ``vdsp top`` (plain msgpack-able types)."""
        e = self.engine
        ops = {}
        names = {}
        for core in e.cores:
            for o in core.operators or ():
                if isinstance(o, dict) and "id" in o:
                    names[o["id"]] = o.get("name", "")
        for op in set(self.latency) | set(self.done_by_op) | set(self.failed_by_op):
            lat = sorted(self.latency.get(op, ()))
            ops[f"0x{op:04x}"] = {
                "name": names.get(op, ""), "completed": self.done_by_op[op], "failed": self.failed_by_op[op],
                "p50_us": lat[len(lat) // 2] * 1e6 if lat else None,
                "p99_us": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e6 if lat else None}
        waiting: collections.Counter = collections.Counter()
        for job in e.jobs.values():
            if job.state == "queued":
                waiting[priority_class(job.priority)] += 1
        clients = sorted(self.by_client.items(), key=lambda kv: -kv[1][2])[:TOP_CLIENTS]
        live = {c.identity: c for c in e.clients.values()}
        return {
            "uptime_s": now - e.started,
            "cores": [{"name": c.name, "state": c.state.value, "inflight": len(c.inflight),
                       "crash_count": c.crash_count, "firmware_version": c.firmware_version,
                       "busy_s": self.use[c.index].busy_until(now) if c.index in self.use else 0.0}
                      for c in e.cores],
            "queue_by_class": dict(waiting),
            "operators": ops,
            "failed_by_code": {str(k): v for k, v in self.failed_by_code.items()},
            "top_clients": [{"name": v[0], "pid": v[1], "submitted": v[2], "completed": v[3],
                         "inflight": len(live[k].jobs) if k in live else 0, "connected": k in live}
                        for k, v in clients],
        }

    def forget_client(self, identity: bytes) -> None:
        """Keep at most a bounded number of departed clients' figures."""
        if len(self.by_client) > 4 * TOP_CLIENTS + 64:
            live = set(self.engine.clients)
            for key in [k for k in self.by_client if k not in live][:len(self.by_client) // 2]:
                del self.by_client[key]

"""Prometheus metrics of the relay (``dsp_relay_server --metrics-port PORT``; off by default).

The engine's observer (``relay_server.observe``) calls :class:`RelayMetrics` at each step of
a task and at each core state change; gauges are refreshed from the engine by the relay's
loop (:meth:`RelayMetrics.refresh`, once a second, in the loop's thread: the HTTP thread of
``prometheus_client`` never reads the engine); the DDR figures are read from the DDR
directory when ``/metrics`` is scraped. The names are listed in docs/observability.md.
"""
from __future__ import annotations

import collections
import os
import re

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import GaugeMetricFamily

from protocol import errors
from relay_server.observe import priority_class
from vdsp_sim.board import ddr

LATENCY_BUCKETS = (50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 20e-3, 50e-3, 0.1, 0.2, 0.5, 1.0,
                   2.0, 5.0, 10.0)
CORE_STATES = ("unknown", "offline", "booting", "running", "crashed", "dead")
_SEG = re.compile(r"vdsp-([0-9a-f]{6})-[0-9a-f]{10}$")
_REQUESTED = {None: "any", 0: "core0", 1: "core1"}


def op_label(op: int) -> str:
    return f"0x{op:04x}"


class DdrCollector:
    """``vdsp_ddr_bytes`` and ``vdsp_ddr_buffers`` per DDR owner, from the DDR directory's
    segment files at scrape time."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory

    def collect(self):
        directory = self.directory or ddr.shm_dir()
        size: collections.Counter = collections.Counter()
        count: collections.Counter = collections.Counter()
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    m = _SEG.match(entry.name)
                    if m is None:
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    size[m.group(1)] += st.st_size
                    count[m.group(1)] += 1
        except OSError:
            pass
        b = GaugeMetricFamily("vdsp_ddr_bytes", "Bytes of DDR segments held, per owner (hex id)", labels=["owner"])
        n = GaugeMetricFamily("vdsp_ddr_buffers", "DDR segments (buffers) held, per owner (hex id)", labels=["owner"])
        for owner in sorted(size):
            b.add_metric([owner], size[owner])
            n.add_metric([owner], count[owner])
        yield b
        yield n


class RelayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None, *, ddr_dir: str | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        ProcessCollector(registry=r)
        r.register(DdrCollector(ddr_dir))
        self.submitted = Counter("vdsp_tasks_submitted", "Tasks accepted into the relay queue",
                                 ["op", "core", "priority_class"], registry=r)
        self.completed = Counter("vdsp_tasks_completed", "Tasks answered with a RESULT",
                                 ["op", "core", "priority_class"], registry=r)
        self.failed = Counter("vdsp_tasks_failed", "Tasks ended with an error (by the firmware or the relay)",
                              ["op", "core", "priority_class", "code", "error"], registry=r)
        self.rejected = Counter("vdsp_tasks_rejected", "Tasks refused before they were queued",
                                ["op", "priority_class", "code", "error"], registry=r)
        self.latency = Histogram("vdsp_task_latency_seconds", "Relay enqueue to firmware reply",
                                 ["op", "core", "priority_class"], buckets=LATENCY_BUCKETS, registry=r)
        self.queue_wait = Histogram("vdsp_task_queue_wait_seconds", "Time a task waited in the relay queue",
                                    ["priority_class"], buckets=LATENCY_BUCKETS, registry=r)
        self.queue_depth = Gauge("vdsp_relay_queue_depth", "Tasks waiting in the relay queue",
                                 ["priority_class"], registry=r)
        self.queued_bytes = Gauge("vdsp_relay_queued_bytes", "Bytes of queued task messages held", registry=r)
        self.clients = Gauge("vdsp_relay_clients", "Connected client sessions", registry=r)
        self.inflight = Gauge("vdsp_core_inflight", "Tasks sent to a core's firmware, not yet answered",
                              ["core"], registry=r)
        self.state = Gauge("vdsp_core_state", "1 for the state a core is in", ["core", "state"], registry=r)
        self.crashes = Counter("vdsp_core_crashes", "Crashes of a core's firmware seen by the relay",
                               ["core"], registry=r)
        self.recoveries = Counter("vdsp_core_recoveries", "Returns to running after a crash", ["core"], registry=r)
        self.dead = Counter("vdsp_core_dead", "Times a core was declared dead (its process exited, or it hung)", ["core"],
                            registry=r)
        self.crash_count = Gauge("vdsp_core_crash_count", "The core's own crash count (remoteproc)", ["core"],
                                 registry=r)
        self._last_state: dict[str, str] = {}
        self._crashed: set[str] = set()     # cores crashed and not yet running again

    # --- from the observer --------------------------------------------------------------------
    def enqueued(self, job, op: int) -> None:
        self.submitted.labels(op_label(op), _REQUESTED.get(job.core, "?"), priority_class(job.priority)).inc()

    def finished(self, job, core: str, code: int, latency_s: float | None, wait_s: float | None) -> None:
        op, cls = op_label(job.op), priority_class(job.priority)
        if code:
            self.failed.labels(op, core, cls, str(code), errors.describe(code)).inc()
        else:
            self.completed.labels(op, core, cls).inc()
        if latency_s is not None:
            self.latency.labels(op, core, cls).observe(latency_s)
        if wait_s is not None:
            self.queue_wait.labels(cls).observe(max(0.0, wait_s))

    def rejected_task(self, head, code: int) -> None:
        self.rejected.labels(op_label(head.op), priority_class(head.priority), str(code), errors.describe(code)).inc()

    def core_state(self, core: str, state: str, reason: str) -> None:
        before = self._last_state.get(core)
        if state == "crashed" and before != "crashed":
            self.crashes.labels(core).inc()
            self._crashed.add(core)
        if state == "dead" and before != "dead":
            self.dead.labels(core).inc()
        if state == "running" and core in self._crashed:
            self._crashed.discard(core)
            self.recoveries.labels(core).inc()
        self._last_state[core] = state

    # --- from the relay's loop ------------------------------------------------------------------
    def refresh(self, engine) -> None:
        """Gauges from the engine's state (call in the engine's thread)."""
        waiting: collections.Counter = collections.Counter()
        for job in engine.jobs.values():
            if job.state == "queued":
                waiting[priority_class(job.priority)] += 1
        for cls in ("preempt", "high", "normal", "low"):
            self.queue_depth.labels(cls).set(waiting[cls])
        self.queued_bytes.set(engine.held_bytes)
        self.clients.set(len(engine.clients))
        for core in engine.cores:
            self.inflight.labels(core.name).set(len(core.inflight))
            self.crash_count.labels(core.name).set(core.crash_count)
            for state in CORE_STATES:
                self.state.labels(core.name, state).set(1 if core.state.value == state else 0)


def serve(metrics: RelayMetrics, port: int, addr: str = "0.0.0.0"):
    """Serve ``/metrics`` on ``addr:port`` from a daemon thread; returns the HTTP server."""
    from prometheus_client import start_http_server
    result = start_http_server(port, addr=addr, registry=metrics.registry)
    return result[0] if isinstance(result, tuple) else result

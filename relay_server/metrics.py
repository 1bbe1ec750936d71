"""Prometheus metrics of the relay (``dsp_relay_server --metrics-port PORT``; off by default).

The engine's observer (``relay_server.observe``) calls :class:`RelayMetrics` at each step of
a task and at each core state change; gauges are refreshed from the engine by the relay's
loop (:meth:`RelayMetrics.refresh`, once a second, in the loop's thread: the HTTP thread
never reads the engine); the DDR figures are read from the DDR directory when ``/metrics``
is scraped. The names are listed in docs/observability.md. :class:`MetricsServer` serves
them from one thread, with bounded connections (not prometheus_client's thread per client).
"""
from __future__ import annotations

import collections
import os
import re
import selectors
import socket
import threading
import time

from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector,
                               generate_latest)
from prometheus_client.core import GaugeMetricFamily

from protocol import errors
from relay_server.observe import priority_class
from vdsp_board.memory import ddr

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


MAX_CONNECTIONS = 64            # open scrape connections; a further one closes the oldest
MAX_REQUEST_BYTES = 8192        # a request (line and headers) larger than this is refused (431)
IDLE_TIMEOUT_S = 5.0            # a connection that sends or takes nothing this long is closed


class MetricsServer:
    """``/metrics`` over HTTP/1.0 from one thread with a selector (an event loop), whatever the
    number of clients: at most ``MAX_CONNECTIONS`` open at once (a further one closes the
    oldest), a request of at most ``MAX_REQUEST_BYTES``, ``IDLE_TIMEOUT_S`` to send it and to
    take the answer, one request per connection. (prometheus_client's own server started a
    thread per connection: 3,000 idle connections gave the relay 3,004 threads.)"""

    def __init__(self, registry: CollectorRegistry, port: int, addr: str = "0.0.0.0") -> None:
        self.registry = registry
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((addr, port))
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.server_address = self.listener.getsockname()
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.conns: dict = {}          # socket -> _Conn, oldest first
        self.closed_for_room = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="metrics-http", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stop = True
        self._thread.join(2.0)
        for sock in list(self.conns):
            self._close(sock)
        self.selector.close()
        self.listener.close()

    def _run(self) -> None:
        while not self._stop:
            for key, events in self.selector.select(0.25):
                if key.data is None:
                    self._accept()
                elif events & selectors.EVENT_READ:
                    self._read(key.fileobj)
                elif events & selectors.EVENT_WRITE:
                    self._write(key.fileobj)
            now = time.monotonic()
            for sock, conn in list(self.conns.items()):
                if now - conn.last > IDLE_TIMEOUT_S:
                    self._close(sock)

    def _accept(self) -> None:
        for _ in range(64):
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:     # EMFILE and the like: try again at the next turn
                return
            if len(self.conns) >= MAX_CONNECTIONS:
                self.closed_for_room += 1
                self._close(next(iter(self.conns)))
            sock.setblocking(False)
            self.conns[sock] = _Conn(time.monotonic())
            self.selector.register(sock, selectors.EVENT_READ, True)

    def _read(self, sock) -> None:
        conn = self.conns.get(sock)
        if conn is None:
            return
        try:
            data = sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(sock)
            return
        conn.request += data
        conn.last = time.monotonic()
        if b"\r\n\r\n" in conn.request or b"\n\n" in conn.request:
            self._answer(sock, conn)
        elif len(conn.request) > MAX_REQUEST_BYTES:
            self._respond(sock, conn, "431 Request Header Fields Too Large", b"request too large\n")

    def _answer(self, sock, conn: "_Conn") -> None:
        line = conn.request.split(b"\n", 1)[0].decode("latin-1").split()
        if len(line) < 2 or line[0] not in ("GET", "HEAD"):
            return self._respond(sock, conn, "405 Method Not Allowed", b"GET /metrics\n")
        path = line[1].split("?", 1)[0]
        if path not in ("/metrics", "/"):
            return self._respond(sock, conn, "404 Not Found", b"see /metrics\n")
        try:
            body = generate_latest(self.registry)
        except Exception as exc:    # a collector failed: say so, keep serving
            return self._respond(sock, conn, "500 Internal Server Error", f"{exc}\n".encode())
        self._respond(sock, conn, "200 OK", b"" if line[0] == "HEAD" else body, CONTENT_TYPE_LATEST)

    def _respond(self, sock, conn: "_Conn", status: str, body: bytes, ctype: str = "text/plain") -> None:
        conn.out = (f"HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                    "Connection: close\r\n\r\n").encode() + body
        conn.request = b""
        self.selector.modify(sock, selectors.EVENT_WRITE, True)
        self._write(sock)

    def _write(self, sock) -> None:
        conn = self.conns.get(sock)
        if conn is None:
            return
        try:
            sent = sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(sock)
            return
        conn.out = conn.out[sent:]
        conn.last = time.monotonic()
        if not conn.out:
            self._close(sock)

    def _close(self, sock) -> None:
        self.conns.pop(sock, None)
        try:
            self.selector.unregister(sock)
        except (KeyError, ValueError):
            pass
        sock.close()


class _Conn:
    __slots__ = ("last", "request", "out")

    def __init__(self, now: float) -> None:
        self.last = now
        self.request = b""
        self.out = b""


def serve(metrics: RelayMetrics, port: int, addr: str = "0.0.0.0") -> MetricsServer:
    """Serve ``/metrics`` on ``addr:port`` from one daemon thread; returns the server."""
    return MetricsServer(metrics.registry, port, addr)

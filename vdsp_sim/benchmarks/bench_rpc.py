#!/usr/bin/env python3
"""RPC benchmark of vdsp-sim against a raw pyzmq baseline of the same topology.

One run measures, in the same environment and with the rounds interleaved (so that
background load hits every configuration alike):

(a) baseline: client DEALER -> relay process (ROUTER front / DEALER back, a plain
    Python poll loop forwarding frames) -> ONE DEALER echo worker process; ipc
    sockets in a temp dir; a 24-byte header frame + a body frame the size of our
    PING task body; no msgpack, no SDK;
(b) full stack: a local SoC (relay + vdsp0 + vdsp1 + their firmware processes)
    started by ``Supervisor`` in a private runtime dir; PING (no-op operator) through
    the relay (``Soc(mode="relay")``) and direct (``Soc(mode="direct")``);
(c) handle-only tasks: MEMCPY of 16 bytes between 4 KiB buffers and between 32 MiB
    buffers (relay mode): only the handles cross the sockets, so both should cost
    the same.

Latency: sequential round trips after a warm-up, p50/p99 in µs. Extra "(info)" rows repeat the
latency with every process of the benchmark pinned to one CPU: on a small VM a cross-CPU wake-up
costs tens of µs, so unpinned figures depend on where the scheduler put each process; pinned
figures compare the software paths.
Throughput: completions/s with a window of 64 outstanding requests. The SDK allows
32 tasks in flight per client (TaskNumExceedLimit), so the full stack uses two
clients with a window of 32 each (two threads of this process by default, or two
processes with ``--clients procs``); the baseline uses one client socket with a
window of 64 and one echo worker, while the full stack has two firmware workers.

The throughput runs also report CPU µs per task of each process (from /proc, all threads,
libzmq I/O threads included) and how busy the machine was, to tell "CPU-bound" from "waiting".

Usage::

    .venv/bin/python benchmarks/bench_rpc.py [--quick] [--json FILE] [--clients threads|procs]
    vdsp bench [same options]

Exit status: 0 when the run completed (PASS or MISS), 1 on error, and 3 with
``--fail-on-miss`` when a target is missed.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Self

import zmq  # noqa: E402

from protocol import header, wire
from protocol.constants import Command
from protocol.header import STRUCT as HDR  # the raw floor packs its headers itself
from vdsp_sim.benchmarks import footprint
from vdsp_sim.benchmarks.report import Report
from vdsp_board.config import clihelp, settings

WINDOW = 64                 # outstanding requests in the throughput runs
PER_CLIENT = 32             # MAX_TASKS_PER_CLIENT of the SDK / relay
BODY_SIZE_FALLBACK = 48
TARGETS = {
    "relay_p50_over_baseline": ("<=", 1.5),
    "relay_tput_over_baseline": (">=", 0.7),
    "big_p50_over_small": ("<=", 1.2),
}
T0 = time.monotonic()


def progress(msg: str) -> None:
    print(f"[bench {time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def pct(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not samples:
        return float("nan")
    s = sorted(samples)
    k = max(0, min(len(s) - 1, int(round(q / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    if not n:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


# --- the process tree: CPU accounting and pinning -------------------------------------

_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (Linux /proc; [root] elsewhere)."""
    kids: dict[int, list[int]] = collections.defaultdict(list)
    try:
        names = os.listdir("/proc")
    except OSError:
        return [root]
    for name in names:
        if name.isdigit():
            st = _proc_stat(int(name))
            if st:
                kids[int(st[1])].append(int(name))
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(kids.get(pid, ()))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a whole process (all its threads, zmq I/O threads included)."""
    st = _proc_stat(pid)
    return (int(st[11]) + int(st[12])) / _TCK if st else 0.0


def system_busy_seconds() -> float:
    """CPU seconds all CPUs spent busy since boot (/proc/stat; 0 where unavailable)."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = (f + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / _TCK


def set_tree_affinity(cpus: set[int]) -> bool:
    """Pin every thread of this process and of its descendants to ``cpus``. False if unsupported."""
    if not hasattr(os, "sched_setaffinity"):
        return False
    for pid in descendants(os.getpid()):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                os.sched_setaffinity(int(tid), cpus)
            except OSError:
                pass
    return True


# =========================================================================================
# (a) the raw pyzmq baseline
# =========================================================================================

def _orphaned(parent: int) -> bool:
    return os.getppid() != parent


def role_baseline_relay(directory: str) -> int:
    """ROUTER front / DEALER back, forwarding every frame both ways in a poll loop."""
    parent = os.getppid()
    ctx = zmq.Context()
    front, back = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    for sock in (front, back):
        sock.linger = 0
        sock.sndhwm = sock.rcvhwm = 100000
    front.bind(f"ipc://{directory}/front.sock")
    back.bind(f"ipc://{directory}/back.sock")
    print("ready", flush=True)
    poller = zmq.Poller()
    poller.register(front, zmq.POLLIN)
    poller.register(back, zmq.POLLIN)
    while True:
        events = poller.poll(200)
        if not events and _orphaned(parent):
            return 0
        for sock, _ in events:
            other = back if sock is front else front
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                other.send_multipart(frames)


def _echo_worker(kind: int, endpoint: str, bind: bool) -> int:
    """A socket of ``kind`` bound or connected at ``endpoint`` that echoes every message, until
    its parent exits."""
    parent = os.getppid()
    ctx = zmq.Context()
    sock = ctx.socket(kind)
    sock.linger = 0
    sock.sndhwm = sock.rcvhwm = 100000
    (sock.bind if bind else sock.connect)(endpoint)
    print("ready", flush=True)
    while True:
        if not sock.poll(200):
            if _orphaned(parent):
                return 0
            continue
        while True:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            sock.send_multipart(frames)


def role_baseline_worker(directory: str) -> int:
    """DEALER connected to the relay's back end: echoes every message."""
    return _echo_worker(zmq.DEALER, f"ipc://{directory}/back.sock", bind=False)


def role_direct_worker(directory: str) -> int:
    """The direct floor's worker: a ROUTER the client connects to with no relay between (as a
    direct-mode client reaches a core's firmware); echoes every message."""
    return _echo_worker(zmq.ROUTER, f"ipc://{directory}/front.sock", bind=True)


def end_processes(procs: list[subprocess.Popen], wait_s: float = 5.0) -> None:
    """SIGTERM to each of ``procs`` still running, then each reaped (SIGKILL after ``wait_s``), its
    pipes closed."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(wait_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        for stream in (p.stdout, p.stderr):
            if stream is not None:
                stream.close()


class StartStop:
    """``with X(...) as x:`` starts it (stopping what started should the start fail part way) and
    stops it at the end; ``start`` and ``stop`` are the subclass's."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Baseline(StartStop):
    """The two baseline processes plus a client socket in this process."""

    def __init__(self, body_size: int) -> None:
        self.dir = tempfile.mkdtemp(prefix="vbb", dir="/tmp")
        self.procs: list[subprocess.Popen] = []
        self.ctx: zmq.Context | None = None
        self.sock: Any = None                  # a zmq DEALER once connected
        self.body = bytes(body_size)
        self.seq = 0

    def _spawn(self, role: str, module: str = "", *extra: str) -> None:
        """Start ``python -m module`` (default: this one) with ``--role role --dir DIR *extra``; wait for "ready"."""
        p = subprocess.Popen([sys.executable, "-m", module or __spec__.name, "--role", role,
                              "--dir", self.dir, *extra],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"baseline {role} did not start (said {line!r}, exit {p.poll()})")

    def _connect(self) -> None:
        """The client socket, on the relay's front end."""
        self.ctx = zmq.Context()
        sock = self.ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.sndhwm = sock.rcvhwm = 100000
        sock.connect(f"ipc://{self.dir}/front.sock")
        self.sock = sock

    def start(self) -> None:
        self._spawn("baseline-relay")
        self._spawn("baseline-worker")
        self._connect()
        self.call()   # end-to-end check (waits for the connections)

    def labels(self) -> dict[int, str]:
        """pid -> role of its processes, for ``measure_cpu``."""
        return {self.procs[0].pid: "relay", self.procs[1].pid: "worker"}

    def _header(self) -> bytes:
        self.seq += 1
        return HDR.pack(b"VD", 2, 0x10, 0, 0, 0, self.seq, 0)

    def call(self, timeout_ms: int = 5000) -> None:
        hdr = self._header()
        self.sock.send_multipart([hdr, self.body])
        if not self.sock.poll(timeout_ms):
            raise RuntimeError("baseline: no echo within 5 s")
        frames = self.sock.recv_multipart()
        if frames[0] != hdr:
            raise RuntimeError("baseline: echo out of order")

    def latency(self, n: int, warmup: int) -> list[float]:
        for _ in range(warmup):
            self.call()
        sock, body, pack = self.sock, self.body, HDR.pack
        out = []
        clock = time.perf_counter_ns
        for _ in range(n):
            self.seq += 1
            hdr = pack(b"VD", 2, 0x10, 0, 0, 0, self.seq, 0)
            t0 = clock()
            sock.send_multipart([hdr, body])
            frames = sock.recv_multipart()
            out.append((clock() - t0) / 1000.0)
            if frames[0] != hdr:
                raise RuntimeError("baseline: echo out of order")
        return out

    def throughput(self, window: int, warm_s: float, duration_s: float) -> float:
        sock, body, pack = self.sock, self.body, HDR.pack
        t_start = time.monotonic() + warm_s
        t_end = t_start + duration_s
        outstanding = count = 0
        seq = self.seq
        while True:
            while outstanding < window:
                seq += 1
                sock.send_multipart([pack(b"VD", 2, 0x10, 0, 0, 0, seq, 0), body])
                outstanding += 1
            sock.recv_multipart()
            outstanding -= 1
            now = time.monotonic()
            if now >= t_end:
                break
            if now >= t_start:
                count += 1
        while outstanding:
            if not sock.poll(5000):
                raise RuntimeError("baseline: lost replies")
            sock.recv_multipart()
            outstanding -= 1
        self.seq = seq
        return count / duration_s

    def protocol_throughput(self, window: int, warm_s: float, duration_s: float, reply_timeout_ms: int = 5000) -> float:
        """:meth:`throughput` plus the per-task work the protocol asks of any client, in Python
        with the protocol's own functions (the compiled ones where the build is used), and nothing
        of the SDK: each TASK's header and body packed (``header.pack``, ``wire.pack_body`` of a
        PING's body, made per task as a caller's values would be) and the task kept in a table by
        msg_id; each reply's header parsed and its body decoded and checked (``Header.parse``,
        ``wire.unpack_body``: the echoed TASK body, about the size of a PING's RESULT), its task
        taken from the table and given its values. A client's CPU above this is what its own
        machinery costs (tasks, waits, threads), not the protocol's. A reply that takes longer than
        ``reply_timeout_ms`` (the worker gone) raises RuntimeError."""
        sock, pack, parse, pack_body, unpack_body = self.sock, header.pack, header.Header.parse, wire.pack_body, \
            wire.unpack_body
        task_cmd, owner = int(Command.TASK), os.getpid()
        table: dict[int, list] = {}
        t_start = time.monotonic() + warm_s
        t_end = t_start + duration_s
        outstanding = count = 0
        seq = self.seq
        sock.rcvtimeo = reply_timeout_ms        # a receive that waits longer raises zmq.Again
        try:
            while True:
                while outstanding < window:
                    seq += 1
                    table[seq] = [seq, False, None]
                    sock.send_multipart([pack(task_cmd, seq, 0), pack_body({"inputs": [], "outputs": [], "params": {},
                                                                            "owner": owner})])
                    outstanding += 1
                frames = sock.recv_multipart()
                reply, body = parse(frames[0]), unpack_body(frames[1])
                task = table.pop(reply.msg_id)
                task[1], task[2] = True, body.get("params")
                outstanding -= 1
                now = time.monotonic()
                if now < t_end:
                    count += now >= t_start
                elif not outstanding:
                    break
                else:
                    window = 0      # the last replies: read (and decoded) as the others, none sent
        except zmq.Again:
            raise RuntimeError(f"baseline: no reply within {reply_timeout_ms} ms ({outstanding} in flight)") from None
        finally:
            sock.rcvtimeo = -1
            self.seq = seq
        return count / duration_s

    def stop(self) -> None:
        if self.sock is not None:
            self.sock.close(0)
        if self.ctx is not None:
            self.ctx.destroy(linger=0)     # its socket too, should an interruption have left it open
        end_processes(self.procs)
        self.procs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


class DirectBaseline(Baseline):
    """The direct floor: a client socket in this process and one echo worker process it connects
    to, no relay (the topology of ``Soc(mode="direct")``, nothing of vdsp-sim in it)."""

    def start(self) -> None:
        self._spawn("direct-worker")
        self._connect()
        self.call()

    def labels(self) -> dict[int, str]:
        return {self.procs[0].pid: "worker"}


# =========================================================================================
# (b), (c) the full stack
# =========================================================================================

def window_loop(soc, op: int, core: int, window: int, t_start: float, t_end: float) -> int:
    """Keep ``window`` tasks outstanding on ``soc`` (wait for the oldest, submit one more);
    count the completions that fall in [t_start, t_end)."""
    q: collections.deque = collections.deque()
    rpc = soc.rpc
    count = 0
    try:
        while True:
            while len(q) < window:
                q.append(rpc(op, core=core))
            q.popleft().wait(10000)
            now = time.monotonic()
            if now >= t_end:
                break
            if now >= t_start:
                count += 1
    finally:
        for task in q:
            task.wait(10000)
    return count


def role_soc_client(mode: str, window: int) -> int:
    """A client process of the pipelined run: ready -> go T_START T_END -> JSON count."""
    from arm_side import CORE_ANY, Soc, opids
    with Soc(mode=mode, strict=False, autostart_relay=False) as soc:
        for _ in range(20):
            soc.rpc(opids.PING, core=CORE_ANY).wait(5000)
        print("ready", flush=True)
        for line in sys.stdin:
            parts = line.split()
            if not parts or parts[0] == "quit":
                break
            t_start, t_end = float(parts[1]), float(parts[2])
            n = window_loop(soc, opids.PING, CORE_ANY, window, t_start, t_end)
            print(json.dumps({"count": n}), flush=True)
    return 0


class FullStack:
    def __init__(self, clients: str) -> None:
        self.clients_kind = clients
        self.private: Any = None                 # the SoC (vdsp_sim.soc.private_soc.PrivateSoc)
        self.socs: dict[str, list] = {}          # mode -> [Soc, Soc]
        self.procs: dict[str, list[Any]] = {}     # client processes (Popen, pipes open) per mode

    @property
    def rt(self) -> Path | None:
        return self.private.rt if self.private is not None else None

    @property
    def sup(self):
        return self.private.sup if self.private is not None else None

    def start(self, timeout_s: float) -> dict:
        """A private SoC; its DDR directory is VDSP_SHM_DIR if set, else a fresh one under /dev/shm."""
        from vdsp_sim.soc.private_soc import PrivateSoc, PrivateSocConfig
        shm = settings.current().raw("VDSP_SHM_DIR")
        self.private = PrivateSoc(PrivateSocConfig(ddr_dir=Path(shm) if shm else None,
                                                   mode=settings.current().raw("VDSP_RPC_MODE"), ready_timeout_s=timeout_s))
        return self.private.start()

    def soc(self, mode: str):
        from arm_side import Soc
        if mode not in self.socs:
            self.socs[mode] = [Soc(mode=mode, strict=False, autostart_relay=False)]
        return self.socs[mode][0]

    # --- latency ----------------------------------------------------------------------
    def latency(self, mode: str, n: int, warmup: int) -> list[float]:
        from arm_side import CORE_ANY, opids
        soc = self.soc(mode)
        rpc, ping = soc.rpc, opids.PING
        for _ in range(warmup):
            rpc(ping, core=CORE_ANY).wait(5000)
        clock = time.perf_counter_ns
        out = []
        for _ in range(n):
            t0 = clock()
            rpc(ping, core=CORE_ANY).wait(5000)
            out.append((clock() - t0) / 1000.0)
        return out

    # --- throughput -------------------------------------------------------------------
    def _client_procs(self, mode: str, n: int) -> list[Any]:
        if mode not in self.procs:
            procs: list[Any] = []
            self.procs[mode] = procs
            for _ in range(n):
                p = subprocess.Popen([sys.executable, "-m", __spec__.name, "--role", "soc-client",
                                      "--mode", mode, "--window", str(PER_CLIENT)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                procs.append(p)
            for p in procs:
                line = p.stdout.readline().strip()
                if line != "ready":
                    raise RuntimeError(f"{mode} client process did not start (said {line!r}, exit {p.poll()})")
        return self.procs[mode]

    def prepare(self, mode: str, window: int) -> None:
        """Connect the throughput clients of ``mode`` (outside the measured time)."""
        from arm_side import Soc
        n_clients = max(1, -(-window // PER_CLIENT))
        if self.clients_kind == "procs" and n_clients > 1:
            self._client_procs(mode, n_clients)
            return
        socs = self.socs.setdefault(mode, [])
        while len(socs) < n_clients:
            socs.append(Soc(mode=mode, strict=False, autostart_relay=False))

    def throughput(self, mode: str, window: int, warm_s: float, duration_s: float) -> float:
        from arm_side import CORE_ANY, opids
        n_clients = max(1, -(-window // PER_CLIENT))
        per = window // n_clients
        self.prepare(mode, window)
        if self.clients_kind == "procs" and n_clients > 1:
            procs = self._client_procs(mode, n_clients)
            t_start = time.monotonic() + warm_s
            t_end = t_start + duration_s
            for p in procs:
                p.stdin.write(f"go {t_start} {t_end}\n")
                p.stdin.flush()
            total = 0
            for p in procs:
                line = p.stdout.readline()
                if not line:
                    raise RuntimeError(f"{mode} client process died (exit {p.poll()})")
                total += json.loads(line)["count"]
            return total / duration_s
        socs = self.socs[mode]
        t_start = time.monotonic() + warm_s
        t_end = t_start + duration_s
        counts = [0] * n_clients
        errs: list[BaseException] = []

        def run(i: int) -> None:
            try:
                counts[i] = window_loop(socs[i], opids.PING, CORE_ANY, per, t_start, t_end)
            except BaseException as exc:  # reported by the main thread
                errs.append(exc)
        threads = [threading.Thread(target=run, args=(i,), name=f"bench-client{i}") for i in range(n_clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errs:
            raise errs[0]
        return sum(counts) / duration_s

    # --- handle-only tasks ------------------------------------------------------------
    def handles(self, n: int, warmup: int, small: int, big: int) -> dict:
        """MEMCPY of 16 bytes between two ``small`` and between two ``big`` buffers (relay),
        interleaved; returns latencies (µs) and the DSP-side exec_us of each."""
        from arm_side import CORE_ANY, opids
        soc = self.soc("relay")
        bufs = {}
        try:
            for name, size in (("small", small), ("big", big)):
                src, dst = soc.mem.alloc(size), soc.mem.alloc(size)
                src.array()[:] = 0x5A     # make every page of the buffers real
                dst.array()[:] = 0
                bufs[name] = (src, dst)
            lat: dict[str, list[float]] = {"small": [], "big": []}
            exec_us: dict[str, list[float]] = {"small": [], "big": []}
            params = {"size": 16}
            clock = time.perf_counter_ns
            for i in range(warmup + n):
                order = ("small", "big") if i % 2 == 0 else ("big", "small")
                for name in order:
                    src, dst = bufs[name]
                    t0 = clock()
                    task = soc.rpc(opids.MEMCPY, inputs=[src], outputs=[dst], params=params, core=CORE_ANY)
                    values = task.wait(5000)
                    dt = (clock() - t0) / 1000.0
                    if values.get("bytes") != 16:
                        raise RuntimeError(f"memcpy copied {values!r}, expected 16 bytes")
                    if i >= warmup:
                        lat[name].append(dt)
                        exec_us[name].append(task.exec_us)
            for name, (src, dst) in bufs.items():
                if bytes(dst.array()[:16]) != b"\x5a" * 16 or dst.array()[16] != 0:
                    raise RuntimeError(f"memcpy on the {name} buffers wrote the wrong bytes")
            return {"lat": lat, "exec_us": exec_us}
        finally:
            for src, dst in bufs.values():
                src.free()
                dst.free()

    def process_labels(self) -> dict[int, str]:
        """pid -> role of every process of the SoC (relay, vdsp0/1 core, its starter, its firmware)."""
        labels: dict[int, str] = {}
        if self.sup is None:
            return labels
        for name, p in self.sup.procs.items():
            labels[p.pid] = name if name == "relay" else f"{name}.core"
            if name != "relay":
                for child in descendants(p.pid)[1:]:      # the core's starter (by its title), its firmware
                    labels[child] = f"{name}.starter" if footprint.name_of(child) == f"{name}.starter" else f"{name}.fw"
        for mode, procs in self.procs.items():
            for i, p in enumerate(procs):
                labels[p.pid] = f"client{i}"
        return labels

    # --- teardown ---------------------------------------------------------------------
    def logs_tail(self, lines: int = 15) -> str:
        out = []
        if self.rt is not None and (self.rt / "log").is_dir():
            for path in sorted((self.rt / "log").glob("*.log")):
                text = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {path.name} ---\n" + "\n".join(text))
        return "\n".join(out)

    def stop(self) -> None:
        errors_seen = []
        for procs in self.procs.values():
            for p in procs:
                try:
                    if p.poll() is None:
                        p.stdin.write("quit\n")
                        p.stdin.flush()
                except OSError:
                    pass
        for procs in self.procs.values():
            for p in procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                for f in (p.stdin, p.stdout):
                    try:
                        f.close()
                    except OSError:
                        pass
        self.procs.clear()
        for socs in self.socs.values():
            for soc in socs:
                try:
                    soc.close()
                except Exception as exc:  # keep tearing down
                    errors_seen.append(exc)
        self.socs.clear()
        if self.private is not None:
            try:
                from vdsp_board.memory import ddr
                ddr.close_owner()
            except Exception as exc:
                errors_seen.append(exc)
            errors_seen += self.private.close()     # processes, sockets, DDR files, directories
            self.private = None
        if errors_seen:
            progress(f"teardown warnings: {errors_seen}")


# =========================================================================================
# driver
# =========================================================================================

def ping_body_size() -> int:
    """Size of the msgpack body of a PING task as the SDK sends it (for the baseline)."""
    try:
        from protocol import messages, wire
        return len(wire.encode(messages.task(1, 0, inputs=[], outputs=[], params={}, owner=0x3FFFFF))[1])
    except Exception:
        return BODY_SIZE_FALLBACK


def measure_cpu(fn, labels: dict[int, str], duration_s: float) -> tuple[float, dict[str, float]]:
    """Run ``fn`` (returns tasks/s over ``duration_s``); CPU µs per completed task per process
    (processes that used < 0.5 % of the run are left out)."""
    before = {pid: cpu_seconds(pid) for pid in labels}
    busy0, ours0 = system_busy_seconds(), sum(cpu_seconds(p) for p in descendants(os.getpid()))
    t0 = time.monotonic()
    rate = fn()
    wall = time.monotonic() - t0
    busy = system_busy_seconds() - busy0
    ours = sum(cpu_seconds(p) for p in descendants(os.getpid())) - ours0
    tasks = max(1.0, rate * wall)   # the warm-up and drain run at the same rate
    out = {}
    for pid, label in labels.items():
        used = cpu_seconds(pid) - before[pid]
        if used > 0.005 * wall:
            out[label] = round(used / tasks * 1e6, 1)
    out["_other_cpu_pct"] = round(max(0.0, busy - ours) / wall * 100, 1)   # foreign load (% of one CPU)
    out["_busy_cpu_pct"] = round(busy / wall * 100, 1)
    return rate, out


def verdict(key: str, value: float | None) -> str:
    if value is None:
        return "NO FIGURE"
    op, target = TARGETS[key]
    ok = value <= target if op == "<=" else value >= target
    return "PASS" if ok else "MISS"


def run(args: argparse.Namespace) -> dict:
    cfg: dict[str, Any]
    if args.quick:
        cfg = dict(rounds=1, lat_n=300, warmup=50, tput_s=0.6, warm_s=0.2, handle_n=100)
    else:
        cfg = dict(rounds=3, lat_n=2000, warmup=200, tput_s=2.0, warm_s=0.4, handle_n=600)
    for key in ("rounds", "lat_n", "tput_s", "handle_n"):
        value = getattr(args, key)
        if value is not None:
            cfg[key] = value
    cfg.update(window=WINDOW, per_client=PER_CLIENT, clients=args.clients,
               small=4 << 10, big=32 << 20)
    load_before = os.getloadavg()
    body_size = ping_body_size()
    progress(f"{os.cpu_count()} CPUs, load average {load_before[0]:.2f}; "
             f"{'quick' if args.quick else 'full'} run: {cfg['rounds']} round(s) interleaved")
    results: dict[str, Any] = {
        "baseline": {"lat": [], "tput": []},
        "relay": {"lat": [], "tput": []},
        "direct": {"lat": [], "tput": []},
        "handles": {"lat": {"small": [], "big": []}, "exec_us": {"small": [], "big": []}},
        "pinned": {"baseline": [], "relay": [], "direct": []},
        "cpu_per_task": {"baseline": [], "relay": [], "direct": []},
    }
    all_cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    pin_cpu = {max(all_cpus)} if len(all_cpus) > 1 and not args.no_pin else None
    base = Baseline(body_size)
    full = FullStack(args.clients)
    try:
        progress("starting the baseline processes (raw pyzmq relay + 1 echo worker)")
        base.start()
        progress("starting the SoC (relay, vdsp0, vdsp1) in a temp runtime dir")
        status = full.start(args.start_timeout)
        progress("SoC up: " + ", ".join(f"{c['name']} {c['state']}" for c in status.get("cores", [])))
        for r in range(1, cfg["rounds"] + 1):
            tag = f"round {r}/{cfg['rounds']}"
            warm = cfg["warmup"] if r == 1 else cfg["warmup"] // 4
            progress(f"{tag}: baseline latency ({cfg['lat_n']} round trips)")
            results["baseline"]["lat"] += base.latency(cfg["lat_n"], warm)
            for mode in ("relay", "direct"):
                progress(f"{tag}: full stack {mode} latency ({cfg['lat_n']} PING)")
                results[mode]["lat"] += full.latency(mode, cfg["lat_n"], warm)
            if pin_cpu:
                n_pin = max(100, cfg["lat_n"] // 2)
                progress(f"{tag}: latency with every process pinned to CPU {min(pin_cpu)} ({n_pin} each)")
                try:
                    set_tree_affinity(pin_cpu)
                    results["pinned"]["baseline"] += base.latency(n_pin, 50)
                    for mode in ("relay", "direct"):
                        results["pinned"][mode] += full.latency(mode, n_pin, 50)
                finally:
                    set_tree_affinity(all_cpus)
            progress(f"{tag}: handle-only MEMCPY 16 B, 4 KiB vs 32 MiB ({cfg['handle_n']} each)")
            h = full.handles(cfg["handle_n"], max(10, warm // 4), cfg["small"], cfg["big"])
            for k in ("small", "big"):
                results["handles"]["lat"][k] += h["lat"][k]
                results["handles"]["exec_us"][k] += h["exec_us"][k]
            progress(f"{tag}: baseline throughput (window {WINDOW}, {cfg['tput_s']} s)")
            me = os.getpid()
            labels = {me: "client", base.procs[0].pid: "relay", base.procs[1].pid: "worker"}
            rate, cpu = measure_cpu(lambda: base.throughput(WINDOW, cfg["warm_s"], cfg["tput_s"]), labels,
                                    cfg["tput_s"])
            results["baseline"]["tput"].append(rate)
            results["cpu_per_task"]["baseline"].append(cpu)
            for mode in ("relay", "direct"):
                progress(f"{tag}: full stack {mode} throughput (2 {args.clients} x window {PER_CLIENT}, "
                         f"{cfg['tput_s']} s)")
                full.prepare(mode, WINDOW)
                labels = {me: "client", **full.process_labels()}
                rate, cpu = measure_cpu(lambda: full.throughput(mode, WINDOW, cfg["warm_s"], cfg["tput_s"]),
                                        labels, cfg["tput_s"])
                results[mode]["tput"].append(rate)
                results["cpu_per_task"][mode].append(cpu)
    except Exception:
        tail = full.logs_tail()
        if tail:
            print(f"SoC logs (tail):\n{tail}", file=sys.stderr)
        raise
    finally:
        progress("stopping the SoC and the baseline processes")
        try:
            full.stop()
        finally:
            base.stop()
    load_after = os.getloadavg()
    cfg["pinned_cpu"] = min(pin_cpu) if pin_cpu else None
    return summarize(cfg, results, body_size, load_before, load_after)


def summarize(cfg: dict, results: dict, body_size: int, load_before: tuple, load_after: tuple) -> dict:
    fig: dict = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "pyzmq": zmq.__version__,
                    "libzmq": zmq.zmq_version(), "loadavg_before": list(load_before),
                    "loadavg_after": list(load_after)},
        "config": {**cfg, "baseline_body_bytes": body_size, "baseline_workers": 1, "full_stack_workers": 2},
    }
    for name in ("baseline", "relay", "direct"):
        lat, tput = results[name]["lat"], results[name]["tput"]
        fig[name] = {"p50_us": pct(lat, 50), "p99_us": pct(lat, 99), "samples": len(lat),
                     "tasks_per_s": median(tput), "tasks_per_s_rounds": tput}
    h = results["handles"]
    fig["handles"] = {k: {"bytes": cfg[k], "p50_us": pct(h["lat"][k], 50), "p99_us": pct(h["lat"][k], 99),
                          "dsp_exec_p50_us": median(h["exec_us"][k]), "samples": len(h["lat"][k])}
                      for k in ("small", "big")}
    fig["pinned"] = {k: {"p50_us": pct(v, 50), "p99_us": pct(v, 99), "samples": len(v)}
                     for k, v in results["pinned"].items() if v}
    fig["cpu_us_per_task"] = {}
    for name, rounds in results["cpu_per_task"].items():
        keys = sorted({k for r in rounds for k in r})
        fig["cpu_us_per_task"][name] = {k: median([r.get(k, 0.0) for r in rounds]) for k in keys}
    b = fig["baseline"]
    ratios = {
        "relay_p50_over_baseline": _quotient(fig["relay"]["p50_us"], b["p50_us"]),
        "relay_tput_over_baseline": _quotient(fig["relay"]["tasks_per_s"], b["tasks_per_s"]),
        "big_p50_over_small": _quotient(fig["handles"]["big"]["p50_us"], fig["handles"]["small"]["p50_us"]),
    }
    fig["ratios"] = {k: {"value": v, "target": f"{TARGETS[k][0]} {TARGETS[k][1]}", "verdict": verdict(k, v)}
                     for k, v in ratios.items()}
    if not b["tasks_per_s"]:
        fig["ratios"]["relay_tput_over_baseline"]["why_none"] = NO_BASELINE_TASKS
    fig["info_ratios"] = {
        "direct_p50_over_baseline": _quotient(fig["direct"]["p50_us"], b["p50_us"]),
        "direct_tput_over_baseline": _quotient(fig["direct"]["tasks_per_s"], b["tasks_per_s"]),
        "relay_p99_over_baseline_p99": _quotient(fig["relay"]["p99_us"], b["p99_us"]),
    }
    if fig["pinned"].get("baseline"):
        pb = fig["pinned"]["baseline"]["p50_us"]
        fig["info_ratios"]["pinned_relay_p50_over_baseline"] = _quotient(fig["pinned"]["relay"]["p50_us"], pb)
        fig["info_ratios"]["pinned_direct_p50_over_baseline"] = _quotient(fig["pinned"]["direct"]["p50_us"], pb)
    return fig


NO_BASELINE_TASKS = ("no baseline task completed in the window (a host too busy for so short a window: "
                     "a longer --tput-s measures it)")


def _quotient(a: float, b: float) -> float | None:
    """a / b; None (no figure) where b is 0: a window in which no task completed."""
    return a / b if b else None


RATIO_LABELS = {"relay_p50_over_baseline": "relay p50 / baseline p50",
                "relay_tput_over_baseline": "relay tasks/s / baseline tasks/s",
                "big_p50_over_small": "32 MiB MEMCPY p50 / 4 KiB MEMCPY p50"}


def to_report(fig: dict, args: argparse.Namespace) -> Report:
    cfg, m = fig["config"], fig["machine"]
    clients = "2 client threads (1 process)" if cfg["clients"] == "threads" else "2 client processes"
    rep = Report("rpc", args)
    rep.note(f"machine: {m['cpus']} CPUs, Python {m['python']}, pyzmq {m['pyzmq']} / libzmq {m['libzmq']}; "
             f"load average {m['loadavg_before'][0]:.2f} before, {m['loadavg_after'][0]:.2f} after "
             "(shared machine: other jobs may compete for the CPUs)")
    rep.note(f"{cfg['rounds']} interleaved round(s); latency: sequential, {fig['baseline']['samples']} samples per "
             f"row after warm-up; throughput: median of {cfg['rounds']} x {cfg['tput_s']} s, window {cfg['window']}")
    rep.note(f"baseline: raw pyzmq DEALER -> ROUTER/DEALER poll-loop relay -> ONE DEALER echo worker, ipc, "
             f"24 B header + {cfg['baseline_body_bytes']} B body, no msgpack")
    rep.note(f"full stack: SoC relay + 2 cores (2 firmware workers), PING (no-op), core=CORE_ANY; throughput "
             f"window {cfg['window']} = {clients} x {cfg['per_client']} (per-client limit {cfg['per_client']})")
    rows = []
    for key, label in (("baseline", "baseline raw pyzmq (1 echo worker)"),
                       ("relay", "full stack, relay (Soc mode=relay)"),
                       ("direct", "full stack, direct (Soc mode=direct)")):
        r = fig[key]
        rows.append([label, r["p50_us"], r["p99_us"], r["tasks_per_s"], None])
    for key, label in (("small", "MEMCPY 16 B, 4 KiB in/out (relay)"), ("big", "MEMCPY 16 B, 32 MiB in/out (relay)")):
        r = fig["handles"][key]
        rows.append([label, r["p50_us"], r["p99_us"], None, r["dsp_exec_p50_us"]])
    for key, label in (("baseline", "baseline, all pinned to 1 CPU"), ("relay", "relay, all pinned to 1 CPU"),
                       ("direct", "direct, all pinned to 1 CPU")):
        if key in fig.get("pinned", {}):
            r = fig["pinned"][key]
            rows.append(["(info) " + label, r["p50_us"], r["p99_us"], None, None])
    rep.table("latency and throughput", ["configuration", "p50 µs", "p99 µs", "tasks/s", "DSP exec p50 µs"], rows)
    info = fig["info_ratios"]
    rep.table("(info) ratios without a target", ["ratio", "value"], [
        [label, info[key]] for key, label in (
            ("direct_p50_over_baseline", "direct p50 / baseline p50"),
            ("direct_tput_over_baseline", "direct tasks/s / baseline tasks/s"),
            ("relay_p99_over_baseline_p99", "relay p99 / baseline p99"),
            ("pinned_relay_p50_over_baseline", "pinned relay p50 / pinned baseline p50")) if key in info])
    cpu = fig.get("cpu_us_per_task", {})
    if cpu:
        rep.table("CPU µs per task in the throughput runs (all threads of each process, median of rounds)",
                  ["configuration", "per process", "total", "machine busy %", "other processes %"],
                  [[key, _fmt_procs(cpu[key]), sum(v for k, v in cpu[key].items() if not k.startswith("_")),
                    cpu[key].get("_busy_cpu_pct", 0.0), cpu[key].get("_other_cpu_pct", 0.0)]
                   for key in ("baseline", "relay", "direct") if cpu.get(key)])
    rep.note(f"tasks/s per round: baseline {_fmt(fig['baseline'])}; relay {_fmt(fig['relay'])}; "
             f"direct {_fmt(fig['direct'])}")
    for key, r in fig["ratios"].items():
        op, bound = TARGETS[key]
        rep.target(RATIO_LABELS[key], r["value"], op, bound, r.get("why_none", ""))
    return rep


def _fmt_procs(d: dict) -> str:
    procs = {k: v for k, v in d.items() if not k.startswith("_")}
    return ", ".join(f"{k} {v:.0f}" for k, v in sorted(procs.items(), key=lambda kv: -kv[1]))


def _fmt(r: dict) -> str:
    return "/".join(f"{v:.0f}" for v in r["tasks_per_s_rounds"])


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vdsp bench rpc", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short run (smoke test): 1 round, small counts")
    ap.add_argument("--json", metavar="FILE", help="also write every figure to FILE as JSON (schema vdsp-bench/1)")
    ap.add_argument("--clients", choices=("threads", "procs"), default="threads",
                    help="how the full stack reaches a window of 64 with 32 tasks per client: two client "
                         "threads in this process (default) or two client processes")
    ap.add_argument("--rounds", type=int, help="interleaved measurement rounds (default 3, quick 1)")
    ap.add_argument("--lat-n", dest="lat_n", type=int, help="latency samples per configuration and round")
    ap.add_argument("--tput-s", dest="tput_s", type=float, help="seconds per throughput measurement")
    ap.add_argument("--handle-n", dest="handle_n", type=int, help="MEMCPY samples per size and round")
    ap.add_argument("--start-timeout", type=float, default=60.0, help="seconds to wait for the SoC to run")
    ap.add_argument("--no-pin", action="store_true",
                    help="skip the extra latency rows measured with every process pinned to one CPU")
    ap.add_argument("--fail-on-miss", action="store_true",
                    help="the CI mode: exit 3 when a ratio misses its target (else 0 once the run completes)")
    # internal: the child processes of the benchmark
    ap.add_argument("--role", choices=("baseline-relay", "baseline-worker", "direct-worker", "soc-client"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="relay", help=argparse.SUPPRESS)
    ap.add_argument("--window", type=int, default=PER_CLIENT, help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--"]:   # ``vdsp bench -- --quick`` passes the separator through
        argv = argv[1:]
    args = clihelp.finish(parser()).parse_args(argv)
    if args.role == "baseline-relay":
        return role_baseline_relay(args.dir)
    if args.role == "baseline-worker":
        return role_baseline_worker(args.dir)
    if args.role == "direct-worker":
        return role_direct_worker(args.dir)
    if args.role == "soc-client":
        return role_soc_client(args.mode, args.window)

    def on_sigterm(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        fig = run(args)
    except KeyboardInterrupt:
        print("bench_rpc: interrupted", file=sys.stderr)
        return 1
    except Exception as exc:
        print(f"bench_rpc: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return to_report(fig, args).finish(args.json, args.fail_on_miss, details=fig)


if __name__ == "__main__":
    from vdsp_board.processes import proc
    proc.exit_on_sigterm()      # a SIGTERM (timeout, kill) still stops the SoCs it started
    sys.exit(main())

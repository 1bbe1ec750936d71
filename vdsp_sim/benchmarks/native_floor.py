"""The native direct floor of ``vdsp bench perf`` (information, no target): the direct floor's
topology and messages (``bench_rpc.DirectBaseline``) with no Python in either process, a C client
and a C echo worker (``native_floor.c``, compiled here against the libzmq pyzmq ships, as the C
API's core is: ``vdsp_sim.capi_native``). Beside the Python floor it says how much of that floor
is the machine (its sockets, its libzmq) and how much is Python: the performance rows' targets are
ratios to the Python floor.

    with NativeFloor(body_size) as nf:
        nf.latency(2000)                # {"p50_us", "p99_us"}
        nf.throughput(64, 2.0)          # {"tasks_per_s", "client_cpu_us", "worker_cpu_us"}
"""
from __future__ import annotations

import json
import select
import shutil
import subprocess
import tempfile
from pathlib import Path

from vdsp_sim import ctoolchain
from vdsp_sim.benchmarks.bench_rpc import StartStop, cpu_seconds, end_processes

SOURCE = Path(__file__).with_name("native_floor.c")
START_TIMEOUT_S = 30.0     # the worker says "ready" within this, or it did not start
RUN_TIMEOUT_S = 120.0       # a client run longer than this (its own limits are 5 s a reply) is killed


def build(directory: Path) -> Path:
    """The program, compiled into ``directory`` with libzmq beside it. Raises RuntimeError saying
    what is missing (a C compiler, libzmq) or what the compiler said."""
    from vdsp_sim import capi_native
    lacking = ctoolchain.missing()
    if lacking.startswith("no C compiler"):
        raise RuntimeError(lacking)
    out = directory / "native_floor"
    cmd = [*capi_native.cc(), "-O2", *capi_native.cflags(directory), str(SOURCE), "-o", str(out),
           *capi_native.link_flags(directory)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"cannot compile {SOURCE.name}: {(done.stdout + done.stderr).strip()}")
    return out


class NativeFloor(StartStop):
    """The C echo worker, started in a directory of its own; its clients run one at a time."""

    def __init__(self, body_size: int) -> None:
        self.body_size = body_size
        self.dir = Path(tempfile.mkdtemp(prefix="vnf", dir="/tmp"))
        self.program: Path | None = None
        self.worker: subprocess.Popen | None = None

    def start(self) -> None:
        """Compile the program and start the worker (RuntimeError if either fails)."""
        self.program = build(self.dir)
        self.worker = subprocess.Popen([str(self.program), "worker", str(self.dir)], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.worker.stdout is not None
        ready, _, _ = select.select([self.worker.stdout], [], [], START_TIMEOUT_S)
        said = self.worker.stdout.readline().strip() if ready else ""
        if said != "ready":     # it failed (its reason on stderr), or hangs: killed either way
            worker, self.worker = self.worker, None
            if worker.poll() is None:
                worker.kill()
            worker.wait()
            why = f"no word within {START_TIMEOUT_S:g} s" if not ready else \
                worker.stderr.read().strip() if worker.stderr is not None else ""
            end_processes([worker])
            raise RuntimeError(f"the native floor's worker did not start (exit {worker.returncode}): {why}")

    def _client(self, *args: str) -> dict:
        assert self.program is not None
        done = subprocess.run([str(self.program), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"the native floor's client failed (exit {done.returncode}): {done.stderr.strip()}")
        return json.loads(done.stdout)

    def latency(self, n: int) -> dict:
        """``n`` round trips one at a time (after n/10 unmeasured): their p50 and p99 in µs."""
        return self._client("latency", str(self.dir), str(n), str(self.body_size))

    def throughput(self, window: int, duration_s: float) -> dict:
        """``window`` tasks outstanding for ``duration_s``: tasks/s and each process's CPU µs per task."""
        assert self.worker is not None
        before = cpu_seconds(self.worker.pid)
        got = self._client("throughput", str(self.dir), str(window), f"{duration_s:g}", str(self.body_size))
        tasks = max(1, got["tasks"])
        return {"tasks_per_s": got["tasks"] / got["seconds"], "client_cpu_us": got["cpu_s"] / tasks * 1e6,
                "worker_cpu_us": (cpu_seconds(self.worker.pid) - before) / tasks * 1e6}

    def stop(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            end_processes([worker])
        shutil.rmtree(self.dir, ignore_errors=True)


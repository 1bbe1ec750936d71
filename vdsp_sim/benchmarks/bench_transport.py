"""The cost of CURVE over tcp, beside ipc, in one run: two private SoCs side by side (relay +
vdsp0 + vdsp1 each), one on ipc sockets, one on loopback tcp with CURVE on every endpoint
(server keys, an allow-list, the relay's admin key). Relay mode, rounds interleaved:

- PING p50 / p99 latency, one task at a time;
- PING tasks/s with 32 tasks in flight;
- MEMCPY of a 4 KiB and a 4 MiB buffer (handles only: the bytes stay in DDR), p50.

Prints each figure and the ratio tcp+CURVE / ipc. ``vdsp bench transport [--quick]``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

from vdsp_sim.benchmarks.bench_rpc import median, pct, progress, window_loop
from vdsp_sim.benchmarks.report import Report

WINDOW = 32


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@contextlib.contextmanager
def _env(values: dict[str, str | None]):
    saved = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class PrivateSoc:
    """A SoC in its own runtime dir (ipc, or loopback tcp with CURVE) and one relay-mode client."""

    def __init__(self, transport: str, base: Path) -> None:
        self.transport, self.rt = transport, base / transport
        self.rt.mkdir(mode=0o700)
        self.env: dict[str, str | None] = {"VDSP_RUNTIME_DIR": str(self.rt), "VDSP_KEYS_DIR": None,
                                           "VDSP_RELAY_ENDPOINT": None, "VDSP_CORE_ENDPOINTS": None}
        if transport == "tcp":
            relay, c0, c1 = _free_ports(3)   # each core's firmware takes the next port
            self.env.update(VDSP_RELAY_ENDPOINT=f"tcp://127.0.0.1:{relay}",
                            VDSP_CORE_ENDPOINTS=f"vdsp0=tcp://127.0.0.1:{c0},vdsp1=tcp://127.0.0.1:{c1}")
        self.sup = self.soc = None

    def start(self, timeout_s: float) -> None:
        from arm_side import Soc
        from vdsp_sim.supervisor import Supervisor
        with _env(self.env):
            self.sup = Supervisor(self.rt, log_dir=self.rt / "log")
            self.sup.start()
            self.sup.wait_ready(timeout_s)
            self.soc = Soc(strict=False, autostart_relay=False)

    def stop(self) -> None:
        if self.soc is not None:
            self.soc.close()
        if self.sup is not None:
            with _env(self.env):
                self.sup.stop()


def latency(soc, n: int) -> list[float]:
    from arm_side import CORE_ANY, opids
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        soc.rpc(opids.PING, core=CORE_ANY).wait(5000)
        out.append((time.perf_counter_ns() - t0) / 1000)
    return out


def throughput(soc, seconds: float) -> float:
    from arm_side import CORE_ANY, opids
    t0 = time.monotonic()
    n = window_loop(soc, opids.PING, CORE_ANY, WINDOW, t0 + 0.2, t0 + 0.2 + seconds)
    return n / seconds


def memcpy(soc, size: int, n: int) -> list[float]:
    from arm_side import CORE_ANY, opids
    src, dst = soc.mem.alloc(size), soc.mem.alloc(size)
    try:
        out = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            soc.rpc(opids.MEMCPY, inputs=[src], outputs=[dst], core=CORE_ANY).wait(10000)
            out.append((time.perf_counter_ns() - t0) / 1000)
        return out
    finally:
        src.free()
        dst.free()


def run(args: argparse.Namespace) -> dict:
    base = Path(tempfile.mkdtemp(prefix="vbt", dir="/tmp"))
    socs = {t: PrivateSoc(t, base) for t in ("ipc", "tcp")}
    samples: dict[str, dict[str, list[float]]] = {t: {} for t in socs}
    try:
        for soc in socs.values():
            progress(f"starting the {soc.transport} SoC")
            soc.start(args.start_timeout)
        for soc in socs.values():      # warm-up
            latency(soc.soc, 200)
        for r in range(args.rounds):
            progress(f"round {r + 1}/{args.rounds}")
            for t, soc in socs.items():
                s = samples[t]
                s.setdefault("lat", []).extend(latency(soc.soc, args.lat_n))
                s.setdefault("tput", []).append(throughput(soc.soc, args.tput_s))
                s.setdefault("copy4k", []).extend(memcpy(soc.soc, 4096, args.copy_n))
                s.setdefault("copy4m", []).extend(memcpy(soc.soc, 4 << 20, args.copy_n))
    finally:
        for soc in socs.values():
            soc.stop()
        shutil.rmtree(base, ignore_errors=True)
    rows = {}
    for t, s in samples.items():
        rows[t] = {"ping_p50_us": pct(s["lat"], 50), "ping_p99_us": pct(s["lat"], 99),
                   "tasks_per_s": median(s["tput"]), "memcpy_4k_p50_us": pct(s["copy4k"], 50),
                   "memcpy_4m_p50_us": pct(s["copy4m"], 50)}
    rows["ratio"] = {k: rows["tcp"][k] / rows["ipc"][k] for k in rows["ipc"]}
    return rows


def to_report(rows: dict, args: argparse.Namespace) -> Report:
    rep = Report("transport", args)
    rep.note(f"relay mode; {args.rounds} interleaved round(s); ipc vs loopback tcp with CURVE on every endpoint")
    rep.table("PING and MEMCPY through the relay (µs; tasks/s)", ["measure", "ipc", "tcp+CURVE", "tcp/ipc"],
              [[label, rows["ipc"][key], rows["tcp"][key], rows["ratio"][key]] for key, label in (
                  ("ping_p50_us", "PING p50 µs"), ("ping_p99_us", "PING p99 µs"),
                  ("tasks_per_s", f"PING tasks/s ({WINDOW} ahead)"), ("memcpy_4k_p50_us", "MEMCPY 4 KiB p50 µs"),
                  ("memcpy_4m_p50_us", "MEMCPY 4 MiB p50 µs"))])
    return rep


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vdsp bench transport", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 round, small counts (smoke test)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--lat-n", type=int, default=2000, help="PING samples per transport and round")
    ap.add_argument("--tput-s", type=float, default=2.0, help="seconds of pipelined PING per transport and round")
    ap.add_argument("--copy-n", type=int, default=300, help="MEMCPY samples per size, transport and round")
    ap.add_argument("--start-timeout", type=float, default=60.0, help="seconds to wait for each SoC")
    ap.add_argument("--json", metavar="FILE", help="also write the figures to FILE (schema vdsp-bench/1)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.quick:
        args.rounds, args.lat_n, args.tput_s, args.copy_n = 1, 200, 0.5, 50
    rows = run(args)
    return to_report(rows, args).finish(args.json, details=rows)


if __name__ == "__main__":
    sys.exit(main())

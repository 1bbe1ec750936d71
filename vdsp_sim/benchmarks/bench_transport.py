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
import shutil
import sys
import tempfile
import time
from typing import Any
from pathlib import Path

from vdsp_sim.benchmarks.bench_rpc import median, pct, progress, window_loop
from vdsp_sim.benchmarks.report import Report
from vdsp_board.config import clihelp, settings
from vdsp_sim.soc.private_soc import free_tcp_ports

WINDOW = 32


class TransportSoc:
    """A private SoC (vdsp_sim.soc.private_soc) on ipc, or on loopback tcp with CURVE, and one
    relay-mode client. ``ddr_dir``: the DDR directory to share (None: a fresh one)."""

    def __init__(self, transport: str, base: Path, ddr_dir: Path | None, timeout_s: float) -> None:
        from vdsp_sim.soc.private_soc import PrivateSoc, PrivateSocConfig
        self.transport, rt = transport, base / transport
        rt.mkdir(mode=0o700)
        endpoints: dict = {}
        if transport == "tcp":
            relay, c0, c1 = free_tcp_ports(3, with_next=True)   # each core's firmware takes the next port
            endpoints = {"relay_endpoint": f"tcp://127.0.0.1:{relay}",
                         "core_endpoints": {"vdsp0": f"tcp://127.0.0.1:{c0}", "vdsp1": f"tcp://127.0.0.1:{c1}"}}
        self.private = PrivateSoc(PrivateSocConfig(runtime_dir=rt, ddr_dir=ddr_dir, env={"VDSP_KEYS_DIR": None},
                                                   mode=settings.current().raw("VDSP_RPC_MODE"), strict_cache=None,
                                                   ready_timeout_s=timeout_s, **endpoints))
        self.soc: Any = None      # an arm_side.Soc once started

    def start(self) -> None:
        from arm_side import Soc
        self.private.start()
        self.soc = Soc(strict=False, autostart_relay=False)

    def stop(self) -> None:
        if self.soc is not None:
            self.soc.close()
        self.private.close()


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
    socs: dict[str, TransportSoc] = {}
    samples: dict[str, dict[str, list[float]]] = {t: {} for t in ("ipc", "tcp")}
    try:
        for t in samples:
            progress(f"starting the {t} SoC")
            shared = socs["ipc"].private.ddr_dir if socs else None    # clients of both allocate in one DDR dir
            socs[t] = TransportSoc(t, base, shared, args.start_timeout)
            socs[t].start()
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
        for soc in reversed(socs.values()):     # the last started first: each restores the environment before it
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
    args = clihelp.finish(parser()).parse_args(argv)
    if args.quick:
        args.rounds, args.lat_n, args.tput_s, args.copy_n = 1, 200, 0.5, 50
    rows = run(args)
    return to_report(rows, args).finish(args.json, details=rows)


if __name__ == "__main__":
    from vdsp_board.processes import proc
    proc.exit_on_sigterm()      # a SIGTERM (timeout, kill) still stops the SoCs it started
    sys.exit(main())

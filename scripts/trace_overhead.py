#!/usr/bin/env python3
"""Tracing overhead on one SoC: RPC throughput with tracing off and on, interleaved rounds.

Starts a private SoC (relay + vdsp0 + vdsp1), then alternates tracing off / on (the flag
file every process watches: ``vdsp_board.observability.trace``) and measures, in each state, the
throughput of the RPC benchmark's pipelined run: two relay-mode clients (threads), 32 PING
tasks outstanding each, for ``--seconds`` after a warm-up. The SDK's stamps are made the way
client.py will make them (``arm_side.tracing``: submit before the send, complete at the
reply), in both states, so that "off" includes their cost when off. Prints the median
throughput of each state, the ratio on/off, and how much each traced round wrote.

    .venv/bin/python scripts/trace_overhead.py [--rounds 5] [--seconds 3] [--json FILE]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WINDOW = 32


def tree_cpu() -> float:
    """CPU seconds of this process and every process below it (the SoC's, started here)."""
    from vdsp_sim.benchmarks.bench_rpc import cpu_seconds, descendants
    return sum(cpu_seconds(pid) for pid in descendants(os.getpid()))


def run_clients(socs, tracer, seconds: float, warm_s: float = 0.5) -> float:
    from arm_side import CORE_ANY, opids
    t_start = time.monotonic() + warm_s
    t_end = t_start + seconds
    counts = [0] * len(socs)

    def loop(i: int) -> None:
        soc, q, n = socs[i], collections.deque(), 0
        while True:
            while len(q) < WINDOW:
                t0 = tracer.wait_begin() or None
                task = soc.rpc(opids.PING, core=CORE_ANY)
                tracer.submit(task.msg_id, opids.PING, ts=t0)
                q.append(task)
            task = q.popleft()
            task.wait(10000)
            tracer.complete(task.msg_id, core=task.core)
            now = time.monotonic()
            if now >= t_end:
                break
            if now >= t_start:
                n += 1
        for task in q:
            task.wait(10000)
        counts[i] = n

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(socs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    from arm_side import Soc
    from arm_side.tracing import sdk_tracer
    from vdsp_board.observability import trace
    from vdsp_sim.soc.private_soc import PrivateSoc, PrivateSocConfig
    private = PrivateSoc(PrivateSocConfig(strict_cache=None, env={"VDSP_TRACE_DIR": None}))
    results = {"off": [], "on": []}
    cpu = {"off": [], "on": []}      # CPU µs per task, every process of the SoC and the clients
    written = []
    try:
        private.start()
        directory = trace.trace_dir(private.rt)
        socs = [Soc(mode="relay", autostart_relay=False) for _ in range(2)]
        tracer = sdk_tracer()
        run_clients(socs, tracer, 1.0)           # warm every path once
        for r in range(args.rounds):
            for state in (("off", "on") if r % 2 == 0 else ("on", "off")):
                if state == "on":
                    session = trace.start(directory)
                    trace.wait_started(Path(session["dir"]), 3)
                    tracer.poll(force=True)
                cpu0 = tree_cpu()
                tput = run_clients(socs, tracer, args.seconds)
                results[state].append(tput)
                cpu[state].append((tree_cpu() - cpu0) / (tput * (args.seconds + 0.5)) * 1e6)
                if state == "on":
                    trace.stop(directory)
                    tracer.poll(force=True)
                    files = trace.wait_ended(Path(session["dir"]), 3)
                    events = sum(len(trace.read(f)[1]) for f in files)
                    size = sum(f.stat().st_size for f in files)
                    written.append({"events": events, "bytes": size})
                    shutil.rmtree(session["dir"], ignore_errors=True)
                else:
                    time.sleep(0.3)
                print(f"round {r + 1} tracing {state:3}: {tput:8.0f} tasks/s, {cpu[state][-1]:5.0f} CPU µs/task",
                      file=sys.stderr, flush=True)
        for soc in socs:
            soc.close()
    finally:
        private.close()
    off, on = statistics.median(results["off"]), statistics.median(results["on"])
    cpu_off, cpu_on = statistics.median(cpu["off"]), statistics.median(cpu["on"])
    report = {"rounds": args.rounds, "seconds": args.seconds, "tasks_per_s": results, "cpu_us_per_task": cpu,
              "median_cpu_us_off": cpu_off, "median_cpu_us_on": cpu_on,
              "median_off": off, "median_on": on, "ratio_on_over_off": on / off if off else None,
              "written_per_traced_round": written, "cpus": os.cpu_count()}
    print(f"tracing off: median {off:.0f} tasks/s  {[round(x) for x in results['off']]}")
    print(f"tracing on:  median {on:.0f} tasks/s  {[round(x) for x in results['on']]}")
    print(f"throughput on/off: {on / off:.3f}  ({(1 - on / off) * 100:+.1f} % cost)")
    print(f"CPU per task (all processes): off {cpu_off:.0f} µs, on {cpu_on:.0f} µs "
          f"({(cpu_on / cpu_off - 1) * 100:+.1f} %)")
    if written:
        print(f"per traced round: {statistics.median(w['events'] for w in written):.0f} events, "
              f"{statistics.median(w['bytes'] for w in written) / 1e6:.2f} MB")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

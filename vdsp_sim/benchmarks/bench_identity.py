"""The cost of proving a DDR owner over ipc beside another user's lock flood (issue 21), in one run:
a private SoC (relay + vdsp0 + vdsp1) and, in turn, 0, 200k and 1M flock locks held by uid 65534
(``vdsp_sim.lockflood``; needs root). At each level:

- the check alone (``Ownership.claim`` over a real ipc connection: pidfd, fdinfo, liveness), wall
  and CPU ms;
- a HELLO round trip to the relay and to vdsp0's firmware on a fresh connection of an owner older
  than the flood, ms;
- for comparison, the old check's floor: one read of ``/proc/locks`` up to the 8 MiB it stopped at.

Target: the check costs at most 5 ms at every level (its median wall time, and its CPU time at the
99th percentile: on a loaded host the wall-time tail is time spent waiting for a CPU). ``vdsp bench identity [--quick]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from vdsp_sim.benchmarks.bench_rpc import median, pct, progress
from vdsp_sim.benchmarks.report import Report
from vdsp_board import clihelp

OLD_LIMIT = 8 << 20         # bytes of /proc/locks the old check read at most


def check_ms(n: int) -> tuple[list[float], list[float]]:
    """The verification alone, wall and CPU (this thread's user + system) ms: this process's owner
    claimed over a real ipc ROUTER/DEALER pair."""
    import tempfile
    import zmq
    from vdsp_board import ddr
    from vdsp_board.ownership import Ownership
    me = ddr.current_owner()
    judge = Ownership("bench")
    ctx = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    with tempfile.TemporaryDirectory(prefix="vbi") as d:
        router.bind(f"ipc://{d}/s")
        dealer.connect(f"ipc://{d}/s")
        wall: list[float] = []
        cpu: list[float] = []
        try:
            for _ in range(n):
                dealer.send(b"x")
                frame = router.recv(copy=False)
                router.recv()
                t0, c0 = time.perf_counter(), time.thread_time()
                assert judge.claim({"role": "client", "owner": me.id, "lock_fd": me.lock_fd}, frame) == me.id
                cpu.append((time.thread_time() - c0) * 1e3)
                wall.append((time.perf_counter() - t0) * 1e3)
        finally:
            router.close(0)
            dealer.close(0)
            ctx.term()
    return wall, cpu


def hello_ms(url: str, n: int) -> list[float]:
    """HELLO -> READY on ``n`` fresh connections of this process's owner."""
    import zmq
    from protocol import messages, wire
    from vdsp_board import ddr
    me = ddr.current_owner()
    ctx = zmq.Context()
    out = []
    try:
        for i in range(n):
            sock = ctx.socket(zmq.DEALER)
            sock.linger = 0
            sock.connect(url)
            t0 = time.perf_counter()
            sock.send_multipart(wire.encode(messages.hello(i + 1, "client", owner=me.id, lock_fd=me.lock_fd)))
            while True:
                if not sock.poll(60_000):
                    raise RuntimeError(f"no answer to HELLO at {url} within 60 s")
                reply = wire.decode(sock.recv_multipart())
                if reply.msg_id == i + 1:
                    break
            out.append((time.perf_counter() - t0) * 1e3)
            sock.close(0)
            if reply.command is not wire.Command.READY:
                raise RuntimeError(f"HELLO refused at {url}: {reply.body}")
    finally:
        ctx.term()
    return out


def proc_locks_ms() -> float:
    """One read of /proc/locks, stopping at OLD_LIMIT bytes as the old check did."""
    t0, read = time.perf_counter(), 0
    with open("/proc/locks", "rb", buffering=0) as fh:
        while read < OLD_LIMIT:
            chunk = fh.read(64 << 10)
            if not chunk:
                break
            read += len(chunk)
    return (time.perf_counter() - t0) * 1e3


def run(args: argparse.Namespace) -> dict:
    from vdsp_sim.private_soc import PrivateSoc, PrivateSocConfig
    from vdsp_board import ddr
    rows: dict = {}
    with PrivateSoc(PrivateSocConfig(env={"VDSP_KEYS_DIR": None}, ready_timeout_s=args.start_timeout)) as private:
        ddr.current_owner()                 # our owner predates every flood
        urls = {"relay": f"ipc://{private.rt}/relay.sock", "firmware": f"ipc://{private.rt}/vdsp0.fw.sock"}
        try:
            _levels(args, urls, rows)
        finally:
            ddr.close_owner(str(private.ddr_dir))
    return rows


def _levels(args: argparse.Namespace, urls: dict, rows: dict) -> None:
    from vdsp_sim.lockflood import LockFlood
    for level in args.levels:
        progress(f"{level} foreign locks: holding them")
        t0 = time.monotonic()
        with LockFlood(level):
            up_s = time.monotonic() - t0
            progress(f"{level} foreign locks: measuring")
            check, cpu = check_ms(args.n)
            rows[level] = {"flood_up_s": up_s, "check_p50_ms": median(check), "check_p99_ms": pct(check, 99),
                           "check_max_ms": max(check), "check_cpu_p50_ms": median(cpu),
                           "check_cpu_p99_ms": pct(cpu, 99), "load": os.getloadavg()[0]}
            for name, url in urls.items():
                rtt = hello_ms(url, args.hello_n)
                rows[level][f"{name}_hello_p50_ms"] = median(rtt)
                rows[level][f"{name}_hello_max_ms"] = max(rtt)
            if args.old_floor:
                rows[level]["proc_locks_read_ms"] = proc_locks_ms()


def to_report(rows: dict, args: argparse.Namespace) -> Report:
    rep = Report("identity", args)
    rep.note("foreign locks: one open + flock(LOCK_SH) each, held by processes of uid 65534; "
             "our owner's lock is older than the flood")
    keys = (("check_p50_ms", "check p50 ms"), ("check_p99_ms", "check p99 ms"), ("check_max_ms", "check max ms"),
            ("check_cpu_p50_ms", "check CPU p50 ms"), ("check_cpu_p99_ms", "check CPU p99 ms"),
            ("relay_hello_p50_ms", "HELLO relay p50 ms"), ("relay_hello_max_ms", "HELLO relay max ms"),
            ("firmware_hello_p50_ms", "HELLO firmware p50 ms"), ("firmware_hello_max_ms", "HELLO firmware max ms"),
            ("proc_locks_read_ms", "old floor: /proc/locks read ms"), ("flood_up_s", "flood set up s"),
            ("load", "load (1 min)"))
    levels = list(rows)
    rep.table("HELLO verification beside a lock flood", ["measure", *[f"{n} locks" for n in levels]],
              [[label, *[rows[n].get(key, "-") for n in levels]] for key, label in keys])
    for n in levels:     # wall time p99 on a shared 2-CPU host is mostly waiting for a CPU: reported, not judged
        rep.target(f"check p50 with {n} foreign locks (ms)", rows[n]["check_p50_ms"], "<=", 5.0)
        rep.target(f"check CPU p99 with {n} foreign locks (ms)", rows[n]["check_cpu_p99_ms"], "<=", 5.0)
    return rep


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vdsp bench identity", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="0 and 100k locks, small counts (smoke test)")
    ap.add_argument("--levels", type=int, nargs="+", default=[0, 200_000, 1_000_000],
                    help="numbers of foreign locks (default 0 200000 1000000)")
    ap.add_argument("-n", type=int, default=500, help="checks per level")
    ap.add_argument("--hello-n", type=int, default=30, help="HELLO round trips per level and server")
    ap.add_argument("--no-old-floor", dest="old_floor", action="store_false",
                    help="skip the /proc/locks read (seconds under a big flood)")
    ap.add_argument("--start-timeout", type=float, default=60.0, help="seconds to wait for the SoC")
    ap.add_argument("--json", metavar="FILE", help="also write the figures to FILE (schema vdsp-bench/1)")
    ap.add_argument("--fail-on-miss", action="store_true", help="exit status 3 if a target is missed")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = clihelp.finish(parser()).parse_args(argv)
    if args.quick:
        args.levels, args.n, args.hello_n = [0, 100_000], 100, 10
    if os.geteuid() != 0:
        print("vdsp bench identity: the lock flood runs as another user: run as root", file=sys.stderr)
        return 2
    rows = run(args)
    return to_report(rows, args).finish(args.json, args.fail_on_miss, details=rows)


if __name__ == "__main__":
    from vdsp_board import proc
    proc.exit_on_sigterm()      # a SIGTERM (timeout, kill) still stops the SoC it started
    sys.exit(main())

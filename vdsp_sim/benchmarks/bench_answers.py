"""How soon a firmware answers while a task runs (issue 34): CANCEL of a task queued behind a 2 s one,
through the relay and in direct mode, and refusals past the firmware's inbox limit (direct), behind
a task that lets go of the GIL while it computes (``sleep``, like OpenCV and numba) and behind a
pure-Python operator that holds it (``spin``, in a custom image built for the run and loaded on
vdsp1). One private SoC; each CANCEL at a random moment of the long task.

Target (PROTOCOL.md §5.5 and §12): every answer within 100 ms. ``vdsp bench answers [--quick]``.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from vdsp_sim.benchmarks.bench_rpc import median, pct, progress
from vdsp_sim.benchmarks.report import Report
from vdsp_board.config import clihelp

BOUND_MS = 100.0
LONG_MS = 2000
SPIN_OP = 0x1400
SPIN_FIRMWARE = '''"""A firmware whose operator computes in pure Python, holding the GIL (vdsp bench answers)."""
import time

VERSION = "1.0.0"


def spin(ctx, inputs, outputs, ms):
    """Loop in pure Python for ``ms`` milliseconds."""
    end, n = time.perf_counter() + ms / 1000.0, 0
    while time.perf_counter() < end:
        n += 1
    return {"loops": n}


def register(registry):
    registry.register(0x1400, "spin", spin, params={"ms": {"type": "float", "min": 0.0, "max": 20000.0}})
'''


def load_spin(rt: Path, core: str) -> None:
    """Build the spin image under the runtime directory's key and run it on ``core``."""
    from arm_side import Soc
    from dsp_side import fw_image
    from vdsp_board.processes import rundir
    with tempfile.TemporaryDirectory(prefix="vdsp-spin-") as src:
        (Path(src) / "firmware.py").write_text(SPIN_FIRMWARE)
        fw_image.build(Path(src), rundir.firmware_dir(rt) / "spin")
    with Soc(mode="direct") as soc:
        soc.control(core, "state", "stop")
        soc.control(core, "firmware", "spin")
        if soc.control(core, "state", "start") != "running":
            raise RuntimeError(f"{core} did not run the spin image")


def cancels_ms(soc, op: int, core: int, behind: int) -> list[float]:
    """``behind`` PINGs queued behind one LONG_MS task, released 5 ms into it (the first at once:
    the busy thread of the former design served only from 20 ms on) and then at random moments of it."""
    from arm_side import opids
    blocker = soc.rpc(op, params={"ms": LONG_MS}, core=core)
    victims = [soc.rpc(opids.PING, core=core) for _ in range(behind)]
    start = time.monotonic()
    out = []
    moments = [0.005] + sorted(random.uniform(0, LONG_MS / 1000 * 0.8) for _ in victims[1:])   # the first: at once
    for victim, at in zip(victims, moments):
        time.sleep(max(0.0, start + at - time.monotonic()))
        t0 = time.perf_counter()
        outcome = victim.release()
        out.append((time.perf_counter() - t0) * 1e3)
        if outcome != "cancelled":
            raise RuntimeError(f"a queued PING was released as {outcome!r}")
    blocker.wait(LONG_MS + 30_000)
    return out


def refusals_ms(url: str, op: int, extra: int) -> list[float]:
    """Direct, on one connection: a LONG_MS task, then one peer's inbox share of PINGs and ``extra``
    more; ms from sending each of those to its refusal."""
    import zmq
    from dsp_side.inbox import MAX_WAITING_PER_PEER
    from protocol import messages, opids, wire
    from vdsp_board.sockets import ipclink
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    linked = ipclink.connect(sock, url)     # ipc: once, through the checked directory
    try:
        sock.send_multipart(wire.encode(messages.task(1, op, inputs=[], outputs=[], params={"ms": LONG_MS})))
        time.sleep(random.uniform(0.1, LONG_MS / 1000 * 0.5))
        sent = {}
        for i in range(MAX_WAITING_PER_PEER + extra):
            sent[100 + i] = time.perf_counter()
            sock.send_multipart(wire.encode(messages.task(100 + i, opids.PING, inputs=[], outputs=[])))
        out, answered, deadline = [], 0, time.monotonic() + LONG_MS / 1000 + 30
        while answered < len(sent) + 1 and time.monotonic() < deadline:
            if sock.poll(100):
                reply = wire.decode(sock.recv_multipart())
                answered += 1
                if reply.command is wire.Command.ERROR:
                    out.append((time.perf_counter() - sent[reply.msg_id]) * 1e3)
        if len(out) != extra:
            raise RuntimeError(f"{len(out)} refusals for {extra} tasks past the inbox limit")
        return out
    finally:
        sock.close(0)
        if linked is not None:
            linked.close()
        ctx.destroy(linger=0)


def run(args: argparse.Namespace) -> dict:
    from arm_side import CORE_0, CORE_1, Soc, opids
    from vdsp_sim.soc.private_soc import PrivateSoc, PrivateSocConfig
    rows: dict = {}
    with PrivateSoc(PrivateSocConfig(ready_timeout_s=args.start_timeout)) as private:
        progress("loading the spin image on vdsp1")
        assert private.rt is not None       # set once started
        load_spin(private.rt, "vdsp1")
        kinds = {"sleep (lets go of the GIL)": (opids.SLEEP, CORE_0, "vdsp0"),
                 "spin (pure Python, holds the GIL)": (SPIN_OP, CORE_1, "vdsp1")}
        for kind, (op, core, name) in kinds.items():
            for mode in ("relay", "direct"):
                progress(f"CANCEL of a queued PING behind {kind}, {mode}")
                with Soc(mode=mode) as soc:
                    rows[f"CANCEL, {mode}, behind {kind}"] = sum(
                        (cancels_ms(soc, op, core, args.behind) for _ in range(args.rounds)), [])
            progress(f"refusals past the inbox limit behind {kind}, direct")
            rows[f"refusal, direct, behind {kind}"] = sum(
                (refusals_ms(f"ipc://{private.rt}/{name}.fw.sock", op, args.extra) for _ in range(args.rounds)), [])
    return rows


def to_report(rows: dict, args: argparse.Namespace) -> Report:
    rep = Report("answers", args)
    rep.note("load average (1 min) at the end: %.1f on %d CPUs: the bound is for a host with a CPU to spare"
             % (os.getloadavg()[0], os.cpu_count() or 1))
    rep.note(f"each behind a {LONG_MS} ms task; a CANCEL at a random moment of it (the firmware's I/O thread "
             "serves its socket all along: dsp_side/fwio.py)")
    rep.table("answers while a task runs (ms)", ["answer", "n", "p50", "p90", "max"],
              [[name, len(v), median(v), pct(v, 90), max(v)] for name, v in rows.items()])
    for name, v in rows.items():
        rep.target(f"{name}: max (ms)", max(v), "<=", BOUND_MS)
    return rep


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vdsp bench answers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one round, fewer tasks (smoke test)")
    ap.add_argument("--rounds", type=int, default=4, help="long tasks per row (default 4)")
    ap.add_argument("--behind", type=int, default=10, help="PINGs released during each long task (default 10)")
    ap.add_argument("--extra", type=int, default=16, help="tasks past the inbox limit per flood (default 16)")
    ap.add_argument("--start-timeout", type=float, default=120.0, help="seconds to wait for the SoC")
    ap.add_argument("--json", metavar="FILE", help="also write the figures to FILE (schema vdsp-bench/1)")
    ap.add_argument("--fail-on-miss", action="store_true", help="exit status 3 if a target is missed")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = clihelp.finish(parser()).parse_args(argv)
    if args.quick:
        args.rounds, args.behind, args.extra = 1, 5, 8
    rows = run(args)
    return to_report(rows, args).finish(args.json, args.fail_on_miss, details=rows)


if __name__ == "__main__":
    from vdsp_board.processes import proc
    proc.exit_on_sigterm()      # a SIGTERM (timeout, kill) still stops the SoC it started
    sys.exit(main())

"""``vdsp top``: a live terminal view of a running SoC (rich).

Every ``--interval`` seconds it asks the relay for its ``stats`` view (a QUERY: it works
wherever the SDK reaches the relay, ipc or tcp with CURVE keys) and shows per core its
state, tasks in flight, utilisation (the share of the interval it had tasks at its firmware)
and crashes; tasks/s; p50/p99 latency (relay enqueue to reply) and counts by operator; the
queue by priority class; the clients that submitted most. Ctrl-C ends it.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

STATE_STYLE = {"running": "green", "crashed": "bold red", "dead": "bold red", "offline": "yellow",
               "booting": "cyan", "unknown": "dim"}
CLASSES = ("preempt", "high", "normal", "low")


def rates(stats: dict, prev: dict | None, dt: float) -> dict:
    """Per-interval figures from two consecutive stats: tasks/s, and each core's utilisation."""
    out: dict[str, Any] = {"tasks_per_s": None, "util": {}}
    if prev is None or dt <= 0:
        return out
    out["tasks_per_s"] = max(0, stats.get("completed", 0) - prev.get("completed", 0)) / dt
    before = {c["name"]: c.get("busy_s", 0.0) for c in prev.get("cores", [])}
    for core in stats.get("cores", []):
        if core["name"] in before:
            out["util"][core["name"]] = min(1.0, max(0.0, (core.get("busy_s", 0.0) - before[core["name"]]) / dt))
    return out


def _ms(us) -> str:
    return "-" if us is None else f"{us / 1000:.2f}"


def render(stats: dict, prev: dict | None = None, dt: float = 0.0, where: str = "") -> Group:
    """The screen for ``stats`` (the relay's ``stats`` QUERY); ``prev`` the one ``dt`` s before."""
    r = rates(stats, prev, dt)
    tps = "-" if r["tasks_per_s"] is None else f"{r['tasks_per_s']:.0f}"
    head = Text.assemble(("vdsp top", "bold"), f"  {where}  relay pid {stats.get('pid', '?')}  up "
                         f"{stats.get('uptime_s', 0):.0f} s  |  tasks/s ", (tps, "bold"),
                         f"  submitted {stats.get('submitted', 0)}  completed {stats.get('completed', 0)}  "
                         f"failed {stats.get('failed', 0)}  rejected {stats.get('rejected', 0)}  "
                         f"clients {stats.get('clients', 0)}")
    cores = Table(title="cores", box=box.SIMPLE_HEAD, title_justify="left", expand=False)
    for col, just in (("core", "left"), ("state", "left"), ("in flight", "right"), ("util", "right"),
                      ("crashes", "right"), ("firmware", "left")):
        cores.add_column(col, justify=just)  # type: ignore[arg-type]  # "left" / "right"
    for core in stats.get("cores", []):
        util = r["util"].get(core["name"])
        bar = "-" if util is None else f"{util * 100:5.1f}% " + "█" * round(util * 10) + "·" * (10 - round(util * 10))
        state = core.get("state", "?")
        cores.add_row(core["name"], Text(state, STATE_STYLE.get(state, "")), str(core.get("inflight", 0)), bar,
                      str(core.get("crash_count", 0)), core.get("firmware_version", "") or "-")
    queue = Table(title=f"relay queue: {stats.get('queued', 0)} tasks", box=box.SIMPLE_HEAD, title_justify="left")
    for cls in CLASSES:
        queue.add_column(cls, justify="right")
    by_class = stats.get("queue_by_class", {})
    queue.add_row(*(str(by_class.get(cls, 0)) for cls in CLASSES))
    ops = Table(title="operators (relay enqueue to reply)", box=box.SIMPLE_HEAD, title_justify="left")
    for col, just in (("op", "left"), ("name", "left"), ("completed", "right"), ("failed", "right"),
                      ("p50 ms", "right"), ("p99 ms", "right")):
        ops.add_column(col, justify=just)  # type: ignore[arg-type]
    operators = stats.get("operators", {})
    for op in sorted(operators, key=lambda o: -operators[o].get("completed", 0)):
        o = operators[op]
        ops.add_row(op, o.get("name", "") or "-", str(o.get("completed", 0)), str(o.get("failed", 0)),
                    _ms(o.get("p50_us")), _ms(o.get("p99_us")))
    clients = Table(title="top clients", box=box.SIMPLE_HEAD, title_justify="left")
    for col, just in (("client", "left"), ("pid", "right"), ("submitted", "right"), ("completed", "right"),
                      ("in flight", "right"), ("", "left")):
        clients.add_column(col, justify=just)  # type: ignore[arg-type]
    for c in stats.get("top_clients", []):
        clients.add_row(c.get("name", "?"), str(c.get("pid", "")), str(c.get("submitted", 0)),
                        str(c.get("completed", 0)), str(c.get("inflight", 0)), "" if c.get("connected") else "gone")
    errors_by_code = stats.get("failed_by_code", {})
    parts: list[Any] = [head, cores, queue, ops, clients]
    if errors_by_code:
        parts.append(Text("errors by code: " + ", ".join(f"{k}: {v}" for k, v in sorted(errors_by_code.items()))))
    parts.append(Text("Ctrl-C to quit", style="dim"))
    return Group(*parts)


DESCRIPTION = __doc__.split("\n\n")[0]


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of 'vdsp top' (vdsp_sim/commands/top.py)."""
    ap.add_argument("-n", "--interval", type=float, default=1.0, help="seconds between refreshes")
    ap.add_argument("--iterations", type=int, default=0, help="stop after this many refreshes (0: until Ctrl-C)")
    ap.add_argument("--once", action="store_true", help="print one screen (two samples --interval apart) and exit")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vdsp top", description=DESCRIPTION)
    add_arguments(ap)
    return run_args(ap.parse_args(argv))


def run_args(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.live import Live
    from arm_side import Soc
    from protocol import errors
    from vdsp_board.config import settings
    from vdsp_board.processes import rundir
    console = Console()
    where = settings.current().relay_endpoint or str(rundir.runtime_dir(create=False))
    try:
        # a loaded host answers late: wait while the relay lives; a SoC that is down fails at once
        soc = Soc(mode="relay", autostart_relay=False, connect_timeout_s=30.0)
    except errors.VdspError as exc:
        print(f"vdsp top: no relay answers ({exc}); is a SoC up? ('vdsp up -d')", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    try:
        prev, t_prev = soc.query("stats"), time.monotonic()
        if args.once:
            time.sleep(args.interval)
            console.print(render(soc.query("stats"), prev, time.monotonic() - t_prev, where))
            return 0
        n = 0
        with Live(render(prev, None, 0.0, where), console=console, refresh_per_second=4, screen=False) as live:
            while not args.iterations or n < args.iterations:
                time.sleep(args.interval)
                stats, now = soc.query("stats"), time.monotonic()
                live.update(render(stats, prev, now - t_prev, where))
                prev, t_prev = stats, now
                n += 1
        return 0
    except KeyboardInterrupt:
        return 0
    except errors.VdspError as exc:
        print(f"vdsp top: {exc}", file=sys.stderr)
        return 1
    finally:
        try:
            soc.close()
        except Exception:
            pass


if __name__ == "__main__":
    sys.exit(main())

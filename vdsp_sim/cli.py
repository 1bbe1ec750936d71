"""``vdsp``: run and inspect the simulated SoC.

  vdsp up [-d]          start relay + vdsp0 + vdsp1 (foreground; -d: background) and restart any that dies
  vdsp down             stop the SoC of this runtime directory
  vdsp status [--json]  cores, state, firmware version, operators; restarts of each process
  vdsp health [--core NAME]  a buffer round trip through each core (exit 0 only if the bytes come back)
  vdsp dmesg            remoteproc kernel log
  vdsp core ...         run one core process (used by ``up`` and docker-compose)
  vdsp firmware build SRC_DIR -o FILE / info FILE   DSP firmware images (signed)
  vdsp firmware keygen|trust FILE.pub|untrust NAME|trusted   the keys whose images the cores boot
  vdsp sysfs cat|echo|ls  the remoteproc sysfs files (/sys/class/remoteproc/remoteproc1/state ...)
  vdsp deploy IMAGE_DIR   stop both cores, install images vdsp0/vdsp1, start them
  vdsp sample smoke     PING every core and run memory operators, with timings
  vdsp bench [NAME]     benchmarks: rpc, cv, nn, dnn, pointcloud, transport, perf ('vdsp bench --help')
  vdsp loadtest         many clients, mixed priorities and cores, every output verified
  vdsp fuzz             structure-aware fuzzing of every peer; all processes must keep serving
  vdsp trace -o F -- CMD  one timeline of every task across the SoC's processes while CMD runs (Perfetto JSON, --png)
  vdsp top              live view of a running SoC: cores, utilisation, tasks/s, p50/p99 by operator, queue, clients
  vdsp keys             CURVE keys of the tcp endpoints (server pair, allowed client and admin keys)
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from protocol import errors
from protocol.constants import DEFAULT_WATCHDOG_MS
from vdsp_sim.board import clihelp, log as soclog, runtime, settings
from vdsp_sim.board.pidfile import PidFile, supervisor_state


def _pidfile(rt: Path) -> PidFile:
    return PidFile(rt / "soc.pid")


def cmd_up(args: argparse.Namespace) -> int:
    from vdsp_sim.supervisor import TICK_S, Supervisor
    rt = runtime.runtime_dir()
    pidfile = _pidfile(rt)
    if pidfile.read() is not None:
        print(f"vdsp up: a SoC is already up in {rt} (pid {pidfile.read()}); 'vdsp down' first", file=sys.stderr)
        return 1
    if args.detach:
        return _up_detached(rt, args)
    soclog.setup("dsp")
    sup = Supervisor(rt, log_dir=rt / "log" if args.log_files else None,
                     core_args=["--watchdog-ms", str(args.watchdog_ms),
                                *(["--allow-unsigned"] if args.allow_unsigned else [])], restart=True)
    if args.allow_unsigned:
        print("vdsp up: --allow-unsigned: the cores also boot UNSIGNED firmware images (development only)",
              file=sys.stderr, flush=True)
    pidfile.acquire()
    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        sup.start()
        status = sup.wait_ready(args.timeout or None)
        print(f"SoC up in {rt}: " + ", ".join(f"{c['name']} {c['state']} fw {c.get('firmware_version', '?')}"
                                              for c in status["cores"]), flush=True)
        while not stop["now"]:   # a process that exits is restarted (or given up): see vdsp_sim/supervisor.py
            sup.tick()
            time.sleep(TICK_S)
        return 0
    except errors.VdspError as exc:
        print(f"vdsp up: {exc}", file=sys.stderr)
        return 1
    finally:
        sup.stop()
        pidfile.release()
        print("SoC down", flush=True)


def _up_detached(rt: Path, args: argparse.Namespace) -> int:
    from vdsp_sim.supervisor import exit_text
    (rt / "log").mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "vdsp_sim.cli", "up", "--log-files", "--timeout", str(args.timeout),
           "--watchdog-ms", str(args.watchdog_ms)] + (["--allow-unsigned"] if args.allow_unsigned else [])
    log_path = rt / "log" / "vdsp_sim.board.log"
    start = log_path.stat().st_size if log_path.exists() else 0
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                                env=settings.child_env(VDSP_RUNTIME_DIR=str(rt)))
    # No clock of our own: the detached 'vdsp up' decides (it waits while the SoC's processes live
    # and progress) and either says "SoC up" or exits with the reason; we follow it.
    deadline = time.monotonic() + args.timeout + 5 if args.timeout else None
    while deadline is None or time.monotonic() < deadline:
        with open(log_path, "rb") as fh:
            fh.seek(start)
            text = fh.read().decode(errors="replace")
        if "SoC up in" in text:
            print(f"SoC up in {rt} (pid {proc.pid}); logs in {rt / 'log'}; stop with: vdsp down")
            return 0
        if proc.poll() is not None:
            why = [line for line in text.splitlines() if line.startswith("vdsp up:")]
            print(f"vdsp up -d: the SoC failed to start ({why[-1][9:] if why else exit_text(proc.returncode)}); "
                  f"see {rt / 'log'}", file=sys.stderr)
            return 1
        time.sleep(0.1)
    print(f"vdsp up -d: the SoC did not run within --timeout {args.timeout:g} s; see {rt / 'log'}", file=sys.stderr)
    return 1


def cmd_down(args: argparse.Namespace) -> int:
    from vdsp_sim.supervisor import stop_pid
    rt = runtime.runtime_dir()
    stopped = []
    for name in ("soc", "relay"):
        pid = PidFile(rt / f"{name}.pid").read()
        if pid is not None:
            if not stop_pid(pid, args.timeout):
                print(f"vdsp down: {name} (pid {pid}) did not stop", file=sys.stderr)
                return 1
            stopped.append(f"{name} (pid {pid})")
    print(f"stopped {', '.join(stopped)}" if stopped else f"no SoC is up in {rt}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from arm_side.soc import Soc
    rt = runtime.runtime_dir()
    relay_up = PidFile(rt / "relay.pid").read() is not None or bool(settings.current().relay_endpoint)
    try:
        # a loaded host answers late: wait while the SoC's processes live (the SDK fails at once,
        # naming the process, when one exited or was given up)
        with Soc(mode="relay" if relay_up else "direct", autostart_relay=False,
                 connect_timeout_s=args.timeout) as soc:
            status = soc.query("cores")
            status["mode"] = soc.mode
    except errors.VdspError as exc:
        status = {"cores": [], "error": str(exc)}
    status["runtime_dir"] = str(rt)
    supervisor = supervisor_state(rt)
    if supervisor is not None:
        status["supervisor"] = {"pid": supervisor["supervisor_pid"], "state": supervisor.get("state", "?"),
                                "restart_policy": supervisor.get("restart_policy", {}),
                                "processes": supervisor.get("processes", {})}
    if args.json:
        print(json.dumps(status, indent=1))
    else:
        _print_status(status, verbose=args.verbose)
    gave_up = supervisor is not None and any(p.get("gave_up") for p in supervisor.get("processes", {}).values())
    running = status.get("cores") and all(c.get("state") == "running" for c in status["cores"])
    return 0 if running and not gave_up else 3


def _print_status(status: dict, verbose: bool = False) -> None:
    print(f"runtime dir: {status['runtime_dir']}" + (f"  (via {status['mode']})" if "mode" in status else ""))
    if "supervisor" in status:
        _print_supervisor(status["supervisor"])
    if "error" in status:
        print(f"SoC not reachable: {status['error']}")
        return
    print(f"{'core':8} {'state':10} {'firmware':10} {'crashes':>7} {'operators':>9}")
    for core in status["cores"]:
        ops = core.get("operators", [])
        print(f"{core['name']:8} {core.get('state', '?'):10} {core.get('firmware_version', '') or '-':10} "
              f"{core.get('crash_count', 0):>7} {len(ops):>9}")
    if verbose:     # every operator of every core, wrapped to the terminal
        import shutil
        import textwrap
        width = max(40, shutil.get_terminal_size().columns - 1)
        for core in status["cores"]:
            names = ", ".join(f"{o['name']}(0x{o['id']:04x})" for o in core.get("operators", []))
            print(textwrap.fill(names or "-", width, initial_indent=f"{core['name']} operators: ",
                                subsequent_indent="    "))
    elif any(core.get("operators") for core in status["cores"]):
        print("(operator names: vdsp status --verbose, or --json)")
    signers = [f"{c['name']} {c['firmware_signer']}" for c in status["cores"] if c.get("firmware_signer")]
    if signers:
        print(f"firmware signed by: {', '.join(signers)}")
    for core in status["cores"]:
        if core.get("allow_unsigned"):
            print(f"WARNING: {core['name']} runs with --allow-unsigned: it boots UNSIGNED firmware images "
                  "(development only)")


def _print_supervisor(sup: dict) -> None:
    policy = sup.get("restart_policy", {})
    print(f"supervisor: pid {sup['pid']}, {sup['state']}; gives a process up after {policy.get('burst', '?')} "
          f"exits within {policy.get('window_s', '?')} s")
    print(f"{'process':8} {'pid':>7}  {'state':10} {'restarts':>8}  last exit")
    for name, p in sup.get("processes", {}).items():
        note = ""
        if p.get("gave_up"):
            note = f"  -- gave up after {p.get('recent_exits', '?')} exits; not restarted"
        elif p.get("restart_in_s") is not None:
            note = f"  -- restarting in {p['restart_in_s']:.1f} s"
        state = "gave up" if p.get("gave_up") else p.get("state", "?")
        print(f"{name:8} {p.get('pid') or '-':>7}  {state:10} {p.get('restarts', 0):>8}  "
              f"{p.get('last_exit_text') or '-'}{note}")
    print()


def cmd_dmesg(args: argparse.Namespace) -> int:
    path = runtime.runtime_dir() / "dmesg"
    if path.exists():
        sys.stdout.write(path.read_text())
    return 0


def cmd_core(args: argparse.Namespace) -> int:
    from dsp_side import core_main
    core_main.run_from_args(args)
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    import importlib
    import pkgutil
    from vdsp_sim import samples
    names = sorted(m.name for m in pkgutil.iter_modules(samples.__path__) if m.name in samples.SAMPLES)
    if args.name in ("help", "list"):
        print("samples: " + ", ".join(names))
        return 0
    if args.name not in names:
        print(f"vdsp sample: unknown sample {args.name!r}; samples: {', '.join(names)}", file=sys.stderr)
        return 2
    return importlib.import_module(f"vdsp_sim.samples.{args.name}").main(args.rest)


def _benches() -> tuple[str, ...]:
    from vdsp_sim import benchmarks     # light: reads the package's file names
    return tuple(benchmarks.names())


BENCHES = _benches()

BENCH_HELP = """\
usage: vdsp bench [NAME ...] [OPTIONS]

Runs the named benchmarks (all of them by default), one after the other. Options go to a
single named benchmark: 'vdsp bench rpc --quick'; 'vdsp bench NAME --help' lists them.

benchmarks:
{table}

Every benchmark prints its figures as tables in one style (progress goes to stderr) and
writes the same JSON schema with --json FILE: {{"schema": "vdsp-bench/1", "benchmark",
"version", "args", "host", "tables": [{{"title", "columns", "rows"}}], "verdicts": [{{"name",
"value", "target", "passed"}}], "passed", "details"}} (vdsp_sim/benchmarks/report.py;
benchmarks/README.md in a checkout).

CI mode: --fail-on-miss (rpc, cv, nn, pointcloud, perf: the benchmarks with targets) exits 3
when a target is missed; without it the exit status is 0 when the run completes, PASS or MISS,
and 1 on an error. Most targets are ratios between figures of the same run, so a loaded machine
hits both sides alike; a MISS on a small shared VM is a figure to read, not necessarily a defect.
"""


def bench_help() -> str:
    import textwrap
    from vdsp_sim import benchmarks
    from vdsp_sim.board.clihelp import plain
    rows = [textwrap.fill(plain(benchmarks.summary(name)) or "", 96, initial_indent=f"  {name:11} ",
                          subsequent_indent=" " * 14) for name in BENCHES]
    return BENCH_HELP.format(table="\n".join(rows))


def cmd_bench(args: argparse.Namespace) -> int:
    """'vdsp bench [NAME ...] [OPTIONS]': run 'python -m vdsp_sim.benchmarks NAME' (all by default)."""
    rest = list(args.rest)
    names = []
    while rest and rest[0] in BENCHES:
        names.append(rest.pop(0))
    if not names and rest[:1] in (["-h"], ["--help"]):
        print(bench_help(), end="")
        return 0
    if rest[:1] and not rest[0].startswith("-"):
        print(f"vdsp bench: no benchmark {rest[0]!r}; benchmarks: {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    names = names or list(BENCHES)
    if rest and len(names) > 1:
        print("vdsp bench: options go with one named benchmark, e.g. vdsp bench rpc --quick", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        if len(names) > 1:
            print(f"=== vdsp bench {name}", flush=True)
        child = subprocess.Popen([sys.executable, "-m", "vdsp_sim.benchmarks", name, *rest])
        # a SIGTERM for us goes on to the benchmark, which then stops the SoCs it started
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: child.send_signal(signum))
        try:
            status |= child.wait()
        except KeyboardInterrupt:     # Ctrl-C reached the benchmark too: let it clean up
            child.wait()
            return 130
        finally:
            signal.signal(signal.SIGTERM, previous)
    return status


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vdsp", description="Run and inspect the simulated ARM + 2×DSP SoC.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start relay + vdsp0 + vdsp1 and restart any of them that dies",
                        description="Start relay + vdsp0 + vdsp1 and supervise them: a process that exits is "
                                    "restarted at once, then with a doubling backoff; after 5 exits within 30 s "
                                    "it is given up ('vdsp status' shows restarts and give-ups).")
    up.add_argument("-d", "--detach", action="store_true", help="run in the background; stop with 'vdsp down'")
    up.add_argument("--timeout", type=float, default=0.0,
                    help="at most this many seconds to wait for every core to run; 0: no limit, the wait "
                         "follows the processes (it fails at once when one exits or is given up, or when none "
                         "of them used CPU for 60 s)")
    up.add_argument("--watchdog-ms", type=int, default=DEFAULT_WATCHDOG_MS, help="firmware watchdog of each core")
    up.add_argument("--log-files", action="store_true", help="write each process's log under $VDSP_RUNTIME_DIR/log")
    up.add_argument("--allow-unsigned", action="store_true",
                    help="DEVELOPMENT ONLY: the cores also boot unsigned firmware images (logged at every boot, "
                         "shown by 'vdsp status')")
    up.set_defaults(fn=cmd_up)
    down = sub.add_parser("down", help="stop the SoC of this runtime directory")
    down.add_argument("--timeout", type=float, default=15.0,
                      help="seconds to wait for each process to stop after SIGTERM before it is killed")
    down.set_defaults(fn=cmd_down)
    st = sub.add_parser("status", help="cores, state, firmware version, operators; restarts of each process")
    st.add_argument("--json", action="store_true", help="machine-readable output (every field, every operator)")
    st.add_argument("--timeout", type=float, default=30.0,
                    help="seconds to wait for a SoC whose processes live but answer slowly; one that is "
                         "down is reported at once")
    st.add_argument("-v", "--verbose", action="store_true", help="also list every operator of every core")
    st.set_defaults(fn=cmd_status)
    sub.add_parser("dmesg", help="remoteproc kernel log of this SoC").set_defaults(fn=cmd_dmesg)
    health = sub.add_parser("health", help="a buffer round trip through each core; exit 0 only if the bytes "
                                           "come back (--help for options)")
    health.add_argument("rest", nargs=argparse.REMAINDER, metavar="ARGS", help="what 'vdsp health --help' lists")
    from dsp_side.core_main import add_arguments
    core = sub.add_parser("core", help="run one core process (remoteproc device + firmware)")
    add_arguments(core)
    core.set_defaults(fn=cmd_core)
    from vdsp_sim import firmware_cli, sysfs
    firmware_cli.add_parser(sub)
    sysfs.add_parsers(sub)
    sample = sub.add_parser("sample", help="run a sample against the SoC (starting one if none is up)")
    sample.add_argument("name", help="smoke, cv, nn ... ('help' lists them)")
    sample.add_argument("rest", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="the sample's own options and arguments ('vdsp sample NAME --help' lists them)")
    sample.set_defaults(fn=cmd_sample)
    sub.add_parser("loadtest", help="N client processes x M verified tasks; lost/duplicated/wrong counts, "
                                    "latency and queue wait per priority class (--help for options)")
    keys = sub.add_parser("keys", help="CURVE keys for tcp endpoints: init, add, allow, revoke, list (--help)")
    keys.add_argument("rest", nargs=argparse.REMAINDER, metavar="ARGS", help="what 'vdsp keys --help' lists")
    sub.add_parser("fuzz", help="structure-aware fuzzing of the relay, cores and firmwares; every process "
                                "must keep serving (--help for options)")
    sub.add_parser("trace", help="trace the running SoC while a command runs: Chrome/Perfetto JSON, --png "
                                 "timeline (--help for options)")
    sub.add_parser("top", help="live terminal view of a running SoC (--help for options)")
    bench = sub.add_parser("bench", help="benchmarks: " + ", ".join(BENCHES) + " ('vdsp bench --help')")
    bench.add_argument("rest", nargs=argparse.REMAINDER, metavar="NAME [OPTIONS]",
                       help="what 'vdsp bench --help' lists")
    bench.set_defaults(fn=cmd_bench)
    clihelp.add_version(ap)
    return clihelp.finish(ap)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return clihelp.exit_quietly_on_broken_pipe(lambda: _main(argv))


def _main(argv: list[str]) -> int:
    if argv[:1] == ["bench"]:  # every option belongs to the benchmark script
        return cmd_bench(argparse.Namespace(rest=argv[1:]))
    if argv[:1] == ["loadtest"]:
        from vdsp_sim import loadtest
        return loadtest.main(argv[1:])
    if argv[:1] == ["health"]:
        from vdsp_sim import health
        return health.main(argv[1:])
    if argv[:1] == ["trace"]:
        from vdsp_sim import trace_cli
        return trace_cli.main(argv[1:])
    if argv[:1] == ["top"]:
        from vdsp_sim import top
        return top.main(argv[1:])
    if argv[:1] == ["fuzz"]:
        from vdsp_sim import fuzz
        return fuzz.main(argv[1:])
    if argv[:1] == ["keys"]:
        from vdsp_sim.board import curve
        return curve.main(argv[1:])
    args = parser().parse_args(argv)
    if args.command in ("up", "core", "deploy"):   # SoC processes and what they install: private files
        from vdsp_sim.board import proc
        proc.private_umask()
    try:
        return args.fn(args) or 0
    except errors.VdspError as exc:
        print(f"vdsp {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

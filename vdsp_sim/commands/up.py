"""``vdsp up [-d]``: start relay + vdsp0 + vdsp1 and restart any that dies."""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

from protocol import errors
from protocol.constants import DEFAULT_WATCHDOG_MS
from vdsp_board import log as soclog, rundir, settings
from vdsp_board.pidfile import PidFile

PRIVATE_FILES = True


def add_parser(sub) -> argparse.ArgumentParser:
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
    return up


def _pidfile(rt: Path) -> PidFile:
    return PidFile(rt / "soc.pid")


def run(args: argparse.Namespace) -> int:
    from vdsp_sim.supervisor import TICK_S, Supervisor
    rt = rundir.runtime_dir()
    pidfile = _pidfile(rt)
    if pidfile.read() is not None:
        print(f"vdsp up: a SoC is already up in {rt} (pid {pidfile.read()}); 'vdsp down' first", file=sys.stderr)
        return 1
    if args.detach:
        return _up_detached(rt, args)
    soclog.setup("dsp")
    from dsp_side import fwtemplate
    # forked now, while this process has one thread: the cores are forked from it (their firmware
    # templates and firmwares from them), so what they import is in memory once for the whole SoC
    template = fwtemplate.Template("soc") if fwtemplate.soc_enabled() else None
    sup = Supervisor(rt, log_dir=rt / "log" if args.log_files else None,
                     core_args=["--watchdog-ms", str(args.watchdog_ms),
                                *(["--allow-unsigned"] if args.allow_unsigned else [])], restart=True,
                     template=template)
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
    log_path = rt / "log" / "vdsp_board.log"
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
        time.sleep(0.02)
    print(f"vdsp up -d: the SoC did not run within --timeout {args.timeout:g} s; see {rt / 'log'}", file=sys.stderr)
    return 1

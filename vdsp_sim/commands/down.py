"""``vdsp down``: stop the SoC of this runtime directory."""
from __future__ import annotations

import argparse
import sys

from vdsp_board.processes import rundir
from vdsp_board.processes.pidfile import PidFile


def add_parser(sub) -> argparse.ArgumentParser:
    down = sub.add_parser("down", help="stop the SoC of this runtime directory")
    down.add_argument("--timeout", type=float, default=15.0,
                      help="seconds to wait for each process to stop after SIGTERM before it is killed")
    return down


def run(args: argparse.Namespace) -> int:
    from vdsp_sim.soc.supervisor import stop_pid
    rt = rundir.runtime_dir()
    stopped = []
    for name in ("soc", "relay"):
        pid = PidFile(rt / f"{name}.pid").read()
        if pid is not None:
            if not stop_pid(pid, args.timeout):
                print(f"vdsp down: {name} (pid {pid}) did not stop", file=sys.stderr)
                return 1
            stopped.append(f"{name} (pid {pid})")
    # a long runtime dir's short sockets' directory, and its link, once no process listens there
    if not rundir.release_socket_dir(rt, stale=True):
        print(f"vdsp down: processes still listen in {rundir.socket_dir(rt)}: left it", file=sys.stderr)
    print(f"stopped {', '.join(stopped)}" if stopped else f"no SoC is up in {rt}")
    return 0

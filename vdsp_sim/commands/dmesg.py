"""``vdsp dmesg``: the remoteproc kernel log of this SoC."""
from __future__ import annotations

import argparse
import sys

from vdsp_board.processes import rundir


def add_parser(sub) -> argparse.ArgumentParser:
    return sub.add_parser("dmesg", help="remoteproc kernel log of this SoC")


def run(args: argparse.Namespace) -> int:
    path = rundir.runtime_dir() / "dmesg"
    if path.exists():
        sys.stdout.write(path.read_text())
    return 0

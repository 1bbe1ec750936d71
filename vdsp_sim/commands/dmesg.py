"""``vdsp dmesg``: the remoteproc kernel log of this SoC."""
from __future__ import annotations

import argparse
import sys

from vdsp_board import runtime


def add_parser(sub) -> argparse.ArgumentParser:
    return sub.add_parser("dmesg", help="remoteproc kernel log of this SoC")


def run(args: argparse.Namespace) -> int:
    path = runtime.runtime_dir() / "dmesg"
    if path.exists():
        sys.stdout.write(path.read_text())
    return 0

"""``vdsp core``: run one core process (used by ``vdsp up`` and docker-compose)."""
from __future__ import annotations

import argparse

PRIVATE_FILES = True
FAST_EXIT = True    # `python -m vdsp_sim.cli core` ends with vdsp_board.processes.proc.fast_exit once the core has stopped


def add_parser(sub) -> argparse.ArgumentParser:
    from dsp_side.core_main import add_arguments
    core = sub.add_parser("core", help="run one core process (remoteproc device + firmware)")
    add_arguments(core)
    return core


def run(args: argparse.Namespace) -> int:
    from dsp_side import core_main
    core_main.run_from_args(args)
    return 0

"""``vdsp trace -o F -- CMD``: one timeline of every task across the SoC's processes (vdsp_sim/trace_cli.py)."""
from __future__ import annotations

import argparse

from vdsp_sim import trace_cli


def add_parser(sub) -> argparse.ArgumentParser:
    ap = sub.add_parser("trace", help="trace the running SoC while a command runs: Chrome/Perfetto JSON, --png "
                                      "timeline", description=trace_cli.__doc__.split("\n\n")[0],
                        epilog=trace_cli.__doc__)
    trace_cli.add_arguments(ap)
    return ap


def run(args: argparse.Namespace) -> int:
    return trace_cli.run_args(args)

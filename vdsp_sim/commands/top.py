"""``vdsp top``: live view of a running SoC (vdsp_sim/top.py)."""
from __future__ import annotations

import argparse


def add_parser(sub) -> argparse.ArgumentParser:
    from vdsp_sim import top
    ap = sub.add_parser("top", help="live terminal view of a running SoC", description=top.DESCRIPTION)
    top.add_arguments(ap)
    return ap


def run(args: argparse.Namespace) -> int:
    from vdsp_sim import top
    return top.run_args(args)

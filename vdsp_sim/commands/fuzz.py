"""``vdsp fuzz``: structure-aware fuzzing of every peer (vdsp_sim/fuzz.py)."""
from __future__ import annotations

import argparse


def add_parser(sub) -> argparse.ArgumentParser:
    from vdsp_sim import fuzz
    ap = sub.add_parser("fuzz", help="structure-aware fuzzing of the relay, cores and firmwares; every process "
                                     "must keep serving", description=fuzz.DESCRIPTION)
    fuzz.add_arguments(ap)
    return ap


def run(args: argparse.Namespace) -> int:
    from vdsp_sim import fuzz
    return fuzz.run_args(args)

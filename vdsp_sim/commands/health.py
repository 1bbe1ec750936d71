"""``vdsp health``: a buffer round trip through each core (vdsp_sim/health.py)."""
from __future__ import annotations

import argparse

from vdsp_sim import health


def add_parser(sub) -> argparse.ArgumentParser:
    ap = sub.add_parser("health", help="a buffer round trip through each core; exit 0 only if the bytes come back",
                        description=health.__doc__)
    health.add_arguments(ap)
    return ap


def run(args: argparse.Namespace) -> int:
    return health.run_args(args)

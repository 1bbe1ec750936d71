"""``vdsp loadtest``: many clients, mixed priorities and cores, every output verified (vdsp_sim/loadtest.py)."""
from __future__ import annotations

import argparse

from vdsp_sim import loadtest


def add_parser(sub) -> argparse.ArgumentParser:
    ap = sub.add_parser("loadtest", help="N client processes x M verified tasks; lost/duplicated/wrong counts, "
                                         "latency and queue wait per priority class",
                        description=loadtest.DESCRIPTION)
    loadtest.add_arguments(ap)
    return ap


def run(args: argparse.Namespace) -> int:
    return loadtest.run_args(args)

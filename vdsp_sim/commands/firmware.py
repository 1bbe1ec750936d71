"""``vdsp firmware build|info|stubs|install-stock|keygen|trust|untrust|trusted`` (vdsp_sim/firmware_cli.py)."""
from __future__ import annotations

import argparse

from vdsp_sim import firmware_cli


def add_parser(sub) -> argparse.ArgumentParser:
    return firmware_cli.add_parser(sub)


def run(args: argparse.Namespace) -> int:
    return args.fn(args)

"""``vdsp sysfs cat|echo|ls``: the remoteproc sysfs files (vdsp_sim/sysfs.py)."""
from __future__ import annotations

import argparse

from vdsp_sim import sysfs


def add_parser(sub) -> argparse.ArgumentParser:
    return sysfs.add_sysfs_parser(sub)


def run(args: argparse.Namespace) -> int:
    return args.fn(args)

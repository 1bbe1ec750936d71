"""``vdsp deploy IMAGE_DIR``: install images vdsp0/vdsp1 and restart both cores (vdsp_sim/sysfs.py)."""
from __future__ import annotations

import argparse

from vdsp_sim import sysfs

PRIVATE_FILES = True


def add_parser(sub) -> argparse.ArgumentParser:
    return sysfs.add_deploy_parser(sub)


def run(args: argparse.Namespace) -> int:
    return sysfs.cmd_deploy(args)

"""The commands of ``vdsp``, one module each, in the order ``vdsp --help`` lists them.

Each module has ``add_parser(sub)``, which adds its parser (and any subcommands) to the tree
of :func:`vdsp_sim.cli.parser`, and ``run(args) -> int``, the exit status. ``PRIVATE_FILES =
True`` marks a command whose files must be private to the user (the SoC's processes and what
they install). ``PASS_THROUGH = True`` marks one whose unknown options belong to the program it
runs (``vdsp bench NAME --quick``).
"""
from __future__ import annotations

NAMES = ("up", "down", "status", "dmesg", "health", "core", "firmware", "sysfs", "deploy", "sample", "loadtest",
         "keys", "fuzz", "trace", "top", "bench", "capi", "dsp")

"""``vdsp sample NAME [ARGS]``: run a sample against the SoC (starting one if none is up)."""
from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> argparse.ArgumentParser:
    sample = sub.add_parser("sample", help="run a sample against the SoC (starting one if none is up)")
    sample.add_argument("name", help="smoke, cv, nn ... ('help' lists them)")
    sample.add_argument("rest", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="the sample's own options and arguments ('vdsp sample NAME --help' lists them)")
    return sample


def run(args: argparse.Namespace) -> int:
    import importlib
    import pkgutil
    from vdsp_sim import samples
    names = sorted(m.name for m in pkgutil.iter_modules(samples.__path__) if m.name in samples.SAMPLES)
    if args.name in ("help", "list"):
        print("samples: " + ", ".join(names))
        return 0
    if args.name not in names:
        print(f"vdsp sample: unknown sample {args.name!r}; samples: {', '.join(names)}", file=sys.stderr)
        return 2
    return importlib.import_module(f"vdsp_sim.samples.{args.name}").main(args.rest)

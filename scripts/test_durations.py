#!/usr/bin/env python3
"""Write ``tests/durations.json`` (seconds per test module) from the output of
``./test.sh --durations=0``: ``tests/conftest.py`` hands the longest modules out first, so that
no long module starts last and leaves the other workers idle at the end of a parallel run.

    ./test.sh --durations=0 > /tmp/run.log; .venv/bin/python scripts/test_durations.py /tmp/run.log

Only the order depends on these figures: a module missing from the file (a new one) is given the
median, and a stale figure makes the run a little longer, never wrong.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "durations.json"
LINE = re.compile(r"^\s*([0-9.]+)s (?:call|setup|teardown)\s+(tests/[\w/]+\.py)::")


def per_module(text: str) -> dict[str, float]:
    """Seconds per module (its tests' setup, call and teardown added up) in a durations report."""
    total: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            total[m.group(2)] += float(m.group(1))
    return {name: round(seconds, 1) for name, seconds in sorted(total.items())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log", type=Path, help="the output of ./test.sh --durations=0")
    ap.add_argument("-o", "--output", type=Path, default=OUT, help=f"default: {OUT.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    modules = per_module(args.log.read_text(errors="replace"))
    if not modules:
        print(f"{args.log}: no durations found (was it run with --durations=0?)", file=sys.stderr)
        return 1
    args.output.write_text(json.dumps(modules, indent=0, sort_keys=True) + "\n")
    print(f"{len(modules)} modules, {sum(modules.values()):.0f} s in all -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A fresh template starter for tests/board/test_starter.py (``python -m tests.template_entries``): it
"imports" once (:func:`preload`, which takes ``TEMPLATE_PRELOAD_S`` seconds of CPU), then forks its
one entry, which prints what it inherited."""
from __future__ import annotations

import json
import os
import sys
import time

from vdsp_board.processes import starter

PRELOADED: dict = {}


def preload() -> None:
    """Work of this process's own (busy, as imports are) for TEMPLATE_PRELOAD_S seconds."""
    end = time.monotonic() + float(os.environ.get("TEMPLATE_PRELOAD_S", "0"))
    while time.monotonic() < end:
        pass
    PRELOADED["by"] = os.getpid()


def report(argv: list[str]) -> int:
    print(json.dumps({"preloaded_by": PRELOADED.get("by"), "ppid": os.getppid(), "argv": argv}), flush=True)
    return 0


ENTRIES = {"report": starter.Entry(report, ("-c", "raise SystemExit('a template starter forks, it never executes')"))}

if __name__ == "__main__":
    sys.exit(starter.serve_templates("python -m tests.template_entries", ENTRIES, preload))

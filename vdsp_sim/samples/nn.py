"""``vdsp sample nn [NAME [OPTIONS] ...]``: the NN samples (J5 run_nn_test.sh); ``help`` lists them.

Each sub-sample lives in its own module with ``main(argv) -> int``; this table maps the names a
user types to them. Without a name every sample runs in turn; with names, those run in the order
given, each with the options that follow it (``vdsp sample nn quantize layout --platform RK3588
yolov3 --batch 2``). Every option of a sub-sample takes a value, so a sample name right after an
option is that option's value. The run ends with one line per sample: passed or FAILED.
"""
from __future__ import annotations

import importlib
import logging
import sys

log = logging.getLogger("vdsp.sample.nn")

# name -> module under vdsp_sim.samples
SUBSAMPLES: dict[str, str] = {
    "quantize": "nn_ops", "dequantize": "nn_ops", "softmax": "nn_ops", "layout": "nn_ops",
    "yolov3": "nn_ops",
    "pointpillar": "nn_pointcloud", "centerpoint": "nn_pointcloud",
    "mobilenet": "nn_mobilenet",
}


def split_runs(argv: list[str]) -> list[tuple[str, list[str]]] | str:
    """``[(name, options), ...]`` in the order given, or the error text for an unknown name."""
    runs: list[tuple[str, list[str]]] = []
    for i, token in enumerate(argv):
        after_option = i > 0 and argv[i - 1].startswith("-") and "=" not in argv[i - 1]
        if not token.startswith("-") and not after_option:
            if token not in SUBSAMPLES:
                return f"unknown sample {token!r}; samples: {', '.join(SUBSAMPLES)}"
            runs.append((token, []))
        elif not runs:
            return f"{token!r} comes before any sample name; e.g. vdsp sample nn layout --platform RK3588"
        else:
            runs[-1][1].append(token)
    return runs


def main(argv: list[str] | None = None) -> int:
    argv = list(argv or [])
    if argv[:1] in (["help"], ["-h"], ["--help"]):
        print("usage: vdsp sample nn [NAME [OPTIONS] ...]\n\n" + __doc__.split("\n\n", 1)[1].split("\n\n")[0]
              + "\n\nsamples: " + ", ".join(SUBSAMPLES)
              + "\n'vdsp sample nn NAME --help' shows a sample's options.")
        return 0
    runs = split_runs(argv) if argv else [(name, []) for name in SUBSAMPLES]
    if isinstance(runs, str):
        print(f"vdsp sample nn: {runs}", file=sys.stderr)
        return 2
    if any(opt in ("-h", "--help") for _, opts in runs for opt in opts):
        name, opts = next((n, o) for n, o in runs if "-h" in o or "--help" in o)
        return importlib.import_module(f"vdsp_sim.samples.{SUBSAMPLES[name]}").main([name, *opts])
    statuses = []
    for name, opts in runs:
        statuses.append((name, importlib.import_module(f"vdsp_sim.samples.{SUBSAMPLES[name]}").main([name, *opts])))
    if len(statuses) > 1:
        for name, status in statuses:
            if status == 0:
                log.info("summary: %s passed", name)
            else:
                log.error("summary: %s FAILED (exit status %d)", name, status)
        passed = sum(1 for _, s in statuses if s == 0)
        log.info("summary: %d of %d NN samples passed", passed, len(statuses))
    return max(status for _, status in statuses)

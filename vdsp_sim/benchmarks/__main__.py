"""``python -m vdsp_sim.benchmarks NAME [OPTIONS]``: run one benchmark as ``vdsp bench NAME``
(its usage line says so; a closed pipe ends it quietly)."""
from __future__ import annotations

import importlib
import sys

from vdsp_sim.benchmarks import names, report
from vdsp_board.processes import proc
from vdsp_board.config.clihelp import exit_quietly_on_broken_pipe


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in names():
        print(f"usage: python -m vdsp_sim.benchmarks {{{','.join(names())}}} [OPTIONS]", file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    proc.exit_on_sigterm()      # a SIGTERM (timeout, kill) runs the cleanup: no SoC outlives the benchmark
    sys.argv = [f"vdsp bench {name}", *rest]     # argparse's prog when a benchmark does not set one
    report.mark_start()         # the load before the run, which the report (made after it) records
    module = importlib.import_module(f"vdsp_sim.benchmarks.bench_{name}")
    return proc.terminated_status(exit_quietly_on_broken_pipe(lambda: module.main(rest) or 0))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

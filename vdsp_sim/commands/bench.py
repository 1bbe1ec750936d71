"""``vdsp bench [NAME ...] [OPTIONS]``: run the benchmarks (``python -m vdsp_sim.benchmarks NAME``)."""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys

PASS_THROUGH = True     # options after the names belong to the benchmark


def _benches() -> tuple[str, ...]:
    from vdsp_sim import benchmarks     # light: reads the package's file names
    return tuple(benchmarks.names())


BENCHES = _benches()

BENCH_HELP = """\
usage: vdsp bench [NAME ...] [OPTIONS]

Runs the named benchmarks (all of them by default), one after the other. Options go to a
single named benchmark: 'vdsp bench rpc --quick'; 'vdsp bench NAME --help' lists them.

benchmarks:
{table}

Every benchmark prints its figures as tables in one style (progress goes to stderr) and
writes the same JSON schema with --json FILE: {{"schema": "vdsp-bench/1", "benchmark",
"version", "args", "host", "tables": [{{"title", "columns", "rows"}}], "verdicts": [{{"name",
"value", "target", "passed"}}], "passed", "details"}} (vdsp_sim/benchmarks/report.py;
vdsp_sim/benchmarks/README.md in a checkout).

CI mode: --fail-on-miss (rpc, cv, nn, pointcloud, perf: the benchmarks with targets) exits 3
when a target is missed; without it the exit status is 0 when the run completes, PASS or MISS,
and 1 on an error. Most targets are ratios between figures of the same run, so a loaded machine
hits both sides alike; a MISS on a small shared VM is a figure to read, not necessarily a defect.
"""


def bench_help() -> str:
    import textwrap
    from vdsp_sim import benchmarks
    from vdsp_board.config.clihelp import plain
    rows = [textwrap.fill(plain(benchmarks.summary(name)) or "", 96, initial_indent=f"  {name:11} ",
                          subsequent_indent=" " * 14) for name in BENCHES]
    return BENCH_HELP.format(table="\n".join(rows))


def run(args: argparse.Namespace) -> int:
    """'vdsp bench [NAME ...] [OPTIONS]': run 'python -m vdsp_sim.benchmarks NAME' (all by default)."""
    rest = list(args.rest)
    names = []
    while rest and rest[0] in BENCHES:
        names.append(rest.pop(0))
    if not names and rest[:1] in (["-h"], ["--help"]):
        print(bench_help(), end="")
        return 0
    if rest[:1] and not rest[0].startswith("-"):
        print(f"vdsp bench: no benchmark {rest[0]!r}; benchmarks: {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    names = names or list(BENCHES)
    if rest and len(names) > 1:
        print("vdsp bench: options go with one named benchmark, e.g. vdsp bench rpc --quick", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        if len(names) > 1:
            print(f"=== vdsp bench {name}", flush=True)
        child = subprocess.Popen([sys.executable, "-m", "vdsp_sim.benchmarks", name, *rest])
        # a SIGTERM for us goes on to the benchmark, which then stops the SoCs it started
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: child.send_signal(signum))
        try:
            status |= child.wait()
        except KeyboardInterrupt:     # Ctrl-C reached the benchmark too: let it clean up
            child.wait()
            return 130
        finally:
            signal.signal(signal.SIGTERM, previous)
    return status


class _BenchHelp(argparse.Action):
    """'vdsp bench --help': the benchmarks and the CI mode ('vdsp bench NAME --help' goes to NAME)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(bench_help(), end="")
        parser.exit(0)


def add_parser(sub) -> argparse.ArgumentParser:
    bench = sub.add_parser("bench", help="benchmarks: " + ", ".join(BENCHES) + " ('vdsp bench --help')",
                           add_help=False)
    bench.add_argument("-h", "--help", action=_BenchHelp, nargs=0, help="list the benchmarks and the CI mode")
    bench.add_argument("rest", nargs=argparse.REMAINDER, metavar="NAME [OPTIONS]",
                       help="what 'vdsp bench --help' lists")
    return bench

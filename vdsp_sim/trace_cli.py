"""``vdsp trace``: one timeline of every task across the SoC's processes.

  vdsp trace -o trace.json -- COMMAND ...   trace the running SoC while COMMAND runs
  vdsp trace --png timeline.png -- COMMAND  the same, and draw it (matplotlib)
  vdsp trace --start / --stop -o FILE       trace until told to stop (no command)
  vdsp trace --from trace.json --png FILE   draw a trace written before

Tracing is switched on for every process of the SoC of ``$VDSP_RUNTIME_DIR`` (relay,
cores, firmwares, and SDK clients) by a flag file they check every 0.25 s
(``vdsp_board.observability.trace``); nothing else changes on the SoC. The JSON opens in
https://ui.perfetto.dev (or chrome://tracing).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from protocol import errors
from vdsp_board.observability import trace, tracefmt

PICKUP_S = 2.0      # how long we wait for the relay, cores and firmwares to open their files (an idle
                    # firmware looks at the switch when its 1 s poll ends)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vdsp trace", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    add_arguments(ap)
    return ap


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of 'vdsp trace' (vdsp_sim/commands/trace.py)."""
    ap.add_argument("-o", "--output", default=None, help="the trace (Chrome/Perfetto JSON; default trace.json)")
    ap.add_argument("--png", nargs="?", const="", default=None, metavar="FILE",
                    help="also draw the timeline to FILE (default: the output's name with .png)")
    ap.add_argument("--from", dest="source", metavar="TRACE", help="draw this trace instead of recording one")
    ap.add_argument("--start", action="store_true", help="turn tracing on and return")
    ap.add_argument("--stop", action="store_true", help="turn tracing off and write the trace")
    ap.add_argument("--title", default="", help="title of the picture")
    ap.add_argument("traced", metavar="command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS... to run while tracing")


def _wait_pickup(session_dir: Path, seconds: float) -> list[str]:
    """Wait until the relay, the cores and their firmwares have opened their files (they poll the flag)."""
    return trace.wait_started(session_dir, seconds)


def finish(directory: Path, session: dict, output: Path, png: str | None, title: str = "") -> dict:
    """Stop the session, merge it into ``output``, draw it if asked; returns the document."""
    trace.stop(directory)
    trace.wait_ended(Path(session["dir"]))
    doc = tracefmt.merge(Path(session["dir"]), output, session)
    if png is not None:
        draw(doc, Path(png) if png else output.with_suffix(".png"), title)
    return doc


INSTALL_PLOT = ("pip install 'vdsp-sim[plot]' (in this checkout: .venv/bin/pip install matplotlib), "
                "or leave out --png and draw later with 'vdsp trace --from TRACE --png FILE'")


class NoMatplotlib(RuntimeError):
    """--png was asked for and matplotlib cannot be imported."""


def plot_missing() -> str | None:
    """Why --png cannot draw (matplotlib not importable), or None when it can."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


def draw(doc: dict, path: Path, title: str = "") -> Path:
    """Draw ``doc`` to ``path``; NoMatplotlib when matplotlib cannot be imported."""
    try:
        from vdsp_sim import traceplot
        return traceplot.render(doc, path, title)
    except ImportError as exc:
        raise NoMatplotlib(str(exc)) from exc


def summary(doc: dict) -> str:
    procs = doc["otherData"]["processes"]
    roles = ", ".join(f"{p['role']} {p['name']}" for p in procs)
    return f"{doc['otherData']['tasks']} tasks, {len(doc['traceEvents'])} events from {len(procs)} processes ({roles})"


def main(argv: list[str] | None = None) -> int:
    return run_args(parser().parse_args(argv))


def prepare(path: Path) -> str | None:
    """Make ``path``'s missing parent directories (like ``mkdir -p``); why it cannot be written,
    or None. Checked before anything is traced or run, so that no trace is lost at the end."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot make the directory {path.parent} for {path}: {exc.strerror or exc}"
    if path.is_dir():
        return f"{path} is a directory"
    if not os.access(path.parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"{path} cannot be written (permission denied)"
    return None


def run_args(args: argparse.Namespace) -> int:
    command = args.traced[1:] if args.traced[:1] == ["--"] else args.traced
    output = Path(args.output or "trace.json")
    if (args.png is not None or args.source) and (why := plot_missing()) is not None:   # before tracing or the command
        print(f"vdsp trace: --png needs matplotlib, which is not installed ({why}): {INSTALL_PLOT}", file=sys.stderr)
        return 2
    outputs = [Path(args.png) if args.png else Path(args.source).with_suffix(".png")] if args.source else \
        [output] + ([Path(args.png) if args.png else output.with_suffix(".png")] if args.png is not None else [])
    if not args.start:      # --start writes nothing
        for path in outputs:
            if (why := prepare(path)) is not None:
                then = "the trace is still on (stop it with another -o FILE)" if args.stop else \
                    "nothing was drawn" if args.source else "nothing was traced or run"
                print(f"vdsp trace: {why}; {then}", file=sys.stderr)
                return 2
    if args.source:
        doc = json.loads(Path(args.source).read_text())
        out = draw(doc, Path(args.png) if args.png else Path(args.source).with_suffix(".png"), args.title)
        print(f"vdsp trace: timeline drawn to {out}")
        return 0
    directory = trace.trace_dir()
    if args.stop:
        session = trace.active(directory)
        if session is None:
            print(f"vdsp trace: no trace is on in {directory}", file=sys.stderr)
            return 1
        doc = finish(directory, session, output, args.png, args.title)
        print(f"vdsp trace: {summary(doc)} -> {output}")
        return 0
    try:
        session = trace.start(directory)
    except errors.VdspError as exc:
        print(f"vdsp trace: {exc}", file=sys.stderr)
        return 1
    if args.start:
        print(f"vdsp trace: tracing on (session {session['session']}); 'vdsp trace --stop -o FILE' ends it")
        return 0
    if not command:
        trace.stop(directory)
        print("vdsp trace: give a command after --, or --start / --stop", file=sys.stderr)
        return 2
    roles = _wait_pickup(Path(session["dir"]), PICKUP_S)
    if "relay" not in roles:
        print("vdsp trace: no relay answered the switch (is a SoC up? 'vdsp up -d'); tracing what runs anyway",
              file=sys.stderr)
    status = 1
    try:
        status = subprocess.call(command)
    except OSError as exc:
        print(f"vdsp trace: cannot run {command[0]}: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        status = 130
    finally:
        doc = finish(directory, session, output, args.png, args.title)
    print(f"vdsp trace: {summary(doc)} -> {output}"
          + (f", {args.png or output.with_suffix('.png')}" if args.png is not None else ""), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())

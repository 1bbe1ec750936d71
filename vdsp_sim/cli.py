"""``vdsp``: run and inspect the simulated SoC.

One argparse tree: each command is a module of :mod:`vdsp_sim.commands` with
``add_parser(sub)`` and ``run(args)``; ``vdsp COMMAND --help`` says what it does.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

from protocol import errors
from vdsp_sim import commands
from vdsp_board.config import clihelp


def command_modules(only: str | None = None) -> dict[str, ModuleType]:
    """Command name -> its module, in the order 'vdsp --help' lists them (``only``: that one
    command's, when it is one; none for ``--version``, which prints the version before any command
    is looked for: the whole tree imports numpy, the SDK and the core, ~0.4 s of CPU)."""
    names = (only,) if only in commands.NAMES else () if only == "--version" else commands.NAMES
    return {name: importlib.import_module(f"vdsp_sim.commands.{name}") for name in names}


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole tree, or (``only``) the tree of that one command: 'vdsp up' need not import
    what every other command imports (numpy, the SDK, ...; a third of a second on a busy host)."""
    ap = argparse.ArgumentParser(prog="vdsp", description="Run and inspect the simulated ARM + 2×DSP SoC.",
                                 epilog="'vdsp COMMAND --help' for the options of a command.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in command_modules(only).items():
        module.add_parser(sub).set_defaults(run=module.run)
    clihelp.add_version(ap)
    return clihelp.finish(ap)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return clihelp.exit_quietly_on_broken_pipe(lambda: _main(argv))


def _main(argv: list[str]) -> int:
    ap = parser(argv[0] if argv else None)
    args, extra = ap.parse_known_args(argv)
    module = command_modules(args.command)[args.command]
    if extra:
        if not getattr(module, "PASS_THROUGH", False):     # said by the command's parser (exit 2)
            sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
            sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
        args.rest = extra + args.rest
    if getattr(module, "PRIVATE_FILES", False):   # SoC processes and what they install: private files
        from vdsp_board.processes import proc
        proc.private_umask()
    try:
        return args.run(args) or 0
    except errors.VdspError as exc:
        print(f"vdsp {args.command}: {exc}", file=sys.stderr)
        return 1


def _fast_exit(argv: list[str]) -> bool:
    """The command ``argv`` names ends its interpreter with ``proc.fast_exit`` (its ``FAST_EXIT``)."""
    name = argv[0] if argv else None
    return name in commands.NAMES and bool(getattr(command_modules(name)[name], "FAST_EXIT", False))


if __name__ == "__main__":
    code = main()
    if _fast_exit(sys.argv[1:]):
        from vdsp_board.processes import proc
        proc.fast_exit(code)
    sys.exit(code)

"""What every command line of the product shares: ``--version``, help that shows defaults and
no reST markup, and a quiet exit when the reader of its output goes away (``vdsp status --json
| head -1``)."""
from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable

from vdsp_board.config.version import version

# ``x`` -> 'x'; :mod:`x`, :func:`x`, :class:`x` ... -> x; *x* / **x** are left alone (plain enough)
_LITERAL = re.compile(r"``([^`]+)``")
_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_DIRECTIVE = re.compile(r"::(\n|$)")


def plain(text: str | None) -> str | None:
    """Docstring text as a terminal shows it: no reST literals, roles or ``::`` markers."""
    if not text:
        return text
    text = _ROLE.sub(r"\1", text)
    text = _LITERAL.sub(r"'\1'", text)
    return _DIRECTIVE.sub(r":\1", text)


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Defaults shown (unless the help already says what the default is, or there is none);
    descriptions and epilogs with line breaks as written (they are tables), one-line ones
    wrapped to the terminal."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" not in text.strip():
            return argparse.HelpFormatter._fill_text(self, text, width, indent)
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text.lower():
            return action.help
        return super()._get_help_string(action)


def version_text(prog: str) -> str:
    return f"{prog} (vdsp-sim) {version()}"


class _VersionAction(argparse.Action):
    """argparse's ``version`` action with the text made when ``--version`` is given, not when
    the parser is (the version is read from the metadata only then: vdsp_board.config.version)."""

    def __init__(self, option_strings: list[str], prog: str, dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)
        self.prog = prog

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        parser._print_message(version_text(self.prog) + "\n", sys.stdout)
        parser.exit()


def add_version(ap: argparse.ArgumentParser, prog: str | None = None) -> None:
    ap.add_argument("--version", action=_VersionAction, prog=prog or ap.prog, help="print the version and exit")


def finish(ap: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``ap`` and every sub-command parser under it the shared formatter, and plain text
    for their descriptions, epilogs and option help."""
    ap.formatter_class = HelpFormatter
    ap.description, ap.epilog = plain(ap.description), plain(ap.epilog)
    for action in ap._actions:
        if isinstance(action.help, str):
            action.help = plain(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = plain(choice.help)
            for sub in set(action.choices.values()):
                finish(sub)
    return ap


def exit_quietly_on_broken_pipe(run: Callable[[], int]) -> int:
    """``run()``; if its reader closed the pipe, stop printing and exit 141 (128 + SIGPIPE, what
    a shell shows for a tool a pipe ended) without a traceback."""
    try:
        try:
            status = run()
        finally:        # also after argparse's --help and exit(): a flush into a closed pipe fails here
            sys.stdout.flush()
        return status
    except BrokenPipeError:
        try:   # Python flushes stdout again at exit: point it at /dev/null so that is quiet too
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141

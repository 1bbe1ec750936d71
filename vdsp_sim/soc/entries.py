"""What the SoC's starter (``vdsp_board.processes.starter``) may start: a core, the relay and the
supervisor's preparation job, each an entry point run in a fork of the starter (templates) or
as a fresh interpreter (``python *command *argv``).

``python -m vdsp_sim.soc.entries --fd N --owner PID --name NAME`` is the SoC's starter of a supervisor
that cannot fork one of its own (a test's or a tool's private SoC, ``vdsp_sim.soc.private_soc``: its
process has threads): a fresh interpreter that imports what the SoC's processes import
(:func:`preload`), then forks them, as ``vdsp up``'s starter does."""
from __future__ import annotations

import logging
import sys

from dsp_side import core_main
from protocol import errors
from relay_server import main as relay_main
from vdsp_board.processes import proc
from vdsp_board.processes import starter
from vdsp_board.processes.starter import Entry
from vdsp_sim.soc import prepare


def _core(argv: list[str]) -> int:
    """``vdsp core *argv``."""
    proc.private_umask()
    try:
        core_main.main(argv)
    except errors.VdspError as exc:
        print(f"vdsp core: {exc}", file=sys.stderr)
        return 1
    return 0


ENTRIES = {
    "core": Entry(_core, ("-m", "vdsp_sim.cli", "core")),
    "relay": Entry(relay_main.main, ("-m", "relay_server.main")),
    "prepare": Entry(prepare.main, ("-m", "vdsp_sim.soc.prepare")),
}

# the command of a fresh SoC starter that forks ENTRIES (Starter(template_command=...))
TEMPLATE_COMMAND = ("-m", "vdsp_sim.soc.entries")


def preload() -> None:
    """What every core, firmware and the relay import, imported by whoever makes the SoC's starter
    (while it has one thread): the cores and the relay are forked from that starter (the cores'
    starters and firmwares from them), so those imports are in memory once for the whole SoC.
    The collector leaves them be (``gc.freeze``): its visits would write to, and so copy, the
    pages they share. (Not the SDK, the start-up's client of ``vdsp up``: no process of the SoC
    but the supervisor imports it, and the supervisor does so as the processes it started boot,
    ``Supervisor.wait_ready``, not before it starts them.)"""
    from dsp_side import preload as firmware_imports
    try:
        firmware_imports.preload("soc")
    except Exception as exc:    # as in a starter: the firmwares import them again and report what fails
        logging.getLogger("vdsp.launcher").warning("soc: could not preload: %s: %s", type(exc).__name__, exc)


if __name__ == "__main__":
    sys.exit(starter.serve_templates("python -m vdsp_sim.soc.entries", ENTRIES, preload))

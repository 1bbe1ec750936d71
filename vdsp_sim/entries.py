"""What the SoC's starter (``vdsp_board.starter``) may start: a core, the relay and the
supervisor's preparation job, each an entry point run in a fork of the starter (templates) or
as a fresh interpreter (``python *command *argv``)."""
from __future__ import annotations

import sys

from dsp_side import core_main
from protocol import errors
from relay_server import main as relay_main
from vdsp_board import proc
from vdsp_board.starter import Entry
from vdsp_sim import prepare


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
    "prepare": Entry(prepare.main, ("-m", "vdsp_sim.prepare")),
}

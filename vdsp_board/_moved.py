"""The old import paths of the modules that moved into rooms (issue 44), kept for one release.

Each old module (``vdsp_board/ddr.py``, ``vdsp_sim/supervisor.py``, ...) is a shim that warns
(:class:`MovedModuleWarning`, a DeprecationWarning, pointed at the importing line) and then *is*
the new module: ``sys.modules`` names it under the old path too, so ``vdsp_board.ddr.Segment is
vdsp_board.memory.ddr.Segment`` and a monkeypatch through either path is seen through both.
``python -m OLD`` runs the new module. The project's own code names only the new paths
(tests/board/test_old_paths.py; the suite turns this warning into an error, pyproject.toml).
"""
# rooms: old paths on purpose
from __future__ import annotations

import importlib
import runpy
import sys
import warnings
from typing import Any

#: old module -> the module it is now
MOVED = {
    "vdsp_board.acl": "vdsp_board.memory.acl",
    "vdsp_board.admission": "vdsp_board.identity.admission",
    "vdsp_board.clihelp": "vdsp_board.config.clihelp",
    "vdsp_board.curve": "vdsp_board.identity.curve",
    "vdsp_board.ddr": "vdsp_board.memory.ddr",
    "vdsp_board.fdwait": "vdsp_board.processes.fdwait",
    "vdsp_board.filepages": "vdsp_board.processes.filepages",
    "vdsp_board.hellogate": "vdsp_board.identity.hellogate",
    "vdsp_board.ipclink": "vdsp_board.sockets.ipclink",
    "vdsp_board.jit": "vdsp_board.config.jit",
    "vdsp_board.log": "vdsp_board.observability.log",
    "vdsp_board.ownership": "vdsp_board.identity.ownership",
    "vdsp_board.peercred": "vdsp_board.identity.peercred",
    "vdsp_board.peerproof": "vdsp_board.identity.peerproof",
    "vdsp_board.pidfile": "vdsp_board.processes.pidfile",
    "vdsp_board.proc": "vdsp_board.processes.proc",
    "vdsp_board.procfacts": "vdsp_board.processes.procfacts",
    "vdsp_board.rundir": "vdsp_board.processes.rundir",
    "vdsp_board.settings": "vdsp_board.config.settings",
    "vdsp_board.sockdiag": "vdsp_board.identity.sockdiag",
    "vdsp_board.starter": "vdsp_board.processes.starter",
    "vdsp_board.trace": "vdsp_board.observability.trace",
    "vdsp_board.tracefmt": "vdsp_board.observability.tracefmt",
    "vdsp_board.version": "vdsp_board.config.version",
    "vdsp_board.zsock": "vdsp_board.sockets.zsock",
    "vdsp_sim.entries": "vdsp_sim.soc.entries",
    "vdsp_sim.loopback": "vdsp_sim.soc.loopback",
    "vdsp_sim.prepare": "vdsp_sim.soc.prepare",
    "vdsp_sim.private_soc": "vdsp_sim.soc.private_soc",
    "vdsp_sim.readiness": "vdsp_sim.soc.readiness",
    "vdsp_sim.supervisor": "vdsp_sim.soc.supervisor",
}


class MovedModuleWarning(DeprecationWarning):
    """An old import path of a moved module was imported; it goes in the next release."""


def follow(spec: Any, name: str) -> None:
    """Called by the shim at an old path (``spec``: its ``__spec__``, ``name``: its ``__name__``)."""
    old = spec.name
    new = MOVED[old]
    warnings.warn(f"{old} moved to {new} (import it from there; the old path goes in the next release)",
                  MovedModuleWarning, stacklevel=3)
    if name == "__main__":      # python -m OLD
        runpy.run_module(new, run_name="__main__", alter_sys=True)
    else:
        sys.modules[old] = importlib.import_module(new)

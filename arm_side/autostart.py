"""Starting ``dsp_relay_server`` from PATH when no relay answers (as the J5 scripts rely on)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from protocol import errors
from soc.pidfile import PidFile


def should_start(endpoint: str) -> bool:
    """An ipc relay whose socket file does not exist certainly needs starting."""
    if not endpoint.startswith("ipc://"):
        return False
    path = Path(endpoint[6:])
    return not path.exists() and PidFile(path.parent / "relay.pid").read() is None


def relay_command() -> str:
    """The relay executable: from PATH, else next to this Python (an unactivated venv).

    Raises RelayUnavailable when neither has it.
    """
    exe = shutil.which("dsp_relay_server")
    if exe is None:
        candidate = Path(sys.executable).parent / "dsp_relay_server"
        if candidate.exists():
            exe = str(candidate)
    if exe is None:
        raise errors.RelayUnavailable("no relay answers and dsp_relay_server is not on PATH "
                                      "(install vdsp-sim or use VDSP_RPC_MODE=direct)")
    return exe


def start_relay(rt: Path) -> int:
    """Start a detached relay for runtime dir ``rt``; returns its pid. Its log: rt/relay.log."""
    if PidFile(rt / "relay.pid").read() is not None:
        return PidFile(rt / "relay.pid").read()
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(rt))
    with open(rt / "relay.log", "ab") as logf:
        proc = subprocess.Popen([relay_command()], stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                env=env, start_new_session=True)
    return proc.pid

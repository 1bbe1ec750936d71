"""Process hygiene: children that die with their parent, SIGTERM as a clean exit."""
from __future__ import annotations

import ctypes
import os
import signal

from vdsp_board import settings

PARENT_ENV = "VDSP_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """If started with ``VDSP_PARENT_PID``, get SIGKILL when that parent dies (Linux prctl)."""
    expected = settings.current().parent_pid   # children get their own (child_env)
    if not expected:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if str(os.getppid()) != expected:  # the parent died before prctl took effect
        os._exit(1)


def private_umask() -> None:
    """Files and sockets a SoC process creates get no group or world access, whatever the
    umask it was started with (each call site also creates what matters with explicit modes)."""
    os.umask(0o077)


def child_env(env: dict | None = None) -> dict:
    """Environment for a child that must not outlive this process."""
    return settings.child_env(env, **{PARENT_ENV: str(os.getpid())})


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so ``finally`` blocks (cleanup) run."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)

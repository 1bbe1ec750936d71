"""Tests that need more than a normal user has, run as a normal user where the kernel allows:

- a kernel's next pid (``ns_last_pid``) and a tmpfs mount of one's own: inside a user namespace
  with its own pid or mount namespace (``unshare --user --map-root-user``), which the user owns;
- another user (a lock flood, a stranger): ``vdsp_sim.otheruser`` (nobody under root, else a
  subordinate uid through ``newuidmap``).

Where neither root nor the kernel allows it, such a test is skipped with the reason, except when
``VDSP_TEST_STRICT`` is set (``.ci/run`` sets it, as root): then it fails, so a CI run in which
one of them did not run does not pass.
"""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from vdsp_sim import otheruser

ROOT = Path(__file__).resolve().parent.parent

STRICT = "VDSP_TEST_STRICT"     # set: a test that cannot get the privilege it needs fails instead of skipping


def require(why_not: str | None) -> None:
    """Skip the calling test saying ``why_not`` (fail under ``VDSP_TEST_STRICT``); nothing if None.
    Also for what a host may lack (a C compiler, flock(1)): CI has it, so there it must run."""
    if why_not is None:
        return
    if os.environ.get(STRICT):
        pytest.fail(f"{why_not} ({STRICT} is set: every test must run)")
    pytest.skip(why_not)


USERNS = ["unshare", "--user", "--map-root-user"]


@functools.lru_cache(maxsize=None)
def _works(*cmd: str) -> str | None:
    if not shutil.which(cmd[0]):
        return f"no {cmd[0]}(1) here"
    done = subprocess.run([*cmd, "true"], capture_output=True, text=True, timeout=60)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


def pid_namespace() -> tuple[list[str] | None, str | None]:
    """(the command prefix that runs a command as pid 1 of a pid namespace of its own, with that
    namespace's /proc and ``ns_last_pid`` writable, or None; why not)."""
    pid = ["--pid", "--fork", "--kill-child", "--mount-proc"]
    why = _works(*USERNS, *pid)
    if why is None:
        return [*USERNS, *pid], None
    if os.geteuid() == 0 and _works("unshare", *pid) is None:
        return ["unshare", *pid], None
    return None, f"setting the next pid needs root or a user namespace of one's own, which this host refuses ({why})"


def mount_namespace() -> tuple[list[str] | None, str | None]:
    """(the command prefix that runs a command in a mount namespace of its own where it may mount a
    tmpfs, or None; why not)."""
    why = _works(*USERNS, "--mount")
    if why is None:
        return [*USERNS, "--mount"], None
    if os.geteuid() == 0 and _works("unshare", "--mount") is None:
        return ["unshare", "--mount"], None
    return None, f"mounting a tmpfs needs root or a user namespace of one's own, which this host refuses ({why})"


# The modules the code may use are imported before the interpreter becomes another user: after
# that it may not read its own files (a Python under /root: 3.13's run lost `socket` so).
_AS_OTHER = """
import json, os, select, shutil, socket, sys, tempfile, time
from pathlib import Path
from vdsp_sim.otheruser import become
become()
exec(sys.argv[1])
"""


def as_other_user(code: str, *args: str) -> str:
    """Run Python ``code`` as another user (``vdsp_sim.otheruser``; ``sys.argv[2:]`` are ``args``);
    its stdout. Skips the calling test (fails under VDSP_TEST_STRICT) where there is none."""
    require(otheruser.unavailable())
    done = subprocess.run([sys.executable, "-c", _AS_OTHER, code, *args], cwd="/", capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def other_user_process(code: str, *args: str) -> subprocess.Popen:
    """Start Python ``code`` as another user (as :func:`as_other_user`), its stdin and stdout
    pipes of text lines kept open for a conversation; the caller ends it. Skips the calling
    test (fails under VDSP_TEST_STRICT) where there is no other user."""
    require(otheruser.unavailable())
    return subprocess.Popen([sys.executable, "-c", _AS_OTHER, code, *args], cwd="/", stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))


@contextlib.contextmanager
def other_users_dir(plant: str = "") -> Iterator[Path]:
    """A fresh 0700 directory of another user under /tmp, in which that user ran ``plant`` (Python,
    the directory as ``d``); removed by that user afterwards."""
    made = as_other_user("d = Path(tempfile.mkdtemp(prefix='vother', dir='/tmp'))\n" + plant + "\nprint(d)")
    path = Path(made.strip().splitlines()[-1])
    try:
        yield path
    finally:
        as_other_user("shutil.rmtree(sys.argv[2])", str(path))

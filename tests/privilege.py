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

import functools
import os
import shutil
import subprocess

import pytest

STRICT = "VDSP_TEST_STRICT"     # set: a test that cannot get the privilege it needs fails instead of skipping


def require(why_not: str | None) -> None:
    """Skip the calling test saying ``why_not`` (fail under ``VDSP_TEST_STRICT``); nothing if None."""
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

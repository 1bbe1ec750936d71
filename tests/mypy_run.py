"""mypy for the tests: the run over the six packages once per test run, and a start from its
cache for every other mypy run of the suite.

A cold run over the packages (pyproject.toml's ``[tool.mypy]``) costs ~21 s of CPU on the 2-CPU
VM, most of it numpy's, OpenCV's and the standard library's stubs; tests/project/test_lint.py
asserts it is clean. tests/sdk/test_stubs.py and tests/project/test_effects_typed.py check small
files that import the same packages under the same settings, and each started cold (5-9 s of CPU);
from a copy of that run's cache they check only their own files (0.6 s).

Invariants:

- :func:`packages` runs ``mypy <packages>`` (the lint's command) at most once per test run, under
  an exclusive lock: the workers of a run share its result (the exit status and what it printed,
  kept in the run's directory: ``VDSP_TEST_LOCK_DIR``, made 0700 by the xdist controller, or a
  private directory of a serial run), however many of them ask, and whichever asks first;
- its cache lives in the checkout, one per venv (``.mypy_cache/<venv>``: ignored by git), so a
  rerun starts warm and the suites on two Pythons (.ci/run) keep one each instead of rewriting one
  cache (mypy rechecked everything after the other Python's run). Only that run writes it, under
  the exclusive lock of ``.mypy_cache/<venv>.lock``;
- :func:`run` copies it (under the same lock) into a directory of its own first, so the small
  runs never write the shared cache, and runs mypy with the same settings there.
"""
from __future__ import annotations

import atexit
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["arm_side", "dsp_side", "relay_server", "protocol", "vdsp_board", "vdsp_sim"]
CACHES = ROOT / ".mypy_cache"
LOCK_WAIT_S = 900.0     # the holder's run over the packages: bounded by its own timeout (600 s), on a loaded host
_private: list[Path] = []


def _run_dir() -> Path:
    shared = os.environ.get("VDSP_TEST_LOCK_DIR")
    if shared and os.path.isdir(shared) and not os.path.islink(shared) and os.stat(shared).st_uid == os.getuid():
        return Path(shared)
    if not _private:
        _private.append(Path(tempfile.mkdtemp(prefix="vmypy-")))
        atexit.register(shutil.rmtree, _private[0], True)
    return _private[0]


def cache_dir() -> Path:
    """This venv's cache of the run over the packages."""
    return CACHES / Path(sys.prefix).name


class _Locked:
    """An exclusive lock on ``path`` (a file), waited for up to LOCK_WAIT_S."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                if time.monotonic() > deadline:
                    os.close(self.fd)
                    raise TimeoutError(f"{self.path} stayed locked by another test process for {LOCK_WAIT_S:.0f} s")
                time.sleep(0.05)

    def __exit__(self, *exc) -> None:
        os.close(self.fd)       # closing releases the lock


def packages() -> subprocess.CompletedProcess:
    """The result of ``mypy <PACKAGES>`` run from the checkout (its configuration: pyproject.toml),
    this test run's one run of it."""
    result = _run_dir() / "mypy-packages.json"
    with _Locked(_run_dir() / "mypy-packages.lock"):
        if not result.is_file():
            with _Locked(cache_dir().with_name(cache_dir().name + ".lock")):
                res = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache_dir()), *PACKAGES],
                                     cwd=ROOT, capture_output=True, text=True, timeout=600)
            result.write_text(json.dumps([res.returncode, res.stdout, res.stderr]))
        returncode, stdout, stderr = json.loads(result.read_text())
    return subprocess.CompletedProcess(["mypy", *PACKAGES], returncode, stdout, stderr)


def run(*argv: str, where: Path, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    """``mypy *argv`` run in ``cwd``, with the cache of the run over the packages copied to
    ``where`` as its start (after that run, in this test run)."""
    packages()
    with _Locked(cache_dir().with_name(cache_dir().name + ".lock")):
        shutil.copytree(cache_dir(), where)
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(where), *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)

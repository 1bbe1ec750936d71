"""``vdsp health``, the container healthchecks' command: it passes only when a buffer
really makes the round trip through each core, so a client that does not share the
cores' DDR directory (what `docker compose restart vdsp0` did to the others when they
shared vdsp0's IPC namespace) is unhealthy, although every process still answers."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from vdsp_sim import health

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]


def vdsp_health(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vdsp_sim.cli", "health", *args], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), **env),
                          capture_output=True, text=True, timeout=60)


def test_every_core_round_trips_a_buffer(shared_soc):
    run = vdsp_health()
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [line for line in run.stdout.splitlines() if "round trip ok" in line]
    assert [line.split(":")[0] for line in run.stdout.splitlines()] == ["vdsp0", "vdsp1"]


def test_one_core_in_direct_mode(shared_soc):
    run = vdsp_health("--core", "vdsp1", "--size", "1000", VDSP_RPC_MODE="direct")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("vdsp1: 1000-byte buffer round trip ok"), run.stdout


def test_another_ddr_directory_is_unhealthy(shared_soc):
    """The processes answer, but this client's buffers are not where the cores look."""
    status = subprocess.run([sys.executable, "-m", "vdsp_sim.cli", "status", "--json"], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    with tempfile.TemporaryDirectory(dir="/dev/shm") as elsewhere:
        run = vdsp_health(VDSP_SHM_DIR=elsewhere)
    assert run.returncode == health.WRONG, run.stdout + run.stderr
    assert "round trip ok" not in run.stdout


def test_an_unknown_core_and_no_soc(shared_soc, tmp_path):
    run = vdsp_health("--core", "vdsp7")
    assert run.returncode == health.NOT_REACHABLE and "no core vdsp7" in run.stderr
    nothing = tmp_path / "rt"
    nothing.mkdir(mode=0o700)
    run = vdsp_health("--connect-timeout", "0.5", VDSP_RUNTIME_DIR=str(nothing))
    assert run.returncode == health.NOT_REACHABLE, run.stdout + run.stderr


def test_a_core_that_does_not_answer_ends_the_check_at_its_deadline_saying_so(live_soc):
    """A frozen firmware (SIGSTOP) answers nothing: the check ends at its own deadline, before a
    probe's timeout would end it without a word, and says what it waited for."""
    import signal
    import time
    fw = live_soc.fw_pid("vdsp0")
    os.kill(fw, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        run = vdsp_health("--core", "vdsp0", "--deadline", "3", VDSP_RPC_MODE="direct")
        took = time.monotonic() - t0
    finally:
        os.kill(fw, signal.SIGCONT)
    assert run.returncode == health.NOT_REACHABLE, run.stdout + run.stderr
    assert "did not end within its deadline, 3 s" in run.stderr, run.stderr
    assert took < 3 + 15, took      # the deadline, and an interpreter's start on a busy host

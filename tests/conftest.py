"""Shared fixtures. Live fixtures start a real SoC (relay + vdsp0 + vdsp1 processes) with
private runtime and DDR directories (vdsp_sim.private_soc) and, on teardown, fail the test
if any of its processes, socket files or DDR files are left behind."""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.live import LiveSoc  # noqa: E402
from vdsp_sim.private_soc import fresh_ddr_dir, fresh_runtime_dir  # noqa: E402


@pytest.fixture
def shm(tmp_path, monkeypatch):
    """A private DDR directory (not /dev/shm); this process's owner there is closed afterwards."""
    from vdsp_sim.board import ddr
    directory = tmp_path / "shm"
    directory.mkdir()
    monkeypatch.setenv("VDSP_SHM_DIR", str(directory))
    monkeypatch.delenv("VDSP_STRICT_CACHE", raising=False)
    yield directory
    ddr.close_owner(str(directory))


@pytest.fixture(params=["relay", "direct"])
def mode_soc(request, shared_soc):
    """A client of the shared SoC, once in relay mode and once in direct mode."""
    from arm_side import Soc
    with Soc(mode=request.param) as soc:
        yield soc


@pytest.fixture
def runtime_env(monkeypatch):
    """A fresh, short runtime directory (ipc paths are limited to 107 characters) and a
    private DDR directory, named by the environment (for SoCs the test starts itself)."""
    from vdsp_sim.board import ddr
    rt, shm = fresh_runtime_dir(), fresh_ddr_dir()
    monkeypatch.setenv("VDSP_RUNTIME_DIR", str(rt))
    monkeypatch.setenv("VDSP_SHM_DIR", str(shm))
    for var in ("VDSP_RELAY_ENDPOINT", "VDSP_CORE_ENDPOINTS", "VDSP_RPC_MODE", "VDSP_STRICT_CACHE"):
        monkeypatch.delenv(var, raising=False)
    yield rt
    ddr.close_owner(str(shm))
    shutil.rmtree(rt, ignore_errors=True)
    shutil.rmtree(shm, ignore_errors=True)


@pytest.fixture
def live_soc(runtime_env):
    """A SoC of its own for one test (tests that kill or freeze parts use this)."""
    soc = LiveSoc(runtime_env)
    soc.start()
    try:
        yield soc
    finally:
        soc.stop_and_check()


@pytest.fixture(scope="module")
def shared_soc():
    """One SoC for a module of tests that leave it healthy (fresh runtime and DDR directories)."""
    soc = LiveSoc()
    soc.start()
    try:
        yield soc
    finally:
        soc.stop_and_check()


def wait_until(predicate, timeout_s: float = 10.0, interval_s: float = 0.05):
    """Poll ``predicate`` until it returns a truthy value; that value, or None on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    return None

"""The ``vdsp`` and ``dsp_relay_server`` commands, run as a user runs them."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from vdsp_board.processes.pidfile import PidFile, alive
from tests.conftest import wait_until
from tests.live import shm_entries

VDSP = [sys.executable, "-m", "vdsp_sim.cli"]
RELAY = [sys.executable, "-m", "relay_server.main"]


def run(cmd, rt: Path, timeout=90, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(rt))
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)


@pytest.mark.parametrize("args", [[], ["up"], ["down"], ["status"], ["dmesg"], ["core"], ["sample"], ["bench"],
                                  ["loadtest"], ["firmware"], ["firmware", "build"], ["sysfs"], ["deploy"]])
def test_every_command_has_help(args, runtime_env):
    res = run(VDSP + args + ["--help"], runtime_env)
    assert res.returncode == 0 and "usage: vdsp" in res.stdout


def test_relay_has_help(runtime_env):
    res = run(RELAY + ["--help"], runtime_env)
    assert res.returncode == 0 and "usage: dsp_relay_server" in res.stdout and "--core" in res.stdout


def test_status_of_nothing_says_so(runtime_env):
    res = run(VDSP + ["status", "--json"], runtime_env)
    assert res.returncode == 3
    assert json.loads(res.stdout)["cores"] == []


@pytest.mark.parametrize("detach", [["-d"], []])
def test_up_with_a_ddr_directory_that_does_not_exist_says_so_at_once(runtime_env, tmp_path, detach):
    """VDSP_SHM_DIR naming no directory: ``vdsp up`` refuses at once and names it (it started the
    SoC and failed after the whole start timeout, 60 s, with HB_DSP_CORE_OFFLINE)."""
    missing = tmp_path / "no-such-dir"
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(runtime_env), VDSP_SHM_DIR=str(missing))
    t0 = time.monotonic()
    res = subprocess.run(VDSP + ["up", *detach, "--timeout", "30"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 1, res.stdout + res.stderr
    assert time.monotonic() - t0 < 20, "it tried to start the SoC"
    assert str(missing) in res.stderr and "VDSP_SHM_DIR" in res.stderr and "does not exist" in res.stderr, res.stderr
    assert not list(runtime_env.glob("*.pid")), "a SoC was started"
    # a file in its place is no directory either
    missing.write_text("")
    res = subprocess.run(VDSP + ["up", *detach, "--timeout", "30"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 1 and "is not a directory" in res.stderr, res.stdout + res.stderr


@pytest.mark.live
def test_two_socs_side_by_side_up_status_down(runtime_env, request):
    other = Path(tempfile.mkdtemp(prefix="vu", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(other, ignore_errors=True))   # its logs and dmesg outlive `down`
    before = shm_entries()
    try:
        for rt in (runtime_env, other):
            res = run(VDSP + ["up", "-d"], rt)
            assert res.returncode == 0, res.stderr
            assert "SoC up" in res.stdout
        pids = [PidFile(rt / "soc.pid").read() for rt in (runtime_env, other)]
        assert all(pids) and pids[0] != pids[1]
        for rt in (runtime_env, other):
            res = run(VDSP + ["status", "--json"], rt)
            assert res.returncode == 0, res.stdout + res.stderr
            status = json.loads(res.stdout)
            assert status["runtime_dir"] == str(rt)
            assert [(c["name"], c["state"]) for c in status["cores"]] == [("vdsp0", "running"), ("vdsp1", "running")]
            assert all(c["firmware_version"] and any(o["name"] == "memcpy" for o in c["operators"])
                       for c in status["cores"])
        text = run(VDSP + ["status"], runtime_env).stdout
        assert "vdsp0" in text and "running" in text and "ping(0x0000)" not in text   # a count, not every name
        assert max(map(len, text.splitlines())) <= 120, text
        text = run(VDSP + ["status", "--verbose"], runtime_env).stdout
        assert "ping(0x0000)" in text and max(map(len, text.splitlines())) <= 120, text
        res = run(VDSP + ["up", "-d"], runtime_env)
        assert res.returncode == 1 and "already up" in res.stderr
    finally:
        downs = [run(VDSP + ["down"], rt) for rt in (runtime_env, other)]
    assert all(d.returncode == 0 and "stopped" in d.stdout for d in downs)
    for rt, pid in zip((runtime_env, other), pids):
        assert not alive(pid)
        assert not list(rt.glob("*.sock")), list(rt.glob("*.sock"))
    assert wait_until(lambda: not (shm_entries() - before), 5)
    assert "remote processor vdsp1 is now up" in run(VDSP + ["dmesg"], other).stdout


@pytest.mark.live
def test_up_in_the_foreground_stops_everything_on_ctrl_c(runtime_env):
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(runtime_env))
    proc = subprocess.Popen(VDSP + ["up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "SoC up in" in line:
                break
        else:
            pytest.fail("".join(lines))
        res = run(VDSP + ["status", "--json"], runtime_env)
        assert res.returncode == 0
        children = [int(p) for p in subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True,
                                                    text=True).stdout.split()]
        assert len(children) >= 6  # vdsp up, relay, 2 cores, 2 firmware processes
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out
    assert "SoC down" in out
    assert wait_until(lambda: not any(alive(p) for p in children), 5)
    assert not list(runtime_env.glob("*.sock"))
    assert "crash detected" not in (runtime_env / "dmesg").read_text()   # a stop is not a crash


@pytest.mark.live
def test_smoke_sample_starts_its_own_soc_and_cleans_up(runtime_env):
    before = shm_entries()
    res = run(VDSP + ["sample", "smoke", "--rounds", "20"], runtime_env)
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("check result right") == 2 and "WRONG" not in res.stderr
    assert "rpc begin" in res.stderr and "rpc finish" in res.stderr
    assert not list(runtime_env.glob("*.sock"))
    assert wait_until(lambda: not (shm_entries() - before), 5)

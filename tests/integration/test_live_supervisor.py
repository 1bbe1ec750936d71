"""``vdsp up`` as a service manager: a process that keeps failing is given up (and ``vdsp
status`` says so), the SDK never leaves a relay of its own behind, a frozen or dead relay is told
apart (a killed process under load: test_live_supervisor_kills.py).

Each test starts a real SoC with ``vdsp up -d`` in a private runtime dir and stops it with
``vdsp down``, which must leave no process, socket file or /dev/shm segment behind.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time

import pytest

from arm_side import CORE_0, CORE_1, Soc, errors, opids
from vdsp_board.processes.pidfile import PidFile, alive, supervisor_state
from tests.conftest import wait_until
from tests.live import LiveSoc, shm_entries
from tests.supervised import VDSP, core_pids, down_and_check, ping, rt_processes, run, status_json, supervisor_of

pytestmark = pytest.mark.live


def test_up_d_leaves_a_soc_in_its_own_session_holding_none_of_the_callers_descriptors(runtime_env):
    """'vdsp up -d' returns once both cores run, leaving the supervisor (that same process,
    forked) in a session of its own; neither it nor any process of the SoC holds what the
    caller passed down: a pipe given to 'up -d' ends once 'up -d' has exited (as its captured
    stdout and stderr did, or this run would not have returned)."""
    before = shm_entries()
    r, w = os.pipe()
    try:
        res = subprocess.run(VDSP + ["up", "-d"], env=dict(os.environ, VDSP_RUNTIME_DIR=str(runtime_env)),
                             capture_output=True, text=True, timeout=90, pass_fds=(w,))
        os.close(w)
        w = -1
        assert res.returncode == 0, res.stdout + res.stderr
        assert "SoC up" in res.stdout
        readable, _, _ = select.select([r], [], [], 10)
        assert readable and os.read(r, 1) == b"", "a process of the SoC holds the caller's pipe"
        sup = PidFile(runtime_env / "soc.pid").read()
        assert sup is not None and os.getsid(sup) == sup
        with Soc(autostart_relay=False) as soc:
            assert [c["state"] for c in soc.query("cores")["cores"]] == ["running", "running"]
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
        down_and_check(runtime_env, before)


def test_a_core_that_keeps_failing_is_given_up_and_status_says_so(up_soc):
    rt = up_soc
    victim = core_pids(rt)["vdsp1"][0]
    # the next vdsp1 cannot bind its control endpoint: every restart exits at once
    (rt / "vdsp1.sock").unlink()
    (rt / "vdsp1.sock").mkdir()
    try:
        os.kill(victim, signal.SIGKILL)
        t0 = time.monotonic()
        # waited for on the supervisor's state file ('vdsp status' reads it), not by a 'vdsp status'
        # process every 0.2 s; what the command says is checked below
        gave_up = wait_until(lambda: (supervisor_state(rt) or {}).get("processes", {}).get("vdsp1", {}).get("gave_up"),
                             25, 0.2)
        print(f"\nvdsp1 given up {time.monotonic() - t0:.1f} s after the first failure")
        status = status_json(rt)
        vdsp1 = status["supervisor"]["processes"]["vdsp1"]
        assert gave_up, vdsp1
        assert vdsp1["state"] == "gave-up" and vdsp1["restarts"] == 4 and vdsp1["last_exit"] == 1, vdsp1
        assert status["supervisor"]["processes"]["vdsp0"]["restarts"] == 0
        res = run(VDSP + ["status"], rt)
        assert res.returncode == 3                               # not every core runs
        assert "gave up" in res.stdout and "vdsp1" in res.stdout, res.stdout
        log = (rt / "log" / "vdsp_board.log").read_text()
        assert "giving up on vdsp1" in log, log[-2000:]
        with Soc(connect_timeout_s=10) as soc:                  # the rest of the SoC still serves
            assert ping(soc, CORE_0)
            with pytest.raises(errors.CoreError):
                soc.rpc(opids.PING, core=CORE_1).wait(2000)
        assert PidFile(rt / "soc.pid").read() is not None       # the supervisor itself stays up
    finally:
        (rt / "vdsp1.sock").rmdir()


def test_sdk_without_a_soc_starts_nothing_and_says_to_run_vdsp_up(runtime_env):
    t0 = time.monotonic()
    try:
        with pytest.raises(errors.RelayUnavailable) as exc:
            Soc(connect_timeout_s=10)
        assert "vdsp up -d" in exc.value.message
        assert time.monotonic() - t0 < 3
        assert not (runtime_env / "relay.sock").exists() and PidFile(runtime_env / "relay.pid").read() is None
        assert rt_processes(runtime_env) == []
    finally:
        relay = PidFile(runtime_env / "relay.pid").read()
        if relay is not None:    # today's code starts a relay with no core: stop it
            os.kill(relay, signal.SIGKILL)


def test_sdk_waits_for_the_supervisor_instead_of_starting_a_relay(up_soc):
    rt = up_soc
    supervisor = PidFile(rt / "soc.pid").read()
    old = PidFile(rt / "relay.pid").read()
    os.kill(old, signal.SIGKILL)
    t0 = time.monotonic()
    with Soc(connect_timeout_s=10) as soc:                      # a new connection while the relay is down
        assert ping(soc, CORE_0) and ping(soc, CORE_1)
    print(f"\nnew client served {time.monotonic() - t0:.2f} s after kill -9 of the relay")
    relay = PidFile(rt / "relay.pid").read()
    assert relay not in (None, old) and supervisor_of(relay) == supervisor
    assert not (rt / "relay.log").exists()


def test_relay_the_sdk_starts_for_cores_exits_when_the_cores_are_gone(runtime_env):
    cores = LiveSoc(runtime_env, relay=False)       # cores only, as after a board boots; no supervisor
    cores.start()
    try:
        with Soc(connect_timeout_s=10) as soc:
            assert ping(soc, CORE_1)
        relay = PidFile(runtime_env / "relay.pid").read()
        assert relay is not None
        cores.sup.stop()
        assert wait_until(lambda: not alive(relay), 15), "the relay the SDK started outlived its cores"
        assert not (runtime_env / "relay.sock").exists()
    finally:
        cores.stop_and_check()


def _frozen(pid: int, seconds: float) -> threading.Timer:
    """SIGSTOP ``pid`` now and SIGCONT it ``seconds`` later (from a timer thread)."""
    os.kill(pid, signal.SIGSTOP)
    timer = threading.Timer(seconds, os.kill, (pid, signal.SIGCONT))
    timer.start()
    return timer


def test_sdk_keeps_waiting_for_a_relay_that_lives_but_does_not_answer(up_soc):
    """A relay starved of CPU (here: stopped for 7 s) is alive: a new client waits for it, up
    to its connect timeout, instead of failing after a fixed 5 s."""
    rt = up_soc
    relay = PidFile(rt / "relay.pid").read()
    timer = _frozen(relay, 7.0)
    t0 = time.monotonic()
    try:
        with Soc(connect_timeout_s=30) as soc:
            assert ping(soc, CORE_0) and ping(soc, CORE_1)
    finally:
        timer.join()
        os.kill(relay, signal.SIGCONT)
    print(f"\nnew client served {time.monotonic() - t0:.2f} s after the relay was stopped for 7 s")
    assert time.monotonic() - t0 >= 6.5
    assert PidFile(rt / "relay.pid").read() == relay          # the same relay: nothing restarted it


def test_status_waits_for_a_slow_soc_and_says_at_once_that_one_is_down(up_soc, runtime_env):
    rt = up_soc
    timer = _frozen(PidFile(rt / "relay.pid").read(), 4.0)
    try:
        res = run(VDSP + ["status"], rt)
    finally:
        timer.join()
    assert res.returncode == 0, res.stdout + res.stderr
    assert "vdsp0    running" in res.stdout and "vdsp1    running" in res.stdout, res.stdout


def test_sdk_fails_at_once_naming_the_relay_when_its_process_exits(runtime_env):
    """No supervisor: a relay that runs is waited for while its process lives; when it exits
    the client says so at once, with its pid."""
    cores = LiveSoc(runtime_env, relay=False)
    cores.start()
    relay = subprocess.Popen([sys.executable, "-m", "relay_server.main"], env=dict(os.environ),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: PidFile(runtime_env / "relay.pid").read() == relay.pid, 20)
        assert wait_until(lambda: (runtime_env / "relay.sock").exists(), 20)
        os.kill(relay.pid, signal.SIGSTOP)
        threading.Timer(2.0, os.kill, (relay.pid, signal.SIGKILL)).start()
        t0 = time.monotonic()
        with pytest.raises(errors.RelayUnavailable) as exc:
            Soc(connect_timeout_s=30)
        took = time.monotonic() - t0
        assert f"the relay (pid {relay.pid}) exited" in exc.value.message, exc.value.message
        assert 1.5 < took < 6, took
    finally:
        relay.kill()
        relay.wait()
        (runtime_env / "relay.sock").unlink(missing_ok=True)
        cores.stop_and_check()


def test_up_fails_at_once_saying_which_process_was_given_up(runtime_env):
    """'vdsp up -d' has no clock of its own: a core that cannot start is given up after 5 exits
    (a few seconds), and 'up -d' says so then, with the name, instead of waiting a timeout."""
    (runtime_env / "vdsp0.sock").mkdir()       # vdsp0 cannot bind its endpoint: it exits at once
    try:
        t0 = time.monotonic()
        res = run(VDSP + ["up", "-d"], runtime_env, timeout=120)
        took = time.monotonic() - t0
        print(f"\n'vdsp up -d' failed after {took:.1f} s: {res.stderr.strip()}")
        assert res.returncode == 1, res.stdout + res.stderr
        assert "gave up on vdsp0" in res.stderr, res.stderr
        assert took < 40, took
        assert wait_until(lambda: not rt_processes(runtime_env), 15), rt_processes(runtime_env)
    finally:
        run(VDSP + ["down"], runtime_env)
        (runtime_env / "vdsp0.sock").rmdir()

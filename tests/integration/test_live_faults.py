"""Dead and frozen peers: tasks fail with a clear code, nothing hangs, the SoC heals."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from arm_side import CORE_0, CORE_1, Soc, errors, opids
from tests.conftest import HUNG_MS, wait_until
from tests.live import shm_entries

pytestmark = pytest.mark.live


def ping_ok(soc, core) -> bool:
    try:
        return bool(soc.rpc(opids.PING, core=core).wait(2000))
    except errors.VdspError:
        return False


@pytest.mark.parametrize("mode", ["relay", "direct"])
def test_killed_firmware_fails_its_task_and_the_core_recovers(live_soc, mode):
    with Soc(mode=mode) as soc:
        task = soc.rpc(opids.SLEEP, params={"ms": 5000}, core=CORE_0)
        time.sleep(0.3)
        os.kill(live_soc.fw_pid("vdsp0"), signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(errors.CoreCrashed) as exc:
            task.wait(4000)
        assert exc.value.code == -6000291 and time.monotonic() - t0 < 3
        assert soc.rpc(opids.PING, core=CORE_1).wait(2000) == {"core": "vdsp1"}  # the other core is untouched
        assert wait_until(lambda: ping_ok(soc, CORE_0), 15), "vdsp0 did not recover"
    dmesg = (live_soc.rt / "dmesg").read_text()
    assert "crash detected in vdsp0: type killed by SIGKILL" in dmesg
    assert "handling crash #1 in vdsp0" in dmesg and "recovering vdsp0" in dmesg
    assert dmesg.count("remote processor vdsp0 is now up") == 2


def test_a_task_sent_to_a_firmware_that_died_before_its_core_said_so_fails_core_crashed(live_soc):
    """The relay learns of a firmware's death from its core (EVENT crashed); its own link to the
    firmware can find the connection gone first (a busy host delays the core). A task sent there
    meanwhile, and the task the firmware was running, died with the firmware: HB_DSP_CORE_CRASHED
    once the core says so, not "offline" with a guess about keys (seen beside a CPU hog: 11 of 73
    tasks of test_live_load's kill under load). Holds PROTOCOL.md §10: "The code follows the
    new state: `crashed` → `HB_DSP_CORE_CRASHED`"."""
    core_pid, fw_pid = live_soc.pid("vdsp0"), live_soc.fw_pid("vdsp0")
    with Soc() as soc:
        assert soc.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
        running = soc.rpc(opids.SLEEP, params={"ms": 5000}, core=CORE_0)
        time.sleep(0.3)
        os.kill(core_pid, signal.SIGSTOP)       # its core cannot report the death for now
        try:
            os.kill(fw_pid, signal.SIGKILL)
            time.sleep(0.5)                     # the relay's link sees its connection close
            sent = soc.rpc(opids.PING, core=CORE_0)
            time.sleep(0.5)
            assert not sent.done(), "failed before the core said why"
        finally:
            os.kill(core_pid, signal.SIGCONT)
        for task in (running, sent):
            with pytest.raises(errors.CoreCrashed) as exc:
                task.wait(10000)
            assert exc.value.code == -6000291, exc.value.message
            assert "key" not in exc.value.message
        assert wait_until(lambda: ping_ok(soc, CORE_0), 15), "vdsp0 did not recover"


def test_killed_relay_fails_in_flight_tasks_and_the_next_call_starts_a_new_one(live_soc):
    with Soc() as soc:
        task = soc.rpc(opids.SLEEP, params={"ms": 5000}, core=CORE_0)
        time.sleep(0.2)
        old = live_soc.relay_pid()
        os.kill(old, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(errors.RelayUnavailable) as exc:
            task.wait(10000)
        assert exc.value.code == -6000300 and time.monotonic() - t0 < 4
        assert soc.rpc(opids.PING, core=CORE_1).wait(20000) == {"core": "vdsp1"}
        new = live_soc.relay_pid()
        assert new is not None and new != old
        assert wait_until(lambda: ping_ok(soc, CORE_0), 15)   # vdsp0 finishes the orphan sleep, then serves


CLIENT = textwrap.dedent("""
    import sys, time
    from arm_side import Soc, opids, CORE_0
    soc = Soc()
    bufs = [soc.mem.alloc(1 << 20) for _ in range(3)] + [soc.mem.alloc_cached(4096)]
    tasks = [soc.rpc(opids.SLEEP, params={"ms": 200}, core=CORE_0) for _ in range(30)]   # 6 s of work
    print("ready", flush=True)
    time.sleep(60)
""")


def test_killed_client_leaves_no_shared_memory_and_disturbs_no_one(live_soc):
    before = shm_entries()
    proc = subprocess.Popen([sys.executable, "-c", CLIENT], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=os.getcwd()))
    try:
        assert proc.stdout.readline().strip() == "ready"
        created = shm_entries() - before
        assert len(created) >= 5  # 4 segments + the owner's lock
        with Soc() as soc:
            proc.kill()
            proc.wait()
            assert soc.rpc(opids.PING, core=CORE_1).wait(10000) == {"core": "vdsp1"}
            assert wait_until(lambda: not (shm_entries() & created), 15), f"leaked: {shm_entries() & created}"
            # the relay notices the departure (a closed connection, or 3 silent heartbeats) and
            # drops its queued sleeps and cancels those sent ahead to the firmware ...
            line = re.compile(rf"\(pid {proc.pid}\) (?:disconnected|gone silent)[^:]*: (\d+) queued task\(s\) dropped, "
                              rf"(\d+) sent ahead cancelled")
            found = wait_until(lambda: line.search(live_soc.log("relay")), 20)
            assert found, live_soc.log("relay")[-2000:]
            assert int(found[1]) + int(found[2]) >= 1, found[0]
            # ... so vdsp0 is free after at most the sleep it was running, not after the seconds
            # of sleeps left (30 x 200 ms were submitted; the notice comes within about 2 s)
            t0 = time.monotonic()
            assert soc.rpc(opids.PING, core=CORE_0).wait(10000) == {"core": "vdsp0"}
            assert time.monotonic() - t0 < 3.0, f"vdsp0 still ran the dead client's sleeps ({found[0]})"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("mode", ["relay", "direct"])
def test_frozen_core_is_declared_dead_past_the_hung_deadline_and_comes_back(soc_hung_3s, mode):
    """A stopped core (state T) is hung once it has been silent past the deadline."""
    live_soc = soc_hung_3s
    core_pid, fw_pid = live_soc.pid("vdsp0"), live_soc.fw_pid("vdsp0")
    with Soc(mode=mode) as soc:
        task = soc.rpc(opids.SLEEP, params={"ms": 10}, core=CORE_0)
        task.wait(2000)
        os.kill(core_pid, signal.SIGSTOP)
        os.kill(fw_pid, signal.SIGSTOP)
        try:
            task = soc.rpc(opids.PING, core=CORE_0)
            t0 = time.monotonic()
            with pytest.raises(errors.CoreDead) as exc:
                task.wait(20000)
            took = time.monotonic() - t0
            assert exc.value.code == -6000292 and HUNG_MS / 1000 - 0.5 < took < HUNG_MS / 1000 + 5, took
            assert "stopped" in exc.value.message, exc.value.message
            with pytest.raises(errors.CoreError):
                soc.rpc(opids.PING, core=CORE_0).wait(2000)
            assert soc.core_states["vdsp0"] == "dead"   # clients hear about it
            assert soc.rpc(opids.PING, core=CORE_1).wait(2000) == {"core": "vdsp1"}
        finally:
            os.kill(fw_pid, signal.SIGCONT)
            os.kill(core_pid, signal.SIGCONT)
        if mode == "relay":
            assert wait_until(lambda: ping_ok(soc, CORE_0), 10), "vdsp0 did not come back"
    if mode == "direct":  # a direct client reconnects by making a new connection
        with Soc(mode=mode) as soc:
            assert ping_ok(soc, CORE_0)

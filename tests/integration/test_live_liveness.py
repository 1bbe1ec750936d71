"""A starved process is not a dead one; a dead one is known at once (PROTOCOL.md §9).

Real processes: a relay or core frozen (SIGSTOP) for longer than the old 1.5 s heartbeat window
fails nothing; a core killed with ``kill -9`` fails its tasks at once (its connection closes),
not after a window; a frozen firmware with a task running is still caught by its watchdog.
The figures are printed (``-s``)."""
from __future__ import annotations

import os
import signal
import time

import pytest

from arm_side import CORE_0, CORE_1, Soc, errors, opids
from tests.live import LiveSoc

pytestmark = pytest.mark.live

FROZEN_S = 4.0      # well past the old liveness window (3 x 500 ms)


@pytest.mark.parametrize("target", ["relay", "vdsp0"])
def test_a_relay_or_core_frozen_for_seconds_fails_nothing(live_soc, target):
    pid = live_soc.relay_pid() if target == "relay" else live_soc.pid("vdsp0")
    events: list[dict] = []
    with Soc() as soc:
        soc.on_event(events.append)
        assert soc.rpc(opids.PING, core=CORE_0).wait(10000) == {"core": "vdsp0"}
        running = soc.rpc(opids.SLEEP, params={"ms": 300}, core=CORE_0)
        os.kill(pid, signal.SIGSTOP)
        try:
            queued = [soc.rpc(opids.PING, core=core) for core in (CORE_0, CORE_1, CORE_0)]
            time.sleep(FROZEN_S)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert running.wait(20000) == {"slept_ms": pytest.approx(300, abs=300)}
        assert [t.wait(20000)["core"] for t in queued] == ["vdsp0", "vdsp1", "vdsp0"]
        assert soc.rpc(opids.PING, core=CORE_0).wait(10000) == {"core": "vdsp0"}
        assert [e for e in events if e.get("state") == "dead"] == []
        assert soc.core_states["vdsp0"] == "running"
    assert "declared dead" not in live_soc.log("relay")


@pytest.mark.parametrize("mode", ["relay", "direct"])
def test_a_killed_core_fails_its_tasks_at_once(live_soc, mode):
    with Soc(mode=mode) as soc:
        assert soc.rpc(opids.PING, core=CORE_0).wait(10000) == {"core": "vdsp0"}
        task = soc.rpc(opids.SLEEP, params={"ms": 8000}, core=CORE_0)
        time.sleep(0.3)
        os.kill(live_soc.pid("vdsp0"), signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(errors.CoreDead) as exc:
            task.wait(10000)
        took = time.monotonic() - t0
        print(f"\nkill -9 of core vdsp0 ({mode} mode): its task failed after {took * 1000:.0f} ms "
              f"(load {os.getloadavg()[0]:.1f}): {exc.value.message}")
        assert exc.value.code == -6000292
        assert took < 1.0, f"{took:.2f} s: that is a heartbeat window, not the kernel's word"
        assert soc.rpc(opids.PING, core=CORE_1).wait(10000) == {"core": "vdsp1"}


def test_a_frozen_firmware_with_a_task_running_is_caught_by_its_watchdog(runtime_env):
    live = LiveSoc(runtime_env, core_args=["--watchdog-ms", "2000"])
    live.start()
    try:
        with Soc() as soc:
            assert soc.rpc(opids.PING, core=CORE_0).wait(10000) == {"core": "vdsp0"}
            fw = live.fw_pid("vdsp0")
            task = soc.rpc(opids.SLEEP, params={"ms": 1500}, core=CORE_0)
            time.sleep(0.2)
            os.kill(fw, signal.SIGSTOP)
            t0 = time.monotonic()
            with pytest.raises(errors.CoreCrashed) as exc:
                task.wait(30000)
            print(f"\nSIGSTOPped firmware with a task running: failed after {time.monotonic() - t0:.2f} s "
                  f"(watchdog 2 s; load {os.getloadavg()[0]:.1f})")
            assert exc.value.code == -6000291
        assert "crash detected in vdsp0: type watchdog" in (live.rt / "dmesg").read_text()
    finally:
        live.stop_and_check()

"""Remoteproc control through the relay, and what the relay does with tasks for stopped cores."""
from __future__ import annotations

import pytest

from arm_side import CORE_0, CORE_1, CORE_ANY, Soc, errors, opids

pytestmark = pytest.mark.live


def test_stop_and_start_cores_through_the_relay(live_soc):
    events = []
    with Soc() as soc:
        soc.on_event(events.append)
        assert soc.control("vdsp0", "state") == "running"
        assert soc.control("vdsp0", "name") == "vdsp0"
        with pytest.raises(errors.RemoteprocBusy) as exc:
            soc.control("vdsp0", "state", "start")
        assert exc.value.code == -16
        assert soc.control("vdsp0", "state", "stop") == "offline"
        with pytest.raises(errors.RemoteprocInvalid) as exc:
            soc.control("vdsp0", "state", "stop")
        assert exc.value.code == -22
        with pytest.raises(errors.CoreOffline):
            soc.rpc(opids.PING, core=CORE_0).wait(2000)
        assert soc.rpc(opids.PING, core=CORE_ANY).wait(2000) == {"core": "vdsp1"}  # ANY avoids the stopped core

        blocker = soc.rpc(opids.SLEEP, params={"ms": 300}, core=CORE_1)
        queued = [soc.rpc(opids.PING, core=CORE_ANY) for _ in range(4)]   # wait behind the sleep
        assert soc.control("vdsp1", "state", "stop") == "offline"
        with pytest.raises(errors.CoreOffline):
            blocker.wait(3000)                  # in flight when its core stopped
        for task in queued:                     # no core left for ANY tasks: they fail, none hangs
            with pytest.raises(errors.CoreOffline):
                task.wait(3000)

        assert soc.control("vdsp0", "state", "start\n") == "running"
        assert soc.rpc(opids.PING, core=CORE_ANY).wait(5000) == {"core": "vdsp0"}
        assert soc.control("vdsp1", "state", "start") == "running"
        assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}
        with pytest.raises(errors.InvalidCore):
            soc.control("vdsp7", "state")
    states = [(e["core"], e["state"]) for e in events]
    assert ("vdsp0", "offline") in states and ("vdsp0", "running") in states
    dmesg = (live_soc.rt / "dmesg").read_text()
    assert "stopped remote processor vdsp0" in dmesg and "stopped remote processor vdsp1" in dmesg


def test_relay_refuses_unknown_queries(shared_soc):
    with Soc() as soc:
        with pytest.raises(errors.InvalidArgument):
            soc.query("weather")
        stats = soc.query("stats")
        assert stats["clients"] >= 1 and set(stats["inflight"]) == {"vdsp0", "vdsp1"}


def test_sdk_starts_the_relay_when_none_answers(runtime_env):
    from tests.live import LiveSoc
    soc_procs = LiveSoc(runtime_env, relay=False)   # cores only, as after a board boots
    soc_procs.start()
    try:
        assert soc_procs.relay_pid() is None and not (runtime_env / "relay.sock").exists()
        with Soc() as soc:                           # relay mode by default
            assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}
        relay = soc_procs.relay_pid()
        assert relay is not None
        with Soc() as soc:                           # the next client uses the same relay
            assert soc.query("stats")["pid"] == relay
        assert "Connect to vdsp core1 success!" in (runtime_env / "relay.log").read_text()
    finally:
        soc_procs.stop_and_check()                   # also stops the auto-started relay

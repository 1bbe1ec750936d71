"""The SDK against a whole SoC in this process (``vdsp_sim.soc.loopback``): the relay engine, the core
engines and the firmware executors, without processes or sockets. Scheduling, credit, cancel,
core failure, strict cache and the errors a user sees, in relay and direct mode, with exact
event order and no sleeps."""
from __future__ import annotations

import pytest

from arm_side import Soc
from arm_side.memory import CLEAN
from protocol import errors, opids
from protocol.constants import MAX_TASKS_PER_CLIENT, Core
from vdsp_sim.soc.loopback import LoopbackTransport

MODES = ["relay", "direct"]


@pytest.fixture
def loop(request):
    transport = LoopbackTransport(getattr(request, "param", "relay"))
    yield transport
    transport.close()


def soc_of(loop, **kw) -> Soc:
    return Soc(transport=loop, **kw)


def finish_order(tasks) -> list:
    order = []
    for task in tasks:
        task.add_done_callback(lambda t: order.append(t))
    return order


@pytest.mark.parametrize("loop", MODES, indirect=True)
def test_tasks_run_on_the_core_asked_for_and_move_bytes(loop):
    with soc_of(loop) as soc:
        src, dst = soc.mem.alloc(4096), soc.mem.alloc(4096)
        src.array()[:] = 0x5A
        task = soc.rpc(opids.MEMCPY, [src], [dst], core=Core.CORE_1)
        assert task.wait(2000) == {"bytes": 4096}
        assert task.core == "vdsp1"
        assert bytes(dst.array()[:8]) == b"\x5a" * 8
        assert soc.rpc(opids.PING, core=Core.CORE_0).wait(2000) == {"core": "vdsp0"}
        assert soc.core_states == {"vdsp0": "running", "vdsp1": "running"}


def test_the_relay_runs_a_later_high_priority_task_before_earlier_low_ones():
    loop = LoopbackTransport("relay", credit=1)
    try:
        with soc_of(loop) as soc:
            loop.pause("vdsp0")
            low = [soc.rpc(opids.PING, core=Core.CORE_0, custom_id=i) for i in range(3)]
            high = soc.rpc(opids.PING, core=Core.CORE_0, priority=200)
            order = finish_order(low + [high])
            loop.resume("vdsp0")
            for task in low + [high]:
                task.wait(2000)
            # the first low task was already at the firmware (credit 1); the high one overtakes the rest
            assert order == [low[0], high, low[1], low[2]]
    finally:
        loop.close()


def test_credit_bounds_what_a_firmware_holds_and_the_relay_keeps_the_rest():
    loop = LoopbackTransport("relay", credit=2)
    try:
        with soc_of(loop) as soc:
            loop.pause("vdsp0")
            tasks = [soc.rpc(opids.PING, core=Core.CORE_0) for _ in range(5)]
            soc.query("stats")             # a round trip: everything sent has arrived
            assert loop.waiting("vdsp0") == 2
            loop.resume("vdsp0")
            assert [t.wait(2000) for t in tasks] == [{"core": "vdsp0"}] * 5
            assert loop.waiting("vdsp0") == 0
    finally:
        loop.close()


def test_release_removes_a_task_queued_in_the_relay_or_in_the_firmware():
    loop = LoopbackTransport("relay", credit=1)
    try:
        with soc_of(loop) as soc:
            loop.pause("vdsp0")
            ran_before = list(loop.cores["vdsp0"].ran)
            at_fw, in_relay = (soc.rpc(opids.PING, core=Core.CORE_0) for _ in range(2))
            assert in_relay.release() == "cancelled"
            assert at_fw.release() == "cancelled"
            for task in (at_fw, in_relay):
                assert task.done() and isinstance(task.error, errors.TaskCancelled)
                with pytest.raises(errors.InvalidTaskHandle):   # a released task is gone for the caller
                    task.wait(2000)
            loop.resume("vdsp0")
            assert loop.waiting("vdsp0") == 0 and loop.cores["vdsp0"].ran == ran_before   # neither ran
            done = soc.rpc(opids.PING, core=Core.CORE_0)
            done.wait(2000)
            assert done.release() == "unknown"           # it had finished
    finally:
        loop.close()


def test_release_in_direct_mode_cancels_at_the_firmware():
    loop = LoopbackTransport("direct")
    try:
        with soc_of(loop) as soc:
            loop.pause("vdsp1")
            first, second = (soc.rpc(opids.PING, core=Core.CORE_1) for _ in range(2))
            assert second.release() == "cancelled"
            loop.resume("vdsp1")
            assert first.wait(2000) == {"core": "vdsp1"}
            assert second.done() and isinstance(second.error, errors.TaskCancelled)
            assert second.msg_id not in loop.cores["vdsp1"].ran
    finally:
        loop.close()


@pytest.mark.parametrize("loop", MODES, indirect=True)
def test_a_crash_fails_that_cores_tasks_and_recovery_brings_it_back(loop):
    with soc_of(loop) as soc:
        events = []
        soc.on_event(lambda body: events.append((body["core"], body["state"])))
        loop.pause("vdsp0")
        doomed = [soc.rpc(opids.PING, core=Core.CORE_0) for _ in range(3)]
        other = soc.rpc(opids.PING, core=Core.CORE_1)
        loop.crash("vdsp0")
        for task in doomed:
            with pytest.raises(errors.CoreCrashed) as info:
                task.wait(2000)
            assert info.value.code == -6000291
        assert other.wait(2000) == {"core": "vdsp1"}
        loop.resume("vdsp0")
        assert soc.rpc(opids.PING, core=Core.CORE_0).wait(2000) == {"core": "vdsp0"}
        assert ("vdsp0", "crashed") in events and events[-1] == ("vdsp0", "running")
        assert loop.cores["vdsp0"].boots == 2


@pytest.mark.parametrize("loop", MODES, indirect=True)
def test_a_stopped_core_refuses_tasks_with_core_offline_until_started(loop):
    with soc_of(loop) as soc:
        assert soc.control("vdsp1", "state", "stop") == "offline"
        with pytest.raises(errors.CoreOffline) as info:
            soc.rpc(opids.PING, core=Core.CORE_1).wait(2000)
        assert info.value.code == -6000290
        assert soc.rpc(opids.PING).wait(2000) == {"core": "vdsp0"}     # CORE_ANY: the running one
        assert soc.control("vdsp1", "state", "start") == "running"
        assert soc.rpc(opids.PING, core=Core.CORE_1).wait(2000) == {"core": "vdsp1"}


@pytest.mark.parametrize("loop", MODES, indirect=True)
def test_the_errors_a_user_sees(loop):
    with soc_of(loop) as soc:
        with pytest.raises(errors.UnknownOperator) as info:
            soc.rpc(0x7777).wait(2000)
        assert "0x7777" in info.value.message
        with pytest.raises(errors.InvalidArgument):
            soc.rpc(opids.SLEEP, params={"ms": "long"}).wait(2000)
        with pytest.raises(errors.InvalidCore):
            soc.rpc(opids.PING, core=7)
        with pytest.raises(errors.InvalidArgument):
            soc.rpc(opids.PING, priority=256)
        freed = soc.mem.alloc(64)
        freed.free()
        with pytest.raises(errors.SysInvalidArgument):
            soc.rpc(opids.CHECKSUM, [freed])
        assert soc.rpc(opids.PING).wait(2000)                   # nothing above hurt the connection


@pytest.mark.parametrize("loop", MODES, indirect=True)
def test_the_task_past_the_in_flight_limit_is_refused(loop):
    with soc_of(loop) as soc:
        loop.pause("vdsp0")
        loop.pause("vdsp1")
        tasks = [soc.rpc(opids.PING) for _ in range(MAX_TASKS_PER_CLIENT)]
        with pytest.raises(errors.TaskNumExceedLimit) as info:
            soc.rpc(opids.PING).wait(2000)
        assert info.value.code == -6000009
        loop.resume("vdsp0")
        loop.resume("vdsp1")
        assert all(t.wait(2000)["core"] in ("vdsp0", "vdsp1") for t in tasks)
        assert soc.rpc(opids.PING).wait(2000)


def test_strict_mode_refuses_a_buffer_written_but_not_cleaned(loop):
    with soc_of(loop, strict=True) as soc:
        src, dst = soc.mem.alloc_cached(4096), soc.mem.alloc(4096)
        src.array()[:] = 9
        with pytest.raises(errors.CacheCoherencyError):
            soc.rpc(opids.MEMCPY, [src], [dst])
        src.flush(CLEAN)
        assert soc.rpc(opids.MEMCPY, [src], [dst]).wait(2000) == {"bytes": 4096}
        assert int(dst.array()[100]) == 9


def test_a_buffer_of_another_owner_is_refused(loop):
    """The handle check is the real one: a handle this process does not own is foreign."""
    with soc_of(loop) as soc:
        mine = soc.mem.alloc(4096)
        with pytest.raises(errors.VdspError) as info:
            soc.rpc(opids.CHECKSUM, [(mine.phys_addr ^ (1 << 40), 4096)]).wait(2000)
        assert info.value.code in (-6000282, -6000283, -6000281), info.value


def test_two_clients_share_one_loopback_soc(loop):
    with soc_of(loop) as a, soc_of(loop) as b:
        loop.pause("vdsp0")
        ta, tb = a.rpc(opids.PING, core=Core.CORE_0), b.rpc(opids.PING, core=Core.CORE_0)
        loop.resume("vdsp0")
        assert ta.wait(2000) == tb.wait(2000) == {"core": "vdsp0"}
    with soc_of(loop) as c:                     # the transport outlives the Socs that used it
        assert c.rpc(opids.PING).wait(2000)

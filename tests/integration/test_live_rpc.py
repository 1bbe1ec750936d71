"""RPC against a live SoC, in relay mode and direct mode: what an application does."""
from __future__ import annotations

import multiprocessing as mp
import threading
import time
import zlib

import numpy as np
import pytest

from arm_side import CLEAN, CORE_0, CORE_1, CORE_ANY, INVALIDATE, Soc, errors, opids

pytestmark = pytest.mark.live
MODES = ["relay", "direct"]


@pytest.fixture
def soc(mode_soc):
    return mode_soc


def test_ping_reaches_the_pinned_core(soc):
    assert soc.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
    assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}


def test_any_core_spreads_work_over_both_cores(soc):
    tasks = [soc.rpc(opids.SLEEP, params={"ms": 30}, core=CORE_ANY) for _ in range(6)]
    cores = {t.wait(5000) and t.core for t in tasks}
    assert cores == {"vdsp0", "vdsp1"}


def test_memcpy_through_cached_memory_after_clean(soc):
    src, dst = soc.mem.alloc_cached(1 << 20), soc.mem.alloc(1 << 20)
    data = np.random.default_rng(1).integers(0, 256, 1 << 20, dtype=np.uint8)
    src.array()[:] = data
    src.flush(CLEAN)
    values = soc.rpc(opids.MEMCPY, inputs=[src], outputs=[dst], core=CORE_ANY).wait(5000)
    assert values == {"bytes": 1 << 20}
    assert np.array_equal(dst.array(), data)


def test_dsp_sees_stale_ddr_when_the_cpu_forgot_to_clean(soc):
    src = soc.mem.alloc_cached(4096)
    src.array()[:] = 7                     # written in the CPU cache only
    crc_stale = soc.rpc(opids.CHECKSUM, inputs=[src]).wait(5000)["crc32"]
    assert crc_stale == zlib.crc32(bytes(4096))  # the DSP read DDR: still zeros
    src.flush(CLEAN)
    assert soc.rpc(opids.CHECKSUM, inputs=[src]).wait(5000)["crc32"] == zlib.crc32(bytes([7]) * 4096)


def test_cpu_sees_dsp_writes_only_after_invalidate(soc):
    dst = soc.mem.alloc_cached(4096)
    soc.rpc(opids.FILL, outputs=[dst], params={"value": 0xAB}).wait(5000)
    assert not dst.array().any()           # the CPU cache still holds the old zeros
    dst.flush(INVALIDATE)
    assert (dst.array() == 0xAB).all()


def test_strict_mode_names_the_missing_clean(shared_soc):
    with Soc(strict=True) as soc:
        src = soc.mem.alloc_cached(4096)
        src.array()[:] = 1
        with pytest.raises(errors.CacheCoherencyError) as exc:
            soc.rpc(opids.CHECKSUM, inputs=[src])
        assert f"0x{src.phys_addr:x}" in str(exc.value) and "CLEAN" in str(exc.value)
        src.flush(CLEAN)
        soc.rpc(opids.CHECKSUM, inputs=[src]).wait(5000)


def test_strict_mode_names_the_missing_invalidate(shared_soc):
    with Soc(strict=True) as soc:
        dst = soc.mem.alloc_cached(4096)
        soc.rpc(opids.FILL, outputs=[dst], params={"value": 3}).wait(5000)
        with pytest.raises(errors.CacheCoherencyError) as exc:
            dst.array()
        assert "INVALIDATE" in str(exc.value)
        dst.flush(INVALIDATE)
        assert (dst.array() == 3).all()


def test_wait_timeout_keeps_the_task_and_a_later_wait_collects_it(soc):
    task = soc.rpc(opids.SLEEP, params={"ms": 300}, core=CORE_0)
    with pytest.raises(errors.TaskTimeout) as exc:
        task.wait(timeout_ms=50)
    assert exc.value.code == -6000008
    assert task.wait(timeout_ms=0) == {"slept_ms": 300.0}   # <= 0 waits for ever


def test_done_callbacks_run_once_with_the_task(soc):
    seen = []
    done = threading.Event()
    task = soc.rpc(opids.PING, core=CORE_1)
    task.add_done_callback(lambda t: (seen.append(t.values), done.set()))
    assert done.wait(5)
    late = []
    task.add_done_callback(lambda t: late.append(t.core))   # already done: runs at once
    assert seen == [{"core": "vdsp1"}] and late == ["vdsp1"]


@pytest.mark.parametrize("queued_behind", [0, 12])   # 12: more than the relay sends ahead
def test_release_of_a_queued_task_means_it_never_runs(soc, queued_behind):
    buf = soc.mem.alloc(4096)
    blocker = soc.rpc(opids.SLEEP, params={"ms": 400}, core=CORE_0)
    others = [soc.rpc(opids.SLEEP, params={"ms": 1}, core=CORE_0) for _ in range(queued_behind)]
    victim = soc.rpc(opids.FILL, outputs=[buf], params={"value": 9}, core=CORE_0)
    assert victim.release() == "cancelled"
    with pytest.raises(errors.InvalidTaskHandle):
        victim.wait(100)
    blocker.wait(5000)
    for t in others:
        t.wait(5000)
    soc.rpc(opids.PING, core=CORE_0).wait(5000)
    assert not buf.array().any()            # the released fill never ran


def test_release_of_a_running_task_discards_its_result(soc):
    task = soc.rpc(opids.SLEEP, params={"ms": 300}, core=CORE_1)
    time.sleep(0.1)
    assert task.release() == "running"
    with pytest.raises(errors.InvalidTaskHandle):
        task.wait(1000)
    assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}


def test_higher_priority_runs_first_among_waiting_tasks(soc):
    order = []
    blocker = soc.rpc(opids.SLEEP, params={"ms": 300}, core=CORE_0)
    time.sleep(0.05)                        # the blocker is running: the rest must wait
    tasks = [soc.rpc(opids.SLEEP, params={"ms": 1}, core=CORE_0, priority=p, custom_id=c)
             for p, c in [(1, 0), (1, 0), (5, 9), (5, 2), (255, 50), (1, -1)]]
    for i, t in enumerate(tasks):
        t.add_done_callback(lambda _t, i=i: order.append(i))
    blocker.wait(5000)
    for t in tasks:
        t.wait(5000)
    # priority desc, then custom_id asc, then arrival
    assert order == [4, 3, 2, 5, 0, 1]


def test_freed_memory_is_refused_before_sending(soc):
    buf = soc.mem.alloc(4096)
    buf.free()
    with pytest.raises(errors.SysInvalidArgument):
        soc.rpc(opids.FILL, outputs=[buf], params={"value": 1})


def _client_process(mode: str, rt: str, n: int, seed: int, out: mp.Queue) -> None:
    import os
    os.environ["VDSP_RUNTIME_DIR"] = rt
    wrong = 0
    with Soc(mode=mode) as soc:
        rng = np.random.default_rng(seed)
        src, dst = soc.mem.alloc_cached(64 * 1024), soc.mem.alloc_cached(64 * 1024)
        for i in range(n):
            data = rng.integers(0, 256, src.size, dtype=np.uint8)
            src.array()[:] = data
            src.flush(CLEAN)
            soc.rpc(opids.MEMCPY, inputs=[src], outputs=[dst], core=(CORE_0, CORE_1, CORE_ANY)[i % 3],
                    priority=i % 256).wait(10000)
            dst.flush(INVALIDATE)
            wrong += not np.array_equal(dst.array(), data)
    out.put((seed, wrong))


@pytest.mark.parametrize("mode", MODES)
def test_several_client_processes_share_both_cores(shared_soc, mode):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_client_process, args=(mode, str(shared_soc.rt), 40, seed, out))
             for seed in range(4)]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert results == [(seed, 0) for seed in range(4)]


async def test_async_soc_awaits_tasks(shared_soc):
    import asyncio
    from arm_side import AsyncSoc
    async with AsyncSoc() as soc:
        buf = soc.mem.alloc(4096)
        results = await asyncio.gather(*(soc.rpc(opids.PING, core=c) for c in (CORE_0, CORE_1, CORE_ANY)))
        assert [r["core"] for r in results[:2]] == ["vdsp0", "vdsp1"]
        assert await soc.call(opids.FILL, outputs=[buf], params={"value": 5}) == {"bytes": 4096}
        assert (buf.array() == 5).all()
        with pytest.raises(errors.UnknownOperator):
            await soc.rpc(0x13FF)


def test_busy_polling_client_gets_the_same_answers(shared_soc):
    with Soc(busy_poll_us=2000) as soc:
        buf = soc.mem.alloc(4096)
        assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}
        assert soc.rpc(opids.SLEEP, params={"ms": 5}, core=CORE_0).wait(5000) == {"slept_ms": 5.0}  # outlasts the spin
        assert soc.rpc(opids.FILL, outputs=[buf], params={"value": 6}).wait(5000) == {"bytes": 4096}
        assert (buf.array() == 6).all()


@pytest.mark.parametrize("mode", MODES)
def test_close_ends_the_background_reader_rather_than_waiting_out_its_nap(shared_soc, mode, monkeypatch):
    """Soc.close() kicked a pipe the idle reader was not watching: each close waited out the
    reader's nap (up to a quarter heartbeat, ~125 ms). With the nap made 15 s, an unwoken reader
    would outlive close()'s 2 s join."""
    import arm_side.reading as reading_mod
    monkeypatch.setattr(reading_mod, "HEARTBEAT_INTERVAL_MS", 60000)
    soc = Soc(mode=mode)
    assert soc.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
    time.sleep(0.3)                                     # the reader is idle, napping
    reader = soc.client.reader
    soc.close()
    assert not reader.is_alive()



def test_call_waits_as_long_as_vdsp_task_wait_ms_says_when_the_caller_names_no_timeout(soc, monkeypatch):
    """An emulated CPU (Debian 12 under QEMU's TCG) ran the CV sample's bilateralFilter past the
    SDK's fixed 10 s wait: ``VDSP_TASK_WAIT_MS`` sets that default; a timeout given wins."""
    monkeypatch.setenv("VDSP_TASK_WAIT_MS", "50")
    with pytest.raises(errors.TaskTimeout, match="not done after 50 ms"):
        soc.call(opids.SLEEP, params={"ms": 400}, core=CORE_0)
    assert soc.call(opids.SLEEP, params={"ms": 100}, core=CORE_1, timeout_ms=5000) is not None
    monkeypatch.setenv("VDSP_TASK_WAIT_MS", "0")     # no limit
    assert soc.call(opids.SLEEP, params={"ms": 100}, core=CORE_1) is not None
    monkeypatch.setenv("VDSP_TASK_WAIT_MS", "-1")
    with pytest.raises(errors.InvalidArgument, match="VDSP_TASK_WAIT_MS"):
        soc.call(opids.PING, core=CORE_1)
    soc.rpc(opids.PING, core=CORE_0).wait(10000)      # the timed-out sleep ends; the core serves on

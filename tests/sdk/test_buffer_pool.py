"""The scratch-buffer pool of a MemoryManager (what arm_side.cv's numpy helpers use): reuse by
size, its caps, buffers freed elsewhere, and nothing kept once the manager is closed."""
from __future__ import annotations

import os

from arm_side.memory import BufferPool, MemoryManager
from vdsp_board.memory import ddr


def segments(directory) -> set[str]:
    return {n for n in os.listdir(directory) if n.startswith("vdsp-") and not n.endswith(".lock")}


def test_reuse_by_rounded_size(shm):
    with MemoryManager() as mm:
        pool = mm.pool
        assert mm.pool is pool
        a = pool.acquire(3000)
        assert a.size == 4096 and not a.cached
        pool.release(a)
        assert pool.acquire(4000) is a                  # same 4 KiB class
        b = pool.acquire(4097)
        assert b.size == 8192 and pool.allocated == 2
        pool.release(a)
        pool.release(b)
        assert pool.idle() == 2


def test_caps_free_what_does_not_fit(shm):
    with MemoryManager() as mm:
        pool = BufferPool(mm, max_idle_per_size=2, max_idle_bytes=3 * 4096)
        mems = [pool.acquire(100) for _ in range(4)]
        for m in mems:
            pool.release(m)
        assert pool.idle() == 2 and [m.freed for m in mems] == [False, False, True, True]
        big = pool.acquire(8192)
        pool.release(big)                               # 2 x 4 KiB + 8 KiB > 12 KiB: freed
        assert big.freed and pool.idle() == 2
        odd = mm.alloc(5000)                            # not pool-sized: freed, never kept
        pool.release(odd)
        assert odd.freed


def test_a_buffer_freed_elsewhere_is_never_handed_out(shm):
    with MemoryManager() as mm:
        pool = mm.pool
        a = pool.acquire(4096)
        pool.release(a)
        a.free()
        b = pool.acquire(4096)
        assert b is not a and not b.freed and pool.allocated == 2


def test_close_frees_idle_buffers_and_later_releases(shm):
    mm = MemoryManager()
    pool = mm.pool
    kept, lent = pool.acquire(4096), pool.acquire(4096)
    pool.release(kept)
    names = {ddr.segment_name(*ddr.parse_phys(m.phys_addr)) for m in (kept, lent)}
    assert names <= segments(shm)
    mm.close()
    assert kept.freed and lent.freed and pool.idle() == 0
    late = pool.acquire(4096)                           # e.g. a call racing the Soc's close
    pool.release(late)
    assert late.freed and pool.idle() == 0
    assert not names & segments(shm) and not segments(shm)

"""arm_side.memory: the hbSys* API, cache incoherence and strict mode."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from arm_side.memory import CLEAN, INVALIDATE, Mem, MemoryManager
from dsp_side.ddr_resolver import Resolver
from protocol.constants import HANDLE_REGISTERED
from protocol.errors import (CacheCoherencyError, SysInvalidArgument, SysRegisterMemFailed)
from vdsp_board.memory import ddr

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def mm(shm):
    manager = MemoryManager(strict=False)
    yield manager
    manager.close()


@pytest.fixture
def strict(shm):
    manager = MemoryManager(strict=True)
    yield manager
    manager.close()


@pytest.fixture
def dsp(shm):
    resolver = Resolver()
    yield resolver
    resolver.close()


def ddr_view(dsp: Resolver, mem: Mem) -> memoryview:
    """What the DSP sees of ``mem``."""
    return dsp.resolve(mem.phys_addr, mem.size)


def segments(shm: Path) -> list[str]:
    return [n for n in os.listdir(shm) if not n.endswith(".lock")]


# -- alloc / free --------------------------------------------------------------

def test_alloc_and_free(mm, shm):
    mem = mm.alloc(1000)
    assert (mem.size, mem.cached, mem.registered, mem.freed) == (1000, False, False, False)
    assert ddr.parse_phys(mem.phys_addr)[0] == ddr.current_owner().id
    assert mem.handle() == [mem.phys_addr, 1000, 0]
    assert len(segments(shm)) == 1 and mm.live() == [mem]
    mm.free(mem)
    assert mem.freed and segments(shm) == [] and mm.live() == []


@pytest.mark.parametrize("size", [0, 2**32, -1, 2.0])
def test_bad_sizes(mm, size):
    for alloc in (mm.alloc, mm.alloc_cached):
        with pytest.raises(SysInvalidArgument) as info:
            alloc(size)
        assert info.value.code == -6000129


def test_freed_memory_cannot_be_used(mm):
    mem = mm.alloc_cached(16)
    phys = mem.phys_addr
    mem.free()
    uses = [mem.array, mem.read, mem.handle, mem.free, lambda: mem.write(b"x"),
            lambda: mem.flush(CLEAN), lambda: mm.free(mem), lambda: mm.flush(mem, CLEAN)]
    for use in uses:
        with pytest.raises(SysInvalidArgument, match=f"memory 0x{phys:x} was freed"):
            use()
    assert "freed" in repr(mem) and f"0x{phys:x}" in repr(mem)


def test_context_manager_frees_and_manager_close_frees_all(shm):
    with MemoryManager() as manager:
        with manager.alloc(10) as mem:
            assert len(segments(shm)) == 1
        assert mem.freed and segments(shm) == []
        kept = [manager.alloc(10), manager.alloc_cached(10)]
        assert len(segments(shm)) == 2
    assert segments(shm) == [] and all(m.freed for m in kept)


def test_addresses_not_reused_after_free(mm):
    seen = set()
    for _ in range(10):
        with mm.alloc(100) as mem:
            assert mem.phys_addr not in seen
            seen.add(mem.phys_addr)


def test_free_with_live_numpy_views_keeps_them_valid(mm, shm):
    mem = mm.alloc(64)
    arr = mem.array()
    arr[:] = 3
    mem.free()
    assert segments(shm) == []
    assert arr.sum() == 3 * 64   # the mapping lives as long as the array


# -- CPU access --------------------------------------------------------------------

def test_uncached_array_is_zero_copy_and_coherent(mm, dsp):
    mem = mm.alloc(4 << 20)
    a, b = mem.array(), mem.array(np.float32, (1024, 1024))
    assert np.shares_memory(a, b) and b.shape == (1024, 1024)
    b[0, 0] = 1.5
    assert np.frombuffer(ddr_view(dsp, mem), np.float32, count=1)[0] == 1.5
    ddr_view(dsp, mem)[4:8] = np.float32(2.5).tobytes()
    assert b[0, 1] == 2.5
    mem.flush(CLEAN)
    mem.flush(INVALIDATE)   # harmless no-ops
    assert b[0, 1] == 2.5


def test_read_write_offsets_and_bounds(mm):
    for mem in (mm.alloc(16), mm.alloc_cached(16)):
        mem.write(b"abcd", offset=4)
        mem.write(np.arange(2, dtype=np.uint16), offset=12)
        assert mem.read(4, offset=4) == b"abcd"
        assert mem.read(offset=12) == b"\x00\x00\x01\x00"
        assert mem.array(np.uint16, offset=12).tolist() == [0, 1]
        for bad in (lambda: mem.write(b"x" * 17), lambda: mem.write(b"x", offset=16),
                    lambda: mem.read(1, offset=16), lambda: mem.read(-1), lambda: mem.write(3),
                    lambda: mem.array(np.uint32, (5,)), lambda: mem.array(offset=17)):
            with pytest.raises(SysInvalidArgument):
                bad()


def test_bad_flush_flag(mm):
    for mem in (mm.alloc(8), mm.alloc_cached(8)):
        for flag in (0, 3, 4, "CLEAN", None):
            with pytest.raises(SysInvalidArgument):
                mem.flush(flag)


# -- cache incoherence -------------------------------------------------------------

def test_cached_starts_zero_everywhere(mm, dsp):
    mem = mm.alloc_cached(4096)
    assert mem.cached and not mem.array().any()
    assert bytes(ddr_view(dsp, mem)) == bytes(4096)


def test_cpu_writes_invisible_to_dsp_until_clean(mm, dsp):
    mem = mm.alloc_cached(100)
    mem.array()[:10] = 5
    mem.write(b"\x09", offset=99)
    assert bytes(ddr_view(dsp, mem)) == bytes(100)
    mm.flush(mem, CLEAN)
    seen = bytes(ddr_view(dsp, mem))
    assert seen[:10] == b"\x05" * 10 and seen[99] == 9


def test_dsp_writes_invisible_to_cpu_until_invalidate(mm, dsp):
    mem = mm.alloc_cached(100)
    arr = mem.array()
    ddr_view(dsp, mem)[:] = b"\x07" * 100
    assert not arr.any() and mem.read(3) == bytes(3)
    mem.flush(INVALIDATE)
    assert (arr == 7).all() and mem.read(3) == b"\x07" * 3


def test_a_flush_of_a_range_moves_only_that_range(mm, dsp):
    """What the C face does for an hbSysMem naming part of a buffer (phyAddr + offset)."""
    mem = mm.alloc_cached(100)
    mem.array()[:] = 5                               # the CPU wrote all of it ...
    ddr_view(dsp, mem)[90:] = b"\x07" * 10           # ... the DSP wrote the tail meanwhile
    mem.flush(CLEAN, 10, 20)                         # clean bytes 10..29 only
    assert bytes(ddr_view(dsp, mem)) == bytes(10) + b"\x05" * 20 + bytes(60) + b"\x07" * 10
    mem.flush(INVALIDATE, 90, 10)                    # and refresh the tail only
    assert bytes(mem.array()) == b"\x05" * 90 + b"\x07" * 10
    for offset, size in ((95, 10), (-1, 5), (0, -1)):
        with pytest.raises(SysInvalidArgument):
            mem.flush(CLEAN, offset, size)


# -- strict mode --------------------------------------------------------------------

def test_strict_submit_of_dirty_cache_names_the_buffer(strict):
    mem = strict.alloc_cached(256)
    strict.check_before_submit(mem)      # clean: fine
    mem.array()[0] = 1
    with pytest.raises(CacheCoherencyError) as info:
        strict.check_before_submit(mem)
    msg = info.value.message
    assert info.value.code == -6000132
    assert f"0x{mem.phys_addr:x}" in msg and "256" in msg
    assert "written by the CPU but not cleaned: call flush(CLEAN) before the task" in msg
    mem.flush(CLEAN)
    strict.check_before_submit(mem)
    strict.check_before_submit(strict.alloc(16))     # uncached: nothing to clean


def test_strict_read_after_dsp_write_needs_invalidate(strict, dsp):
    mem = strict.alloc_cached(64)
    ddr_view(dsp, mem)[0] = 42
    strict.mark_device_written(mem)
    for read in (mem.array, mem.read):
        with pytest.raises(CacheCoherencyError, match=f"0x{mem.phys_addr:x}.*written by the DSP; "
                                                        r"call flush\(INVALIDATE\) before reading"):
            read()
    strict.check_before_submit(mem)      # chaining an output into the next task is fine
    mem.flush(INVALIDATE)
    assert mem.read(1) == b"\x2a"


def test_non_strict_hooks_do_nothing(mm):
    mem = mm.alloc_cached(8)
    mem.write(b"dirty")
    mm.check_before_submit(mem)
    mm.mark_device_written(mem)
    assert mem.read(5) == b"dirty"


def test_strict_default_from_env(shm, monkeypatch):
    for value, expected in [("1", True), ("true", True), ("YES", True), ("0", False), ("", False)]:
        monkeypatch.setenv("VDSP_STRICT_CACHE", value)
        assert MemoryManager().strict is expected
    assert MemoryManager(strict=False).strict is False


# -- register ------------------------------------------------------------------------

CHILD_OWNS = """
import sys
from arm_side.memory import MemoryManager
mem = MemoryManager().alloc(100)
mem.write(b"hello from another process")
print(mem.phys_addr, flush=True)
grants = []
for line in sys.stdin:                  # "share TO OFFSET SIZE" / "revoke" (the last grant)
    cmd = line.split()
    if cmd[0] == "share":
        grants.append(mem.share(to=int(cmd[1], 0), offset=int(cmd[2]), size=int(cmd[3])))
    elif cmd[0] == "revoke":
        grants.pop().revoke()
    print("ok", flush=True)
"""


class Child:
    """Another process owning 100 bytes of DDR, sharing them on request."""

    def __init__(self, shm: Path) -> None:
        env = dict(os.environ, VDSP_SHM_DIR=str(shm), PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD_OWNS], env=env, cwd=ROOT, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.phys = int(self.proc.stdout.readline())

    def say(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def close(self) -> None:
        self.proc.communicate("", timeout=30)
        assert self.proc.returncode == 0


def test_register_foreign_memory_only_within_a_grant(mm, dsp, shm):
    child = Child(shm)
    try:
        phys = child.phys
        with pytest.raises(SysRegisterMemFailed) as info:       # hbSysRegisterMem of memory never shared
            mm.register(phys + 11, 15)
        assert info.value.code == -6000131 and "not granted" in info.value.message
        child.say(f"share {mm.owner_id} 11 15")                 # exactly those 15 bytes, to us
        for p, n in ((phys + 10, 15), (phys + 11, 16)):
            with pytest.raises(SysRegisterMemFailed):
                mm.register(p, n)
        mem = mm.register(phys + 11, 15)
        assert (mem.cached, mem.registered, mem.size) == (True, True, 15)
        assert mem.handle() == [phys + 11, 15, HANDLE_REGISTERED]
        assert mem.read() == b"another process"
        view = ddr_view(dsp, mem)
        assert bytes(view) == b"another process"
        mem.write(b"A")
        assert view[0] == ord("a")   # cached: needs CLEAN
        mem.flush(CLEAN)
        assert view[0] == ord("A")
        del view
        mm.unregister(mem)
        assert mem.freed
        child.say("revoke")
        with pytest.raises(SysRegisterMemFailed):
            mm.register(phys + 11, 15)
        child.say("share 0 0 100")                              # to any owner
        mm.unregister(mm.register(phys, 100))
    finally:
        child.close()
    assert [n for n in os.listdir(shm) if n.endswith(".acl")] == []     # its grants went with it


def test_grants_of_own_memory(mm, shm):
    from protocol import acl as aclrule
    from vdsp_board.memory import acl
    mem, other = mm.alloc(4096), mm.alloc(64)
    whole = mem.share()
    part = mm.grant(mem, to=0x123, offset=100, size=50)
    assert (whole.phys_addr, whole.size, part.phys_addr, part.size) == (mem.phys_addr, 4096, mem.phys_addr + 100, 50)
    base = ddr.parse_phys(mem.phys_addr)[1]
    assert acl.Reader().grants(mm.owner_id) == (aclrule.AclEntry(base, 4096, 0), aclrule.AclEntry(base + 100, 50, 0x123))
    part.revoke()
    with pytest.raises(SysInvalidArgument):
        part.revoke()
    for bad in (dict(offset=4000, size=200), dict(offset=-1), dict(size=0), dict(to=-5), dict(to=1 << 22)):
        with pytest.raises(SysInvalidArgument):
            mem.share(**bad)
    mem.free()                                  # freeing ends its grants
    assert whole.revoked and acl.Reader().grants(mm.owner_id) == ()
    with pytest.raises(SysInvalidArgument):
        mem.share()
    grants = [other.share(to=i + 1) for i in range(aclrule.MAX_GRANTS)]
    with pytest.raises(SysInvalidArgument) as info:     # bounded per owner
        other.share()
    assert "64 grants" in info.value.message
    for g in grants:
        g.revoke()
    assert not (shm / acl.acl_name(mm.owner_id)).exists()


def test_register_own_memory_shares_ddr(mm):
    own = mm.alloc(64)
    reg = mm.register(own.phys_addr, 64)
    own.write(b"xyz")
    reg.flush(INVALIDATE)
    assert reg.read(3) == b"xyz"
    mm.unregister(reg)
    assert own.read(3) == b"xyz" and not own.freed


def test_register_nonexistent_range_fails(mm):
    own = mm.alloc(100)
    bad = [ddr.make_phys(0x3FFFFF, 0x1000), own.phys_addr - 1, own.phys_addr + 4096]
    for phys, size in [(p, 1) for p in bad] + [(own.phys_addr, 101), (own.phys_addr + 99, 2)]:
        with pytest.raises(SysRegisterMemFailed) as info:
            mm.register(phys, size)
        assert info.value.code == -6000131 and f"0x{phys:x}" in info.value.message
    freed = mm.alloc(10)
    freed.free()
    with pytest.raises(SysRegisterMemFailed):
        mm.register(freed.phys_addr, 10)
    for phys, size in [(-1, 1), (own.phys_addr, 0)]:
        with pytest.raises(SysInvalidArgument):
            mm.register(phys, size)


def test_unregister_only_registered(mm):
    mem = mm.alloc_cached(8)
    with pytest.raises(SysInvalidArgument):
        mm.unregister(mem)
    other = MemoryManager()
    with pytest.raises(SysInvalidArgument):
        other.free(mem)
    assert not mem.freed


# -- the real /dev/shm ----------------------------------------------------------------

def test_real_dev_shm_leaves_nothing_after_close(monkeypatch):
    monkeypatch.delenv("VDSP_SHM_DIR", raising=False)
    manager = MemoryManager()
    mems = [manager.alloc(4096), manager.alloc_cached(100), manager.alloc(1)]
    owner = ddr.current_owner()
    assert owner.dir == "/dev/shm"
    prefix = f"vdsp-{owner.id:06x}"
    names = [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]
    assert len([n for n in names if n.startswith(prefix + "-")]) == 3 and prefix + ".lock" in names
    manager.close()
    ddr.close_owner()
    assert [n for n in os.listdir("/dev/shm") if n.startswith(prefix)] == []
    assert all(m.freed for m in mems)

"""vdsp_board.memory.ddr (segments, owners, reaping) and dsp_side.ddr_resolver."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dsp_side.ddr_resolver import Resolver
from protocol.errors import (FreedHandle, HandleOutOfBounds, SysInvalidArgument,
                             UnknownHandle)
from vdsp_board.memory import ddr

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def resolver(shm):
    r = Resolver()
    yield r
    r.close()


def names(directory: Path) -> set[str]:
    return set(os.listdir(directory))


def me() -> int:
    return ddr.current_owner().id


def run_child(code: str, shm: Path, **kw) -> subprocess.Popen:
    env = dict(os.environ, VDSP_SHM_DIR=str(shm), PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True, **kw)


def age(path: Path, seconds: float = 10) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


# -- segments and owners ----------------------------------------------------------

def test_create_maps_a_zeroed_file_of_exact_size_and_unlink_removes_it(shm):
    seg = ddr.Segment.create(100)
    path = shm / seg.name
    assert path.stat().st_size == 100
    assert bytes(seg.buf) == bytes(100)
    assert names(shm) == {seg.name, ddr.lock_name(me())}
    seg.close()
    assert not path.exists()
    assert names(shm) == {ddr.lock_name(me())}


def test_files_are_private_0600(shm):
    seg = ddr.Segment.create(10)
    for name in names(shm):
        assert stat.S_IMODE((shm / name).stat().st_mode) == 0o600, name
    seg.close()


def test_phys_decodes_to_owner_and_page_aligned_offsets_never_reused(shm):
    first = ddr.Segment.create(5000)
    owner, offset = ddr.parse_phys(first.phys)
    assert owner == me() and 1 <= owner < 2**22
    assert offset == 0x1000 and first.name == ddr.segment_name(owner, offset)
    first.close()
    second = ddr.Segment.create(1)
    assert ddr.parse_phys(second.phys) == (owner, 0x1000 + 2 * ddr.PAGE)   # 5000 took two pages
    second.close()
    seen = {first.phys, second.phys}
    for _ in range(20):
        seg = ddr.Segment.create(1)
        assert seg.phys not in seen and seg.phys % ddr.PAGE == 0
        seen.add(seg.phys)
        seg.close()


@pytest.mark.parametrize("size", [0, -1, 2**32, 1.5, True, "8"])
def test_bad_size_is_sys_invalid_argument(shm, size):
    with pytest.raises(SysInvalidArgument) as info:
        ddr.Segment.create(size)
    assert info.value.code == -6000129
    assert [n for n in names(shm) if not n.endswith(".lock")] == []


def test_owner_close_removes_its_segments_and_lock(shm):
    segs = [ddr.Segment.create(64) for _ in range(3)]
    owner = ddr.current_owner()
    owner.close()
    assert names(shm) == set()
    assert ddr.current_owner().id != 0    # a fresh owner is made on next use
    del segs


def test_env_dir_is_read_at_call_time(tmp_path, monkeypatch):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        monkeypatch.setenv("VDSP_SHM_DIR", str(tmp_path / sub))
        seg = ddr.Segment.create(1)
        assert (tmp_path / sub / seg.name).exists()
        seg.close()
        ddr.close_owner()


FORKS = """
import os
from vdsp_board.memory import ddr
parent_seg = ddr.Segment.create(10)
parent = ddr.current_owner()
read_fd, write_fd = os.pipe()
pid = os.fork()
if pid == 0:
    try:
        parent.close()          # no-op in the child
        parent_seg.close()      # must not unlink the parent's file
        child = ddr.Segment.create(10)
        os.write(write_fd, f"{child.owner.id}\\n".encode())
    finally:
        os._exit(0)
os.close(write_fd)
child_owner = int(os.read(read_fd, 100))
os.waitpid(pid, 0)
print(parent.id, parent_seg.name, child_owner, flush=True)
input()                         # the test looks at the files while this parent lives
"""


def test_fork_child_gets_its_own_owner_and_leaves_parent_files(shm):
    """Forked in a child interpreter of one thread (a fork in the multi-threaded pytest worker
    risks a lock held across it: Python 3.12+ warns of it), not in this process."""
    proc = run_child(FORKS, shm)
    try:
        parent_id, parent_seg, child_owner = proc.stdout.readline().split()
        parent_id, child_owner = int(parent_id), int(child_owner)
        assert child_owner != parent_id
        assert (shm / parent_seg).exists() and (shm / ddr.lock_name(parent_id)).exists()
        removed = ddr.reap()    # the child died without closing: reaped as a dead owner
        assert ddr.lock_name(child_owner) in removed
        assert all(n.startswith(f"vdsp-{child_owner:06x}") for n in removed)
        assert (shm / parent_seg).exists()      # the living parent's files are spared
    finally:
        proc.communicate("\n", timeout=30)
    assert proc.returncode == 0


# -- reaping -----------------------------------------------------------------------

CHILD_DIES = """
import os, signal
from vdsp_board.memory import ddr
segs = [ddr.Segment.create(4096 * (i + 1)) for i in range(3)]
print(ddr.current_owner().id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""

CHILD_WAITS = """
import sys
from vdsp_board.memory import ddr
seg = ddr.Segment.create(100)
print(ddr.current_owner().id, flush=True)
sys.stdin.read()
"""


def test_reap_removes_a_killed_owners_files_and_spares_live_ones(shm):
    mine = ddr.Segment.create(100)
    child = run_child(CHILD_DIES, shm)
    out, _ = child.communicate(timeout=30)
    assert child.returncode == -9
    dead = int(out)
    dead_files = {n for n in names(shm) if n.startswith(f"vdsp-{dead:06x}")}
    assert len(dead_files) == 4 and ddr.lock_name(dead) in dead_files
    assert sorted(ddr.reap()) == sorted(dead_files)
    assert names(shm) == {mine.name, ddr.lock_name(me())}
    assert ddr.reap() == []
    mine.close()


def test_reap_spares_a_live_owner_in_another_process(shm):
    child = run_child(CHILD_WAITS, shm)
    try:
        owner = int(child.stdout.readline())
        assert ddr.reap() == []
        assert len([n for n in names(shm) if n.startswith(f"vdsp-{owner:06x}")]) == 2
    finally:
        child.communicate("", timeout=30)   # exits normally: its atexit cleans up
    assert not [n for n in names(shm) if n.startswith(f"vdsp-{owner:06x}")]


def test_reap_orphans_only_when_old_and_never_foreign_files(shm):
    orphan = shm / ddr.segment_name(0xABCDEF, 0x1000)
    orphan.write_bytes(b"x")
    others = ["other-file", "vdsp-notes.txt", "vdsp-zzzzzz-0000001000"]
    for name in others:
        (shm / name).write_bytes(b"keep")
        age(shm / name)
    assert ddr.reap() == []            # too young: maybe a creator racing us
    age(orphan)
    assert ddr.reap() == [orphan.name]
    assert names(shm) == set(others)


def test_reap_removes_old_unlocked_temp_lock_but_not_segments_of_that_id(shm):
    seg = ddr.Segment.create(8)
    tmp = shm / f"{ddr.lock_name(me())}.tmp999999"  # a creator that died mid-claim of our id
    tmp.write_bytes(b"")
    assert ddr.reap() == []
    age(tmp)
    assert ddr.reap() == [tmp.name]
    assert (shm / seg.name).exists()
    seg.close()


def test_reap_of_missing_dir_is_empty(tmp_path):
    assert ddr.reap(str(tmp_path / "nope")) == []


# -- resolver ----------------------------------------------------------------------

def test_resolve_is_a_zero_copy_view_of_exact_size(resolver):
    seg = ddr.Segment.create(32 << 20)
    view = resolver.resolve(seg.phys + 4096, 100)
    assert len(view) == 100 and not view.readonly
    view[0:3] = b"abc"
    assert bytes(seg.buf[4096:4099]) == b"abc"
    seg.buf[4099] = 7
    assert view[3] == 7
    del view
    big = resolver.resolve(seg.phys, 32 << 20)
    start = time.perf_counter()
    for _ in range(1000):
        resolver.resolve(seg.phys, 32 << 20)
    assert time.perf_counter() - start < 0.5     # no 32 MiB copies
    assert resolver.cached_count() == 1
    del big
    seg.close()


@pytest.mark.parametrize("phys, size, error", [
    (-1, 1, UnknownHandle), ("0x1000", 1, UnknownHandle), (1.0, 1, UnknownHandle),
    (0x1000, 0, HandleOutOfBounds), (0x1000, -5, HandleOutOfBounds), (0x1000, None, HandleOutOfBounds),
])
def test_resolve_rejects_malformed_handles(resolver, phys, size, error):
    with pytest.raises(error):
        resolver.resolve(phys, size)


def test_resolve_unknown_address(resolver):
    seg = ddr.Segment.create(100)
    for phys in (ddr.make_phys(me(), 0), seg.phys + 4096, ddr.make_phys(0x3FFFFF, 0x1000)):
        with pytest.raises(UnknownHandle) as info:
            resolver.resolve(phys, 1)
        assert info.value.code == -6000280 and f"0x{phys:x}" in info.value.message
    seg.close()


def test_resolve_freed_segment_seen_before(resolver):
    seg = ddr.Segment.create(100)
    view = resolver.resolve(seg.phys, 10)
    seg.close()
    for phys in (seg.phys, seg.phys + 50):   # first via the cache, then via the freed ranges
        with pytest.raises(FreedHandle) as info:
            resolver.resolve(phys, 10)
        assert info.value.code == -6000281 and f"0x{phys:x}" in info.value.message
    assert resolver.cached_count() == 0
    del view
    resolver.purge()    # the mapping kept alive for `view` is closed now


def test_resolve_freed_never_seen_is_unknown(resolver):
    seg = ddr.Segment.create(100)
    seg.close()
    with pytest.raises(UnknownHandle):
        resolver.resolve(seg.phys, 10)


def test_resolve_out_of_bounds_names_handle_and_segment(resolver):
    seg = ddr.Segment.create(100)
    with pytest.raises(HandleOutOfBounds) as info:
        resolver.resolve(seg.phys + 50, 51)
    err = info.value
    assert err.code == -6000282
    assert err.message == (f"handle 0x{seg.phys + 50:x} size 51 exceeds segment "
                           f"0x{seg.phys:x} of 100 bytes")
    assert len(resolver.resolve(seg.phys + 50, 50)) == 50
    seg.close()


def test_purge_drops_unlinked_segments_even_with_live_views(resolver):
    segs = [ddr.Segment.create(100) for _ in range(3)]
    views = [resolver.resolve(s.phys, 100) for s in segs]
    assert resolver.cached_count() == 3
    segs[0].close()
    segs[1].close()
    assert resolver.purge() == 2      # views[0:2] still exported: mappings kept, no BufferError
    assert resolver.cached_count() == 1
    views[0][0] = 1                   # still a valid mapping
    del views
    assert resolver.purge() == 0
    segs[2].close()


def test_cache_is_bounded(shm):
    resolver = Resolver(max_cached=4)
    segs = [ddr.Segment.create(10) for _ in range(10)]
    for seg in segs:
        resolver.resolve(seg.phys, 10)
    assert resolver.cached_count() == 4
    assert len(resolver.resolve(segs[0].phys, 10)) == 10
    resolver.close()
    for seg in segs:
        seg.close()


def test_array_is_the_same_object_while_its_segment_lives(resolver, shm):
    """Resolver.array (the firmware's buffers): one uint8 array per (handle, writable), read-only
    unless writable, checked against the file every time: freed, truncated or replaced, the
    handle is resolved afresh (and refused as resolve refuses it)."""
    seg = ddr.Segment.create(3 * ddr.PAGE)
    a = resolver.array(seg.phys, 100, False)
    assert a.dtype == np.uint8 and a.size == 100 and not a.flags.writeable
    assert resolver.array(seg.phys, 100, False) is a
    w = resolver.array(seg.phys, 100, True)
    assert w is not a and w.flags.writeable and resolver.array(seg.phys, 100, True) is w
    w[0] = 42
    assert a[0] == 42                                  # the same bytes, no copies
    os.truncate(shm / seg.name, ddr.PAGE)              # resized behind the cached mapping
    with pytest.raises(HandleOutOfBounds):
        resolver.array(seg.phys, 2 * ddr.PAGE, True)
    b = resolver.array(seg.phys, 100, False)
    assert b is not a and b[0] == 42                   # mapped afresh
    del a, w
    seg.close()
    with pytest.raises(FreedHandle):
        resolver.array(seg.phys, 100, False)
    del b
    resolver.purge()


def test_array_cache_lets_go_of_dropped_segments(shm):
    resolver = Resolver(max_cached=2)
    segs = [ddr.Segment.create(10) for _ in range(4)]
    for seg in segs:
        resolver.array(seg.phys, 10, True)
    assert resolver.cached_count() == 2 and len(resolver._arrays) == 2   # evicted mappings: arrays gone too
    resolver.close()
    assert not resolver._arrays and not resolver._zombies              # no view kept a mapping open
    for seg in segs:
        seg.close()


# -- hostile files: truncation, symlinks, foreign files ---------------------------------

def test_truncated_segment_is_out_of_bounds_not_a_sigbus(resolver, shm):
    seg = ddr.Segment.create(3 * ddr.PAGE)
    assert len(resolver.resolve(seg.phys, 3 * ddr.PAGE)) == 3 * ddr.PAGE
    os.truncate(shm / seg.name, ddr.PAGE)   # the client shrinks its file behind the cached mapping
    with pytest.raises(HandleOutOfBounds) as info:
        resolver.resolve(seg.phys, 3 * ddr.PAGE)
    assert info.value.message.endswith(f"exceeds segment 0x{seg.phys:x} of {ddr.PAGE} bytes")
    with pytest.raises(HandleOutOfBounds):
        resolver.resolve(seg.phys + ddr.PAGE - 1, 2)
    assert len(resolver.resolve(seg.phys + 10, ddr.PAGE - 10)) == ddr.PAGE - 10
    os.truncate(shm / seg.name, 0)
    for r in (resolver, Resolver()):        # cached or not
        with pytest.raises(HandleOutOfBounds, match=" of 0 bytes"):
            r.resolve(seg.phys, 1)
    seg.close()     # never touch seg.buf again: its pages are gone


def test_symlink_named_like_a_segment_is_unknown(resolver, shm):
    from arm_side.memory import MemoryManager
    from protocol.errors import SysRegisterMemFailed
    seg = ddr.Segment.create(2 * ddr.PAGE)
    link_offset = 0x100_0000
    link = shm / ddr.segment_name(me(), link_offset)
    os.symlink(shm / seg.name, link)
    phys = ddr.make_phys(me(), link_offset)
    for handle in (phys, phys + 10):
        with pytest.raises(UnknownHandle):
            resolver.resolve(handle, 10)
    with pytest.raises(SysRegisterMemFailed):
        MemoryManager().register(phys, 10)
    link.unlink()
    os.symlink("/nonexistent", link)        # dangling: the same
    with pytest.raises(UnknownHandle):
        resolver.resolve(phys, 10)
    link.unlink()
    os.mkfifo(link)                          # not a regular file
    with pytest.raises(UnknownHandle):
        resolver.resolve(phys, 1)
    link.unlink()
    seg.close()


def test_segment_of_another_uid_is_unknown(resolver, monkeypatch):
    seg = ddr.Segment.create(100)
    real = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: real + 1)   # as if the file were someone else's
    with pytest.raises(UnknownHandle):
        resolver.resolve(seg.phys, 10)
    monkeypatch.setattr(os, "geteuid", lambda: real)
    assert len(resolver.resolve(seg.phys, 10)) == 10
    seg.close()


def test_reap_is_not_stalled_or_misled_by_fifos_and_symlinks_named_like_locks(shm):
    import threading
    fifo = shm / "fifo"
    os.mkfifo(fifo)
    os.symlink(fifo, shm / ddr.lock_name(0x7AB123))     # opening a FIFO for reading blocks
    os.mkfifo(shm / ddr.lock_name(0x7AB124))
    for fake in (0x7AB123, 0x7AB124):
        (shm / ddr.segment_name(fake, 0x1000)).write_bytes(b"x")
    done = threading.Event()
    worker = threading.Thread(target=lambda: (ddr.reap(), done.set()), daemon=True)
    worker.start()
    try:
        assert done.wait(5), "reap blocked on a FIFO"
    finally:
        for path in (fifo, shm / ddr.lock_name(0x7AB124)):     # unblock a stuck reader, if any
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK)) if not done.is_set() else None
        worker.join(5)

"""The DDR directory at scale: resolving and reaping stay cheap with 20,000 segment files,
and a process can map more segments than it may open files.

Costs are counted (directory listings, stat calls, open fds), never timed, so these
tests cannot be flaky on a loaded machine.
"""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsp_side.ddr_resolver import Resolver
from protocol.errors import UnknownHandle
from vdsp_board.memory import ddr

ROOT = Path(__file__).resolve().parents[2]
CROWD = 20_000


class Calls:
    """Counts the calls of some ``os`` functions (patched for the test's duration)."""

    def __init__(self, monkeypatch, names: tuple[str, ...]) -> None:
        self.counts = dict.fromkeys(names, 0)
        self.real = {name: getattr(os, name) for name in names}
        for name in names:
            real = self.real[name]

            def counting(*args, _name=name, _real=real, **kw):
                self.counts[_name] += 1
                return _real(*args, **kw)
            monkeypatch.setattr(os, name, counting)

    def take(self) -> dict[str, int]:
        """Counts since the last take()."""
        counts, self.counts = self.counts, dict.fromkeys(self.counts, 0)
        return counts


def listings(counts: dict[str, int]) -> int:
    return counts["listdir"] + counts["scandir"]


def stats(counts: dict[str, int]) -> int:
    return counts["stat"] + counts["lstat"]


def age_dir(path: Path, seconds: float = 60) -> None:
    """Make the directory look quiet: its mtime in the past (as if nothing changed lately)."""
    past = time.time() - seconds
    os.utime(path, (past, past))


@pytest.fixture
def crowded(shm):
    """``shm`` holding 20,000 segment files of another owner that is alive (we hold its lock)."""
    me = ddr.current_owner().id
    other = 0x5EED01 if me != 0x5EED01 else 0x5EED02
    lock_fd = os.open(shm / ddr.lock_name(other), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    for i in range(CROWD):
        os.close(os.open(shm / ddr.segment_name(other, ddr.FIRST_OFFSET + i * ddr.PAGE),
                         os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
    yield shm
    os.close(lock_fd)


CHILD_DIES = """
import os, signal
from vdsp_board.memory import ddr
segs = [ddr.Segment.create(4096) for i in range(3)]
print(ddr.current_owner().id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_reap_and_resolve_do_not_scan_a_crowded_directory(crowded, monkeypatch):
    shm = crowded
    me = ddr.current_owner().id
    calls = Calls(monkeypatch, ("listdir", "scandir", "stat", "lstat"))

    # reap: a quiet directory is listed once, then only the owners' locks are checked
    age_dir(shm)
    ddr.reap()
    assert listings(calls.take()) <= 1
    for _ in range(5):
        assert ddr.reap() == []
        counts = calls.take()
        assert listings(counts) == 0 and stats(counts) <= 10, counts

    # resolve: a handle at its buffer's base (the common case), hits, interior hits: no listing
    segs = [ddr.Segment.create(3 * ddr.PAGE) for _ in range(3)]
    resolver = Resolver()
    try:
        for seg in segs:
            assert len(resolver.resolve(seg.phys, 10)) == 10
        for seg in segs:
            assert len(resolver.resolve(seg.phys + ddr.PAGE + 5, 10)) == 10
        counts = calls.take()
        assert listings(counts) == 0 and stats(counts) <= 3 * len(segs), counts
    finally:
        resolver.close()

    # a miss at an interior address may list once; while the directory is unchanged, never again
    age_dir(shm)
    resolver = Resolver()
    try:
        for seg in segs:
            assert len(resolver.resolve(seg.phys + 100, 10)) == 10
        bogus = ddr.make_phys(me, 0xF0_0000_0123)
        for _ in range(5):
            with pytest.raises(UnknownHandle):
                resolver.resolve(bogus, 10)
        assert listings(calls.take()) <= 1
    finally:
        resolver.close()

    # reap of a directory that keeps changing: listings are rate-limited
    for _ in range(5):
        ddr.Segment.create(1).close()
        ddr.reap()
    assert listings(calls.take()) <= 2

    # ... and an owner killed with SIGKILL is still reclaimed within a couple of seconds
    env = dict(os.environ, VDSP_SHM_DIR=str(shm), PYTHONPATH=str(ROOT))
    child = subprocess.run([sys.executable, "-c", CHILD_DIES], env=env, cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert child.returncode == -9
    dead = f"vdsp-{int(child.stdout):06x}"
    assert len([n for n in os.listdir(shm) if n.startswith(dead)]) == 4
    calls.take()

    def left() -> list[str]:
        return [n for n in calls.real["listdir"](shm) if n.startswith(dead)]
    t0 = time.monotonic()
    while left() and time.monotonic() - t0 < 20:
        ddr.reap()
        time.sleep(0.1)
    assert not left()
    # a listing of 20,000 names costs ~10 ms of CPU: relisted at most once a second or so
    assert listings(calls.take()) <= 2 + (time.monotonic() - t0) / 0.5
    for seg in segs:
        seg.close()


MANY_MAPPINGS = """
import os, resource
from vdsp_board.memory import ddr
from arm_side.memory import MemoryManager
from dsp_side.ddr_resolver import Resolver

resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
me = ddr.current_owner().id
manager = MemoryManager()
mems = [manager.alloc(100) for _ in range(600)]                         # the client's mappings
regs = [manager.register(m.phys_addr + 10, 50) for m in mems[:300]]     # registered mappings
resolver = Resolver()                                                   # the DSP's mappings
views = [resolver.resolve(m.phys_addr, 100) for m in mems]
for i, (mem, view) in enumerate(zip(mems, views)):
    view[0] = i % 256
    assert mem.read(1) == bytes([i % 256])
assert resolver.cached_count() == 600
again = [resolver.resolve(m.phys_addr + 1, 99) for m in mems]
print("fds", len(os.listdir("/proc/self/fd")), flush=True)
"""


def test_more_mappings_than_open_files_allowed(shm):
    env = dict(os.environ, VDSP_SHM_DIR=str(shm), PYTHONPATH=str(ROOT))
    child = subprocess.run([sys.executable, "-c", MANY_MAPPINGS], env=env, cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-3000:]
    assert int(child.stdout.split()[-1]) < 64      # mappings keep no file descriptor
    assert [n for n in os.listdir(shm) if not n.endswith(".lock")] == []   # the child freed all at exit

"""Nothing another user can open or lock stops an allocation (issue 34, point 1).

The reserve check of an allocation (``vdsp_board.memory.ddr``) took a blocking ``flock(LOCK_EX)`` on the
DDR directory itself (``/dev/shm`` by default), which any user can open and lock:
``flock -x /dev/shm sleep 1e6`` run by uid 65534 made every ``soc.mem.alloc`` of every client
wait with no end. Now the lock is a mode-0600 file of the allocating user's own, and no wait on
the allocation path is without a deadline.

Each allocation runs in a child process (a fresh owner, as a client's first alloc) bounded by a
timeout, and reports how long its alloc took.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from tests import privilege
from vdsp_board.memory import ddr
from vdsp_sim import otheruser

ROOT = Path(__file__).resolve().parents[2]
ALLOC_BOUND_S = 2.0         # the bound for an alloc beside another user's lock
CHILD_TIMEOUT_S = 30        # today's code waited forever: the child is bounded, the test fails instead


def another_user() -> None:
    """Holding a lock as another user: root's nobody, or a subordinate uid (tests/privilege.py
    skips the test where neither exists, and fails it under VDSP_TEST_STRICT)."""
    privilege.require(otheruser.unavailable())

ALLOC = textwrap.dedent("""
    import time
    from arm_side.memory import MemoryManager

    def queued():       # seconds this thread waited for a CPU so far (runnable, not running)
        with open("/proc/thread-self/schedstat") as fh:
            return int(fh.read().split()[1]) / 1e9

    print("imported", flush=True)
    t0, q0 = time.monotonic(), queued()
    with MemoryManager() as mm:
        mem = mm.alloc(1 << 20)
        took, waited_for_cpu = time.monotonic() - t0, queued() - q0
        mem.write(b"allocated")
        assert bytes(mem.read(9)) == b"allocated"
    print(f"{took:.3f} {waited_for_cpu:.3f}", flush=True)
""")

# As another user: lock PATH (opened read-only, as `flock -x PATH` does; created first when CREATE),
# say so, then hold it until stdin closes.
FOREIGN_LOCK = textwrap.dedent("""
    import fcntl, os, sys
    from vdsp_sim.otheruser import become
    path, create = sys.argv[1], sys.argv[2] == "1"
    become()
    if create:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        os.chmod(path, 0o666)
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()
""")


@pytest.fixture
def shared_ddr():
    """A DDR directory like /dev/shm: world-writable and sticky, reachable by every user."""
    directory = Path(tempfile.mkdtemp(prefix="vdsp-ddrlock-", dir="/tmp"))
    directory.chmod(0o1777)
    try:
        yield directory
    finally:
        ddr.close_owner(str(directory))
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def foreign_lock(path: Path, create: bool = False):
    """Another user holds flock(LOCK_EX) on ``path`` while in the block."""
    proc = subprocess.Popen([sys.executable, "-c", FOREIGN_LOCK, str(path), "1" if create else "0"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/",
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held", "the foreign lock was not taken"
        yield proc
    finally:
        proc.kill()
        proc.communicate()


def alloc_took(directory: Path) -> tuple[float, float]:
    """Seconds a fresh client's first 1 MiB alloc in ``directory`` took (it writes and reads it back),
    less the time it waited for a CPU (a busy host's, not a lock's: /proc/thread-self/schedstat), and
    the whole wall time.
    The child's start (an interpreter importing numpy: slow on a loaded host) is not timed."""
    # unbuffered (bufsize=0): readline takes "imported" byte by byte, and leaves the timing line to
    # communicate() (a buffered readline could swallow both lines when the child is quick)
    proc = subprocess.Popen([sys.executable, "-c", ALLOC], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            bufsize=0, env=dict(os.environ, VDSP_SHM_DIR=str(directory), PYTHONPATH=str(ROOT)))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"imported", proc.communicate()
        t0 = time.monotonic()
        try:
            out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"an alloc did not return in {time.monotonic() - t0:.1f} s")
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == 0, err.decode(errors="replace")
    took, waited_for_cpu = map(float, out.decode().split())
    return took - waited_for_cpu, took


def ddr_files(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def test_another_users_lock_on_the_ddr_directory_does_not_stop_an_alloc(shared_ddr):
    """The reported attack: `flock -x /dev/shm sleep 1e6` as uid 65534."""
    another_user()
    with foreign_lock(shared_ddr):
        took, _ = alloc_took(shared_ddr)
    assert took <= ALLOC_BOUND_S, f"an alloc beside another user's lock on the DDR directory took {took:.2f} s"
    assert ddr_files(shared_ddr) == []      # the client exited: nothing left, the lock file included


def test_another_user_squatting_the_lock_name_does_not_stop_an_alloc(shared_ddr):
    """The lock's name is known; another user creates it first (readable by all) and locks it."""
    another_user()
    name = ddr.reserve_lock_name(os.geteuid())
    with foreign_lock(shared_ddr / name, create=True):
        took, _ = alloc_took(shared_ddr)
        assert took <= ALLOC_BOUND_S, f"an alloc beside a squatted lock file took {took:.2f} s"
        assert ddr_files(shared_ddr) == [name]      # theirs, untouched; ours all gone


def test_a_symlink_at_the_lock_name_is_not_followed(shared_ddr):
    victim = shared_ddr / "victim"
    victim.write_text("not a lock")
    victim.chmod(0o644)
    name = ddr.reserve_lock_name(os.geteuid())
    (shared_ddr / name).symlink_to(victim)
    took, _ = alloc_took(shared_ddr)
    assert took <= ALLOC_BOUND_S
    assert victim.read_text() == "not a lock" and (victim.stat().st_mode & 0o777) == 0o644


def test_a_lock_file_others_could_open_is_replaced_not_used(shared_ddr):
    """A lock file of ours that others may open (mode 0644: someone could hold it) is not trusted."""
    name = ddr.reserve_lock_name(os.geteuid())
    path = shared_ddr / name
    path.write_bytes(b"")
    path.chmod(0o644)
    with ddr._reserve_lock(str(shared_ddr)) as locked:
        assert locked
        st = os.lstat(path)
        assert st.st_uid == os.geteuid() and (st.st_mode & 0o777) == 0o600
    assert not path.exists()        # released: the lock file goes with its holder


def test_a_lock_held_by_a_stopped_process_of_ours_delays_an_alloc_by_a_deadline_only(shared_ddr):
    """A process of the same user stopped while it holds the lock: the others wait LOCK_WAIT_S, not forever."""
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import os, signal, sys
        from vdsp_board.memory import ddr
        with ddr._reserve_lock(sys.argv[1]) as locked:
            print("held" if locked else "not held", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
    """), str(shared_ddr)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        took, wall = alloc_took(shared_ddr)
        assert ddr.LOCK_WAIT_S <= wall and took <= ALLOC_BOUND_S, (took, wall)
    finally:
        holder.kill()
        holder.communicate()


def test_allocations_of_one_user_are_serialised_by_the_lock(shared_ddr):
    """While one process holds the user's reserve lock, another process of the user does not get it."""
    with ddr._reserve_lock(str(shared_ddr)) as locked:
        assert locked
        out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
            import sys
            from vdsp_board.memory import ddr
            ddr.LOCK_WAIT_S = 0.2
            with ddr._reserve_lock(sys.argv[1]) as locked:
                print(locked)
        """), str(shared_ddr)], cwd=ROOT, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
            env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert out.stdout.strip() == "False", out.stdout + out.stderr
    with ddr._reserve_lock(str(shared_ddr)) as locked:     # released: taken again at once
        assert locked

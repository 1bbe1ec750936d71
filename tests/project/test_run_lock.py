"""The run-wide lock of a parallel test run (tests/conftest.py, RunLock): an exclusive holder
runs alone, it waits for the shared holders of the moment, and shared holders that come while
it waits queue behind it (a busy run cannot starve it), even those that were waiting before it
came; a writer whose next test is exclusive too keeps it. Real processes, real lockf locks."""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

from tests.conftest import RunLock


def _hold(directory: str, exclusive: bool, hold_s: float, started, out) -> None:
    lock = RunLock(__import__("pathlib").Path(directory))
    started.set()
    with lock.hold(exclusive):
        t0 = time.monotonic()
        time.sleep(hold_s)
        out.put((exclusive, t0, time.monotonic()))


def _holds(directory: str, plan: list, started, go, out) -> None:
    """Holds in turn, as a worker's tests: (exclusive, hold_s, keep, then_s) each; the first
    hold lasts until ``go`` is set, and hold_s more."""
    lock = RunLock(Path(directory))
    started.set()
    for i, (exclusive, hold_s, keep, then_s) in enumerate(plan):
        lock.acquire(exclusive)
        t0 = time.monotonic()
        if i == 0:
            assert go.wait(120)
        time.sleep(hold_s)
        out.put((exclusive, t0, time.monotonic()))
        lock.release(keep=keep)
        time.sleep(then_s)
    lock.close()


def _locks(path: Path) -> tuple[int, int]:
    """(held, waited for): the POSIX locks on ``path`` that processes hold, and those they are
    blocked on (/proc/locks: "->" marks a blocked request)."""
    st = os.stat(path)
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino} "
    held = blocked = 0
    for line in Path("/proc/locks").read_text().splitlines():
        if inode in line:
            blocked += "->" in line
            held += "->" not in line
    return held, blocked


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + 120     # a loaded host starts processes slowly
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def _run(tmp_path, plans: list[tuple[list, object, str]]) -> list[tuple[bool, float, float]]:
    """Each plan in a process of its own, started in turn, the next once its condition holds;
    then the first one's first hold ends. The spans held, by start."""
    ctx = mp.get_context("spawn")
    out, go = ctx.Queue(), ctx.Event()
    procs = []
    try:
        for plan, condition, what in plans:
            started = ctx.Event()
            proc = ctx.Process(target=_holds, args=(str(tmp_path), plan, started, go, out))
            proc.start()
            procs.append(proc)
            assert started.wait(60)
            _until(condition, what)
    finally:
        go.set()
        for proc in procs:
            proc.join(60)
            if proc.is_alive():     # stuck on the lock: not left behind
                proc.kill()
                proc.join(10)
    assert [proc.exitcode for proc in procs] == [0] * len(procs)
    return sorted((out.get(timeout=5) for _ in range(sum(len(plan) for plan, _, _ in plans))), key=lambda s: s[1])


def test_a_reader_waiting_before_a_writer_came_still_runs_after_it(tmp_path):
    """A writer runs; a reader comes (it waits for the gate), then a second writer (it waits too).
    When the first ends, both waiters race for the gate: the reader may win it, but it goes on
    only after the declared writer."""
    gate = tmp_path / "gate"
    spans = _run(tmp_path, [([(True, 0, False, 0)], lambda: gate.exists() and _locks(gate)[0] == 1, "a writer holds it"),
                            ([(False, 0.2, False, 0)], lambda: _locks(gate)[1] == 1, "a reader waits for it"),
                            ([(True, 0.5, False, 0)], lambda: _locks(gate)[1] == 2, "a second writer waits too")])
    assert [exclusive for exclusive, _, _ in spans] == [True, True, False], spans
    assert spans[1][1] >= spans[0][2] and spans[2][1] >= spans[1][2], spans      # one after another


def test_a_writer_keeps_the_lock_for_its_next_exclusive_test(tmp_path):
    """Between two exclusive tests of one worker (0.5 s apart here) a waiting reader does not get in:
    it runs after both."""
    gate = tmp_path / "gate"
    spans = _run(tmp_path, [([(True, 0, True, 0.5), (True, 0.3, False, 0)],
                             lambda: gate.exists() and _locks(gate)[0] == 1, "a writer holds it"),
                            ([(False, 0.1, False, 0)], lambda: _locks(gate)[1] == 1, "a reader waits for it")])
    assert [exclusive for exclusive, _, _ in spans] == [True, True, False], spans
    assert spans[2][1] >= spans[1][2], spans


def test_an_exclusive_holder_runs_alone_and_is_not_starved(tmp_path):
    ctx = mp.get_context("spawn")     # not fork: pytest's process has threads (a warning on 3.12+)
    out = ctx.Queue()
    procs = []

    def start(exclusive: bool, hold_s: float) -> None:
        started = ctx.Event()
        proc = ctx.Process(target=_hold, args=(str(tmp_path), exclusive, hold_s, started, out))
        proc.start()
        assert started.wait(30)
        procs.append(proc)

    start(False, 1.0)           # a test running
    time.sleep(0.3)             # it holds the lock shared by now
    start(True, 0.5)            # an exclusive test: waits for it
    time.sleep(0.3)
    start(False, 0.2)           # a test that comes while the exclusive one waits: queues behind it
    start(False, 0.2)
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    spans = [out.get(timeout=5) for _ in procs]
    (_, x0, x1), = [s for s in spans if s[0]]
    shared = [(t0, t1) for exclusive, t0, t1 in spans if not exclusive]
    assert all(t1 <= x0 or t0 >= x1 for t0, t1 in shared), (x0, x1, shared)       # nobody beside it
    first = min(shared)
    assert first[1] <= x0                                   # it waited for the one running
    assert sum(t0 >= x1 for t0, _ in shared) == 2           # the later ones waited for it

"""The run-wide lock of a parallel test run (tests/conftest.py, RunLock): an exclusive holder
runs alone, it waits for the shared holders of the moment, and shared holders that come while
it waits queue behind it (a busy run cannot starve it), even those that were waiting before it
came; a writer whose next test is exclusive too keeps it. Real processes, real lockf locks."""
from __future__ import annotations

import multiprocessing as mp
import time

from tests.conftest import RunLock


def _hold(directory: str, exclusive: bool, hold_s: float, started, out) -> None:
    lock = RunLock(__import__("pathlib").Path(directory))
    started.set()
    with lock.hold(exclusive):
        t0 = time.monotonic()
        time.sleep(hold_s)
        out.put((exclusive, t0, time.monotonic()))


def _holds(directory: str, plan: list, started, out) -> None:
    """Holds in turn, as a worker's tests: (exclusive, hold_s, keep, then_s) each."""
    lock = RunLock(__import__("pathlib").Path(directory))
    started.set()
    for exclusive, hold_s, keep, then_s in plan:
        lock.acquire(exclusive)
        t0 = time.monotonic()
        time.sleep(hold_s)
        out.put((exclusive, t0, time.monotonic()))
        lock.release(keep=keep)
        time.sleep(then_s)
    lock.close()


def _run(tmp_path, plans: list[tuple[list, float]]) -> list[tuple[bool, float, float]]:
    """Each plan in a process of its own, started in turn (the next one the plan's seconds after
    this one's process has started); the spans held, by start."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = []
    for plan, after_s in plans:
        started = ctx.Event()
        proc = ctx.Process(target=_holds, args=(str(tmp_path), plan, started, out))
        proc.start()
        assert started.wait(30)
        procs.append(proc)
        time.sleep(after_s)
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    return sorted((out.get(timeout=5) for _ in range(sum(len(plan) for plan, _ in plans))), key=lambda s: s[1])


def test_a_reader_waiting_before_a_writer_came_still_runs_after_it(tmp_path):
    """A writer runs; a reader comes (it waits for the gate), then a second writer (it waits too).
    When the first ends, both waiters race for the gate: the reader may win it, but it goes on
    only after the declared writer."""
    spans = _run(tmp_path, [([(True, 2.5, False, 0)], 0.3),      # a writer holding it (while the others start)
                            ([(False, 0.2, False, 0)], 0.3),     # a reader: waits for it
                            ([(True, 0.5, False, 0)], 0)])       # a second writer: waits too
    assert [exclusive for exclusive, _, _ in spans] == [True, True, False], spans
    assert spans[1][1] >= spans[0][2] and spans[2][1] >= spans[1][2], spans      # one after another


def test_a_writer_keeps_the_lock_for_its_next_exclusive_test(tmp_path):
    """Between two exclusive tests of one worker (0.5 s apart here) a waiting reader does not get in:
    it runs after both."""
    spans = _run(tmp_path, [([(True, 2.0, True, 0.5), (True, 0.3, False, 0)], 0.3),
                            ([(False, 0.1, False, 0)], 0)])
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

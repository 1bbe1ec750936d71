"""The run-wide lock of a parallel test run (tests/conftest.py, RunLock): an exclusive holder
runs alone, it waits for the shared holders of the moment, and shared holders that come while
it waits queue behind it (a busy run cannot starve it). Real processes, real lockf locks."""
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

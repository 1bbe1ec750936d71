"""``--keep-cpus-awake`` for the benchmarks: one SCHED_IDLE spinner per CPU while measuring.

On a virtual machine an idle vCPU halts, and waking it takes longer the longer it
slept: a task's transport overhead then grows with how long the task runs (measured
here: 385 µs for a no-op, 610 µs around a 1 ms task, relay mode). SCHED_IDLE spinners
keep the vCPUs from halting (like booting with ``idle=poll``) and give way at once to
any real work, so the figures show the simulator's own costs. They burn every idle
CPU cycle while they run: a measurement aid, never something the product does.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys

_SPIN = ("import os, select, sys\n"
         "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
         "while not select.select([sys.stdin], [], [], 0)[0]:\n    pass\n")


@contextlib.contextmanager
def cpus_kept_awake(enabled: bool = True):
    """Run one idle-priority spinner per CPU inside the block (a no-op when not enabled)."""
    if not enabled:
        yield
        return
    procs = [subprocess.Popen([sys.executable, "-c", _SPIN], stdin=subprocess.PIPE)
             for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()   # the spinner sees EOF and exits
        for p in procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()

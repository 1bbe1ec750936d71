"""vdsp_sim.benchmarks.footprint: the idle-CPU measure of a process tree (what `vdsp bench perf`
reports for an idle SoC), on real processes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from vdsp_sim.benchmarks import footprint

PARENT = """
import subprocess, sys, time
SPIN = "import time\\nprint('started', flush=True)\\nend = time.time() + 60\\nwhile time.time() < end: pass"
spin = subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE)
idle = subprocess.Popen([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"],
                        stdout=subprocess.PIPE)
spin.stdout.readline(), idle.stdout.readline()   # both past their interpreter's start-up
print(spin.pid, idle.pid, flush=True)
time.sleep(60)
"""


def test_idle_cpu_charges_a_spinning_child_and_not_a_sleeping_one():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        # once both children are past their start-up (beside a CPU hog that takes seconds)
        spin, idle = (int(p) for p in parent.stdout.readline().split())
        got = footprint.idle_cpu(parent.pid, seconds=1.0)
        per = {int(k.rsplit("(", 1)[1].rstrip(")")): v for k, v in got["processes_ms_per_s"].items()}
        assert set(per) == {parent.pid, spin, idle}
        # a spinner gets some share of a CPU even beside a CPU hog (47 ms a second beside 24 busy
        # loops and three test workers on 2 CPUs); a sleeper uses next to none
        assert per[spin] > 10, per
        assert per[idle] < 2, per
        assert abs(got["total_ms_per_s"] - sum(per.values())) < 1e-6
    finally:
        for pid in footprint.tree(parent.pid)[::-1]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        parent.wait(10)

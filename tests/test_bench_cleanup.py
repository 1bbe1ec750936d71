"""A benchmark stopped by SIGTERM (``timeout``, ``kill``) still stops the SoC it started with
``vdsp up -d``: one killed ``bench perf`` left a whole SoC running for an hour."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import wait_until

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parent.parent


def supervisors() -> dict[int, str]:
    """pid -> runtime dir of every running 'vdsp up' supervisor of bench perf (its runtime dirs are /tmp/vbp*)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            if b"vdsp_sim.cli" not in cmd or b"up" not in cmd:
                continue
            env = dict(item.split(b"=", 1) for item in (entry / "environ").read_bytes().split(b"\0") if b"=" in item)
        except OSError:
            continue
        rt = env.get(b"VDSP_RUNTIME_DIR", b"").decode()
        if Path(rt).name.startswith("vbp"):
            found[int(entry.name)] = rt
    return found


@pytest.mark.parametrize("via", ["vdsp bench", "python -m"])
def test_a_terminated_benchmark_stops_the_soc_it_started(via):
    before = supervisors()
    ddr_before = set(Path("/dev/shm").glob("vbp-shm-*"))
    argv = [sys.executable, "-m", "vdsp_sim.cli", "bench", "perf", "--first-only"] if via == "vdsp bench" else \
        [sys.executable, "-m", "vdsp_sim.benchmarks", "perf", "--first-only"]
    bench = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in bench.stderr:               # its progress lines; the SoC is up after this one
            if "vdsp up -d returned" in line:
                break
        else:
            pytest.fail(f"the benchmark ended before its SoC was up (status {bench.wait()})")
        started = {pid: rt for pid, rt in supervisors().items() if pid not in before}
        assert started, "no supervisor of the benchmark's SoC found"
        bench.send_signal(signal.SIGTERM)
        bench.stderr.read()
        # it ends as a SIGTERMed program that cleaned up (128 + 15), not killed outright (-15); through
        # 'vdsp bench' the signal goes on to the benchmark, which the command waits for
        assert bench.wait(60) == 143, bench.returncode
        assert wait_until(lambda: not set(started) & set(supervisors()), 20), \
            f"the benchmark's SoC still runs after SIGTERM: {started}"
        assert not [rt for rt in started.values() if rt and os.path.exists(rt)], started
        assert set(Path("/dev/shm").glob("vbp-shm-*")) <= ddr_before        # its DDR directory went too
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        for pid in set(supervisors()) - set(before):    # whatever the test failed on, stop it
            os.kill(pid, signal.SIGTERM)
        time.sleep(0.1)

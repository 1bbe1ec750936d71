"""``vdsp top`` against a relay over tcp (CURVE keys), as a user runs it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from arm_side import CORE_0, CORE_1, Soc, opids
from tests.integration.test_live_curve import ROOT, running_tcp_soc

pytestmark = pytest.mark.live


def test_vdsp_top_over_tcp_shows_the_cores_operators_and_this_client():
    with running_tcp_soc() as soc:
        with Soc(autostart_relay=False) as client:
            for _ in range(20):
                client.rpc(opids.PING, core=CORE_0).wait(5000)
                client.rpc(opids.PING, core=CORE_1).wait(5000)
            env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="120")
            out = subprocess.run([sys.executable, "-m", "vdsp_sim.cli", "top", "--once", "-n", "0.3"], env=env,
                                 capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        lines = {line.split()[0]: line for line in out.stdout.splitlines() if line.split()}
        assert soc.relay in out.stdout
        assert "running" in lines["vdsp0"] and "running" in lines["vdsp1"]
        assert lines["0x0000"].split()[1:3] == ["ping", "40"]
        assert f"pid{os.getpid()}" in lines

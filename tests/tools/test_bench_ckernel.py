"""`vdsp bench ckernel`, the benchmark of issue 41's "How fast", runs as the README names it: both
presets' stages timed beside their references with bit-exact outputs, and the emulation's cost
of every intrinsic the stock kernels use (ivp_bench.c compiles with the kernels' warnings)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dsp_side import ckernel
from vdsp_sim import ctoolchain


@pytest.mark.skipif(bool(ctoolchain.missing()), reason="no C compiler")
def test_the_c_kernel_benchmark_reports_each_stage_beside_its_reference(tmp_path):
    out = tmp_path / "ckernel.json"
    run = subprocess.run([sys.executable, "-m", "vdsp_sim.cli", "bench", "ckernel", "--rounds", "1", "--calls", "1000",
                          "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    fig = json.loads(out.read_text())
    stages = fig["details"]["stages"]
    assert set(stages) == {"centerpoint", "pointpillars"}
    for name, r in stages.items():
        assert r["bit_exact"] is True, name
        assert all(r[f"stage{s}_{impl}_ms"] > 0 for s in (1, 2) for impl in ("python", "c")), r
    assert [v["name"] for v in fig["verdicts"]] == [f"{n} stage {s} C / {ref}" for n in ("centerpoint", "pointpillars")
                                                   for s, ref in ((1, "numba"), (2, "OpenCV"))]
    costs = fig["details"]["ns_per_call"]
    for intrinsic in ("IVP_GATHERAN_2X32+IVP_GATHERDN_2X32", "IVP_SELN_2X32I", "IVP_DSELN_2X32I", "IVP_SA2NX8_IP"):
        assert costs[intrinsic] >= 0, costs
    assert "C / ref" in run.stdout and "ns per call" in run.stdout


@pytest.mark.skipif(bool(ctoolchain.missing()) or not ckernel.x86_64(), reason="no C compiler, or not x86-64")
def test_the_benchmark_runs_the_build_of_the_level_named(tmp_path):
    """`VDSP_KERNEL_LEVEL=x86-64 vdsp bench ckernel`: the baseline build's figures on any x86-64 host,
    said in its report."""
    out = tmp_path / "ckernel.json"
    env = {**os.environ, "VDSP_KERNEL_LEVEL": "x86-64"}
    run = subprocess.run([sys.executable, "-m", "vdsp_sim.cli", "bench", "ckernel", "--rounds", "1", "--calls", "1000",
                          "--json", str(out)], capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr
    fig = json.loads(out.read_text())
    assert fig["details"]["level"] == "x86-64" and "the C kernels built for x86-64 (this CPU runs" in run.stdout
    assert all(r["bit_exact"] for r in fig["details"]["stages"].values())

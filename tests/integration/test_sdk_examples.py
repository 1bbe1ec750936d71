"""examples/opencv_style.py and examples/j5_style_hb.py run as documented against a live SoC
(each compares its DSP results with cv2 itself and exits 1 on a difference)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.live


def run_example(name: str) -> str:
    res = subprocess.run([sys.executable, f"examples/{name}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def test_opencv_style_example(shared_soc):
    out = run_example("opencv_style.py")
    assert out.count("same as cv2") == 6 and "DIFFER" not in out
    assert "pooled shared buffers" in out and "ticked" in out


def test_j5_style_hb_example(shared_soc):
    out = run_example("j5_style_hb.py")
    assert "gaussianBlur ran on vdsp1" in out and "same as cv2.GaussianBlur" in out
    assert "hbSysFlushMem(dst, 7) = -6000129: HB_SYS_INVALID_ARGUMENT" in out

"""``vdsp sample nn`` takes several names like ``vdsp sample cv``, each with its options, and sums up."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vdsp_sim.samples import nn

VDSP = [sys.executable, "-m", "vdsp_sim.cli"]


def test_names_split_with_their_options():
    assert nn.split_runs(["quantize", "dequantize"]) == [("quantize", []), ("dequantize", [])]
    assert nn.split_runs(["layout", "--platform", "RK3588", "yolov3", "--batch=2", "softmax"]) == \
        [("layout", ["--platform", "RK3588"]), ("yolov3", ["--batch=2"]), ("softmax", [])]
    assert nn.split_runs(["centerpoint", "--output", "quantize"]) == [("centerpoint", ["--output", "quantize"])]
    assert "unknown sample 'yolo'" in nn.split_runs(["quantize", "yolo"])
    assert "before any sample name" in nn.split_runs(["--batch", "2"])


def test_unknown_name_is_refused_with_the_list(capsys):
    assert nn.main(["quantize", "yolo"]) == 2
    err = capsys.readouterr().err
    assert "unknown sample 'yolo'" in err and "yolov3" in err


def test_help_explains_the_rockchip_platform_names():
    res = subprocess.run(VDSP + ["sample", "nn", "layout", "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "usage: vdsp sample nn layout" in res.stdout
    text = " ".join(res.stdout.split())
    assert "Rockchip RKNPU's native layout" in text and "J5 BPU has no C2 table" in text
    assert "(default: RK3568)" in text


@pytest.mark.live
def test_several_names_run_in_turn_and_sum_up(shared_soc, tmp_path):
    res = subprocess.run(VDSP + ["sample", "nn", "quantize", "dequantize", "layout", "--platform", "RK3588"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env=dict(os.environ, VDSP_RUNTIME_DIR=str(shared_soc.rt)))
    assert res.returncode == 0, res.stderr
    for name in ("quantize", "dequantize", "layout"):
        assert f"summary: {name} passed" in res.stderr
    assert "summary: 3 of 3 NN samples passed" in res.stderr
    assert "platform RK3588" in res.stderr and "C2 = 16" in res.stderr

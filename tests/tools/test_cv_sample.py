"""``vdsp sample cv``: help, deterministic inputs, and a full run against the live SoC."""
from __future__ import annotations

import hashlib

import cv2
import numpy as np
import pytest

from vdsp_sim.samples import cv as sample
from vdsp_sim.samples import cv_inputs


def test_help_lists_every_operator(capsys):
    assert sample.main(["help"]) == 0
    out = capsys.readouterr().out
    for name in ("bilateralFilter", "cvtColor", "roiResize", "cornerHarris", "remap"):
        assert name in out
    assert len(sample.SAMPLES) == 25


def test_unknown_operator_is_refused(capsys):
    assert sample.main(["blurr"]) == 2
    assert "unknown operator" in capsys.readouterr().out


def test_inputs_are_deterministic_and_natural(tmp_path):
    a, b = cv_inputs.write_data(tmp_path / "a"), cv_inputs.write_data(tmp_path / "b")
    for name in a:
        assert hashlib.sha256(a[name].read_bytes()).digest() == hashlib.sha256(b[name].read_bytes()).digest(), name
    img = cv2.imread(str(a["input.jpg"]))
    assert img.shape == (480, 500, 3)
    gray = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    assert gray.std() > 30                                   # contrast
    assert (cv2.Canny(gray, 60, 160) > 0).mean() > 0.01      # edges
    assert len(np.unique(gray)) > 150                        # gradients and texture, not flat fills
    assert (tmp_path / "a" / "500x480.yuv").stat().st_size == 500 * 480 * 3 // 2
    assert cv2.imread(str(a["CornersR.pgm"]), cv2.IMREAD_UNCHANGED).shape == (128, 128)


@pytest.mark.live
def test_sample_runs_every_operator(shared_soc, tmp_path, monkeypatch, capsys):
    import logging
    monkeypatch.chdir(tmp_path)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        assert sample.main([]) == 0        # logs to this test's stderr (glog style)
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    text = capsys.readouterr().err
    for phrase in ("gaussianBlur begin", "read image data/input.jpg success", "rpc begin", "rpc finish",
                   "write output success", "gaussianBlur finish", "cvtColor RGB to Gray begin",
                   "crop roi left: 200, top: 200, right: 359, bottom: 419"):
        assert phrase in text, phrase
    assert "differs from OpenCV" not in text
    sheet = cv2.imread(str(tmp_path / "output" / "cv_contact_sheet.png"))
    assert sheet is not None and sheet.shape[0] > 1000
    for name in ("gaussianBlur.png", "cvtColor_RGB2NV12.yuv", "resize.yuv", "cornerHarris.npy", "remap.png"):
        assert (tmp_path / "output" / name).exists(), name

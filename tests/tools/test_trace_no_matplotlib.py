"""``vdsp trace --png`` where matplotlib cannot be imported: it fails at once (non-zero exit,
before tracing or running the command) and says how to install it; it never claims a picture
it did not draw."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

VDSP = [sys.executable, "-m", "vdsp_sim.cli"]


@pytest.fixture
def no_matplotlib(tmp_path):
    """An environment whose Python cannot import matplotlib (a package of that name that refuses),
    and a private runtime dir."""
    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'matplotlib'\")\n")
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VDSP_")}
    env.update(PYTHONPATH=os.pathsep.join([str(shadow.parent), *filter(None, [env.get("PYTHONPATH")])]),
               VDSP_RUNTIME_DIR=str(rt))
    return env, tmp_path


def check_refusal(res: subprocess.CompletedProcess) -> None:
    assert res.returncode != 0, res
    assert "matplotlib" in res.stderr and "pip install 'vdsp-sim[plot]'" in res.stderr, res.stderr
    assert ".venv/bin/pip install matplotlib" in res.stderr, res.stderr
    assert "drawn" not in res.stdout + res.stderr


def test_png_of_a_saved_trace(no_matplotlib):
    env, tmp = no_matplotlib
    src = tmp / "t.json"
    src.write_text(json.dumps({"traceEvents": [], "displayTimeUnit": "ms",
                               "otherData": {"processes": [], "tasks": 0, "base_unix_ns": 0}}))
    res = subprocess.run([*VDSP, "trace", "--from", str(src), "--png", str(tmp / "y.png")], env=env,
                         capture_output=True, text=True, timeout=60)
    check_refusal(res)
    assert not (tmp / "y.png").exists()


def test_png_around_a_command_refuses_before_running_it(no_matplotlib):
    env, tmp = no_matplotlib
    marker = tmp / "ran"
    res = subprocess.run([*VDSP, "trace", "-o", str(tmp / "t.json"), "--png", "--", "touch", str(marker)], env=env,
                         capture_output=True, text=True, timeout=60)
    check_refusal(res)
    assert not marker.exists(), "the command ran although the picture could not be drawn"
    assert not (tmp / "t.json").exists() and not (tmp / "t.png").exists()
    assert not list((tmp / "rt").rglob("active")), "tracing was left on"

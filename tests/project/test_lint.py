"""ruff and mypy, run by the README's test command: ruff with the committed configuration
(pyproject.toml, [tool.ruff]) over the sources, mypy at default settings over the five
packages (pyproject.toml, [tool.mypy]; no module is exempt)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["arm_side", "dsp_side", "relay_server", "protocol", "vdsp_board", "vdsp_sim"]
SOURCES = PACKAGES + ["tests", "examples", "scripts"]


def run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean():
    res = run(["ruff", "check", "--no-cache", "--output-format", "concise", *SOURCES])
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_is_clean_over_the_packages():
    res = run(["mypy", *PACKAGES])
    assert res.returncode == 0 and "Success: no issues found" in res.stdout, res.stdout + res.stderr

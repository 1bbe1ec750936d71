"""ruff and mypy, run by the README's test command: ruff with the committed configuration
(pyproject.toml, [tool.ruff]) over the sources, mypy at default settings over the six
packages (pyproject.toml, [tool.mypy]; no module is exempt), run once per test run: tests/mypy_run.py."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import mypy_run
from tests.mypy_run import PACKAGES

ROOT = Path(__file__).resolve().parents[2]
SOURCES = PACKAGES + ["tests", "examples", "scripts"]


def run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean():
    res = run(["ruff", "check", "--no-cache", "--output-format", "concise", *SOURCES])
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_is_clean_over_the_packages():
    res = mypy_run.packages()       # this run's one run of ``mypy <PACKAGES>`` (others start from its cache)
    assert res.returncode == 0 and "Success: no issues found" in res.stdout, res.stdout + res.stderr

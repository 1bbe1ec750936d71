"""ONNX Runtime (the BPU part of hbDNN models) runs with its telemetry off unless the user says
otherwise: onnxruntime >= 1.29 on Linux writes a session file into $TMPDIR and a database under
~/.cache/Microsoft/DeveloperTools at import, and uploads usage events. A simulator run in CI,
in containers and in labs without internet must neither call out nor leave those files."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# "import onnxruntime", "import os, onnxruntime as ort", "from onnxruntime import ..." (indented too)
DIRECT_IMPORT = re.compile(r"\s*(from\s+onnxruntime\b|import\s+([\w.]+(\s+as\s+\w+)?\s*,\s*)*onnxruntime\b)")

# what a user of the SDK runs: the hbDNN runtime imported, a model's BPU graph run on onnxruntime
PROGRAM = """
import os, sys
import numpy as np
from arm_side import dnn
from arm_side.dnn import bpu
import onnxruntime
print("ORT_DISABLE_TELEMETRY=" + os.environ.get("ORT_DISABLE_TELEMETRY", "<unset>"))
"""


def _run(tmp_path: Path, extra: dict | None = None) -> tuple[subprocess.CompletedProcess, Path, Path]:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORT_")}
    env.update(HOME=str(home), TMPDIR=str(tmp), XDG_CACHE_HOME=str(home / ".cache"), **(extra or {}))
    proc = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, home, tmp


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_the_sdk_imports_onnxruntime_with_its_telemetry_off(tmp_path):
    proc, home, tmp = _run(tmp_path)
    assert "ORT_DISABLE_TELEMETRY=1" in proc.stdout
    assert _files(tmp) == [], "onnxruntime wrote its telemetry session file"
    assert _files(home) == [], "onnxruntime wrote its telemetry database"


def test_a_users_own_choice_stands(tmp_path):
    proc, home, _ = _run(tmp_path, {"ORT_DISABLE_TELEMETRY": "0"})
    assert "ORT_DISABLE_TELEMETRY=0" in proc.stdout


def test_every_import_of_onnxruntime_goes_through_the_one_module():
    """The setting must come before onnxruntime's first import, whichever module imports it first."""
    offenders = []
    for package in ("arm_side", "dsp_side", "relay_server", "protocol", "vdsp_board", "vdsp_sim", "tests"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name in ("ortload.py", Path(__file__).name):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if DIRECT_IMPORT.match(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == [], "import onnxruntime through arm_side.dnn.ortload:\n" + "\n".join(offenders)

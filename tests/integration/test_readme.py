"""The README's "A first task in Python" runs as printed: its shell steps in a fresh runtime
directory (``vdsp up -d``, the example with the venv's Python, ``vdsp down``), and the example
it shows is the file those steps run. Without ``vdsp up -d`` the example fails saying so and
starts nothing."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import shutil
from pathlib import Path

import pytest

from vdsp_board.processes.pidfile import alive
from tests.conftest import wait_until
from tests.live import shm_entries
from vdsp_sim.soc.private_soc import fresh_ddr_dir, fresh_runtime_dir

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def section() -> str:
    text = README.read_text()
    return text[text.index("## A first task in Python"):text.index("\n## ", text.index("## A first task in Python") + 5)]


def shell_steps() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", section(), re.S)[1]
    return [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]


def as_printed(command: str) -> list[str]:
    """The command's argv; ``.venv/bin/`` is this interpreter's bin directory when the tests do
    not run from the checkout's .venv (then the two are the same install only by name)."""
    argv = shlex.split(command)
    venv_bin = ROOT / ".venv" / "bin"
    if argv[0].startswith(".venv/bin/") and Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        argv[0] = str(Path(sys.executable).parent / argv[0][len(".venv/bin/"):])
    elif argv[0].startswith(".venv/bin/"):
        assert (venv_bin / argv[0][len(".venv/bin/"):]).exists(), argv[0]
    return argv


@pytest.fixture
def fresh_env(monkeypatch):
    """A private runtime dir and DDR dir (the tests look for leaks there: in /dev/shm itself other
    tests' SoCs come and go meanwhile), and none of the variables a fixture SoC would set."""
    rt, shm = fresh_runtime_dir("vr"), fresh_ddr_dir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VDSP_")}
    env.update(VDSP_RUNTIME_DIR=str(rt), VDSP_SHM_DIR=str(shm))
    monkeypatch.setenv("VDSP_SHM_DIR", str(shm))       # where shm_entries() looks
    yield rt, env
    shutil.rmtree(rt, ignore_errors=True)
    shutil.rmtree(shm, ignore_errors=True)


def test_the_shown_example_is_the_file_the_steps_run():
    block = re.search(r"```python\n(.*?)```", section(), re.S)[1]
    assert shell_steps() == [".venv/bin/vdsp up -d", ".venv/bin/python examples/first_task.py",
                             ".venv/bin/vdsp down"]
    assert (ROOT / "examples" / "first_task.py").read_text() == block


def test_the_readme_steps_run_as_printed(fresh_env):
    rt, env = fresh_env
    before = shm_entries()
    outputs, soc_pid = [], None
    try:
        for command in shell_steps():
            res = subprocess.run(as_printed(command), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, (command, res.stdout, res.stderr)
            outputs.append(res.stdout)
            if soc_pid is None and (rt / "soc.pid").exists():
                soc_pid = int((rt / "soc.pid").read_text().split()[0])
    finally:
        subprocess.run(as_printed(".venv/bin/vdsp down"), cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert "SoC up in" in outputs[0]
    values, core = outputs[1].strip().rsplit(" ", 1)
    assert values == "{'bytes': 1048576}" and core in ("vdsp0", "vdsp1")
    assert "stopped soc" in outputs[2]
    assert soc_pid and not alive(soc_pid)
    assert not list(rt.glob("*.sock")) and not (rt / "relay.pid").exists()
    assert wait_until(lambda: not (shm_entries() - before), 5), shm_entries() - before


def test_without_vdsp_up_the_example_says_what_to_run_and_starts_nothing(fresh_env):
    rt, env = fresh_env
    res = subprocess.run(as_printed(".venv/bin/python examples/first_task.py"), cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert "RelayUnavailable" in res.stderr and "vdsp up -d" in res.stderr
    assert not (rt / "relay.pid").exists() and not list(rt.glob("*.sock"))

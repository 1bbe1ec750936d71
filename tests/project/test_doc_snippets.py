"""The docs as a new user types them, from the repository root after the README's set-up:

- every ```python block of README.md, PROTOCOL.md and docs/*.md runs as printed (fed to the
  venv's Python from the repository root, as pasting it into ``.venv/bin/python`` does) against
  a SoC started with ``vdsp up -d`` in a private runtime and DDR directory, which is stopped
  afterwards with nothing left behind, and no block leaves a file in the checkout that git
  would see;
- no shell block (```bash, ```sh, ```console) calls a bare ``vdsp``, ``python``, ``pip`` or
  ``dsp_relay_server``, which a fresh shell does not have: the docs call them ``.venv/bin/…``,
  and every such program exists there.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vdsp_board.processes.pidfile import alive
from vdsp_sim.soc.private_soc import ddr_names, fresh_ddr_dir, fresh_runtime_dir

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "PROTOCOL.md", ROOT / "vdsp_sim" / "benchmarks" / "README.md",
        *sorted((ROOT / "docs").glob("*.md"))]
SHELL = ("bash", "sh", "shell", "console")
BARE = {"vdsp", "python", "python3", "pip", "pip3", "dsp_relay_server"}
# commands whose arguments run elsewhere (in a container or pod), where vdsp is on PATH
ELSEWHERE = {"docker", "podman", "kubectl"}
FENCE = re.compile(r"^( *)```(\w*)[^\n]*\n(.*?)^\1```[ \t]*$", re.M | re.S)


def blocks(langs: tuple[str, ...]) -> list[tuple[str, str]]:
    """(``file:line``, dedented body) of every fenced block in one of ``langs``."""
    out = []
    for path in DOCS:
        text = path.read_text()
        for m in FENCE.finditer(text):
            if m[2] in langs:
                indent = len(m[1])
                body = "\n".join(line[indent:] for line in m[3].splitlines())
                out.append((f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}", body + "\n"))
    return out


def venv_bin() -> Path:
    """The bin directory of the venv the tests run in when it is one of this checkout's (``.venv``,
    or ``.venv-X.Y`` under ``PYTHON=pythonX.Y ./test.sh``), else the checkout's .venv/bin if there
    is one, else this interpreter's."""
    if Path(sys.prefix).resolve().parent == ROOT.resolve() or not (ROOT / ".venv" / "bin").is_dir():
        return Path(sys.executable).parent
    return ROOT / ".venv" / "bin"


# --- shell blocks --------------------------------------------------------------------------------

def commands(block: str, lang: str) -> list[list[str]]:
    """The simple commands of a shell block: each line (``$ `` lines of a console block), split
    at ``;``, ``&&``, ``||``, ``|`` and ``$(``, comments and leading ``VAR=value`` dropped."""
    out = []
    for line in block.splitlines():
        if lang == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split("#")[0].split()
        segment: list[str] = []
        for word in [*words, ";"]:
            if word in (";", "&&", "||", "|") or word.startswith("$("):
                if segment:
                    out.append(segment)
                segment = [word[2:]] if word.startswith("$(") and len(word) > 2 else []
            elif segment or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word):
                segment.append(word)
    return out


def programs(cmd: list[str]) -> list[str]:
    """The programs a command runs: its first word, and the command after ``--`` of
    ``vdsp trace`` (which runs it from PATH); none for commands run in a container."""
    if not cmd or Path(cmd[0]).name in ELSEWHERE:
        return []
    progs = [cmd[0]]
    if Path(cmd[0]).name == "vdsp" and cmd[1:2] == ["trace"] and "--" in cmd:
        progs += cmd[cmd.index("--") + 1:][:1]
    return progs


SHELL_BLOCKS = [(where, lang, body) for lang in SHELL for where, body in blocks((lang,))]


def test_there_are_shell_blocks_to_check():
    assert len(SHELL_BLOCKS) >= 15
    assert any(cmd[:1] == [".venv/bin/vdsp"] for _, lang, body in SHELL_BLOCKS for cmd in commands(body, lang))


@pytest.mark.parametrize("where,lang,body", SHELL_BLOCKS, ids=[w for w, _, _ in SHELL_BLOCKS])
def test_shell_lines_work_in_a_fresh_shell(where, lang, body):
    """A fresh shell has no venv on PATH: the docs say ``.venv/bin/vdsp``, never ``vdsp``."""
    for cmd in commands(body, lang):
        for prog in programs(cmd):
            assert prog not in BARE, f"{where}: bare {prog!r} in {' '.join(cmd)!r}: write .venv/bin/{prog}"
            if prog.startswith(".venv/bin/"):
                assert (venv_bin() / prog[len(".venv/bin/"):]).exists(), f"{where}: no {prog} in the venv"


def test_the_command_splitter_sees_bare_commands():
    """The check above can fail: bare commands anywhere in a line are found."""
    found = [p for cmd in commands("A=1 vdsp up -d && python x.py | vdsp trace -o t -- python y.py  # vdsp\n"
                                   "docker compose run --rm sample vdsp sample smoke\n", "bash")
             for p in programs(cmd)]
    assert found == ["vdsp", "python", "vdsp", "python"]
    assert [p for cmd in commands("$ vdsp dmesg | tail -3\nvdsp0\n", "console") for p in programs(cmd)] == \
        ["vdsp", "tail"]


# --- python blocks --------------------------------------------------------------------------------

PY_BLOCKS = blocks(("python",))


def git_visible() -> set[str]:
    """Files git would show as new or changed in the checkout (ignored ones are not)."""
    res = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                         capture_output=True, text=True)
    return set(res.stdout.splitlines()) if res.returncode == 0 else set()


@pytest.fixture(scope="module")
def soc_env():
    """``vdsp up -d`` in private runtime and DDR directories, with the environment a fresh shell
    would have (none of this test process's VDSP_ variables); stopped and checked at the end."""
    rt, shm = fresh_runtime_dir(), fresh_ddr_dir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VDSP_", "HB_DNN_"))}
    env.update(VDSP_RUNTIME_DIR=str(rt), VDSP_SHM_DIR=str(shm))
    vdsp = str(venv_bin() / "vdsp")
    before = git_visible()
    up = subprocess.run([vdsp, "up", "-d"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    soc_pid = int((rt / "soc.pid").read_text().split()[0]) if (rt / "soc.pid").exists() else None
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield env
    finally:
        down = subprocess.run([vdsp, "down"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        left_files = sorted(ddr_names(shm)) if shm.exists() else []
        left_socks = sorted(p.name for p in rt.rglob("*.sock")) if rt.exists() else []
        shutil.rmtree(rt, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)
    assert down.returncode == 0, down.stdout + down.stderr
    assert soc_pid is None or not alive(soc_pid), f"the SoC (pid {soc_pid}) is still running"
    assert not left_files, f"DDR files left: {left_files}"
    assert not left_socks, f"socket files left: {left_socks}"
    assert git_visible() == before, f"the snippets left files in the checkout: {git_visible() - before}"


def test_there_are_python_blocks_to_run():
    files = {where.split(":")[0] for where, _ in PY_BLOCKS}
    assert {"README.md", "docs/cv.md", "docs/nn.md", "docs/dnn.md", "docs/hb.md", "docs/pointcloud.md"} <= files


@pytest.mark.live
@pytest.mark.parametrize("where,code", PY_BLOCKS, ids=[w for w, _ in PY_BLOCKS])
def test_python_block_runs_as_printed(soc_env, where, code):
    res = subprocess.run([str(venv_bin() / "python"), "-"], input=code, cwd=ROOT, env=soc_env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"{where} failed:\n{code}\n--- stdout\n{res.stdout}\n--- stderr\n{res.stderr[-4000:]}"
    for comment in re.findall(r"print\(.*\)\s+#\s*(True|False)\s*$", code, re.M):   # a printed verdict
        assert res.stdout.split() and comment in res.stdout.split(), (where, res.stdout)

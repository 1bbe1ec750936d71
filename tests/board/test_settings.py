"""Every ``VDSP_*`` variable is declared once (vdsp_board/config/settings.py) and read there only;
nothing writes ``os.environ`` but its one writer; the README's table is the declarations'; a
value is read when a process asks for it."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from vdsp_board.config import settings

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("arm_side", "dsp_side", "relay_server", "protocol", "vdsp_board", "vdsp_sim")
SETTINGS = ROOT / "vdsp_board" / "config" / "settings.py"
# the compiled build's import hook reads VDSP_NATIVE itself: it runs when the interpreter starts,
# before any package (vdsp_board included) is imported
NATIVE = ROOT / "vdsp_sim" / "native_finder.py"
_WRITERS = {"update", "pop", "setdefault", "clear", "popitem", "__setitem__", "__delitem__"}


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` / ``environ`` (from os import environ)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or \
        (isinstance(node, ast.Name) and node.id == "environ")


def env_uses(source: str, path: str = "<src>") -> tuple[list[str], list[str]]:
    """(reads of a VDSP_* variable from the process environment, writes to the environment)."""
    tree = ast.parse(source, path)
    consts = {t.id: n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
              and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
              for t in n.targets if isinstance(t, ast.Name)}

    def names_vdsp(node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.startswith("VDSP_"):
                return True
            if isinstance(sub, ast.Name) and consts.get(sub.id, "").startswith("VDSP_"):
                return True
            if isinstance(sub, ast.keyword) and (sub.arg or "").startswith("VDSP_"):
                return True
        return False

    reads, writes = [], []
    for node in ast.walk(tree):
        where = f"{path}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("getenv", "putenv", "unsetenv"):
                (writes if func.attr != "getenv" else reads).append(where)
                continue
            if isinstance(func, ast.Attribute) and _is_environ(func.value):
                if func.attr in _WRITERS:
                    writes.append(where)
                elif names_vdsp(node):
                    reads.append(where)
            elif any(_is_environ(a) for a in node.args) and names_vdsp(node):
                reads.append(where)     # dict(os.environ, VDSP_X=...), {**os.environ ...}
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                writes.append(where)
            elif names_vdsp(node):
                reads.append(where)
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators) and names_vdsp(node):
            reads.append(where)         # "VDSP_X" in os.environ
    return reads, writes


def sources():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path not in (SETTINGS, NATIVE):
                yield path


def test_no_module_but_settings_reads_or_writes_vdsp_variables():
    reads, writes = [], []
    for path in sources():
        text = path.read_text()
        if not any(word in text for word in ("environ", "getenv", "putenv", "unsetenv")):
            continue        # env_uses finds nothing in a file that names none of them: not parsed
        r, w = env_uses(text, str(path.relative_to(ROOT)))
        reads += r
        writes += w
    assert reads == [], "read VDSP_* through vdsp_board.config.settings:\n" + "\n".join(reads)
    assert writes == [], "children get env= dicts (settings.child_env); nothing writes os.environ:\n" + "\n".join(writes)


def test_the_scan_finds_what_it_looks_for():
    bad = '''
import os
from os import environ
QUOTA = "VDSP_DDR_QUOTA"
a = os.environ.get("VDSP_RUNTIME_DIR")
b = os.environ[QUOTA]
c = os.getenv("HOME")
d = dict(os.environ, VDSP_RUNTIME_DIR="x")
e = "VDSP_SHM_DIR" in environ
os.environ["VDSP_RUNTIME_DIR"] = "x"
os.environ.pop("VDSP_PARENT_PID", "")
os.environ.setdefault("HB_DNN_ENABLE_DSP", "1")
del os.environ["X"]
f = os.environ.get("HOME")
'''
    reads, writes = env_uses(bad)
    assert [int(r.split(":")[1]) for r in reads] == [5, 6, 7, 8, 9]
    assert [int(w.split(":")[1]) for w in writes] == [10, 11, 12, 13]


#: variables the README names that only a script or a build file reads
NOT_THE_PACKAGES = {"VDSP_TEST_WORKERS": "test.sh", "VDSP_TEST_STRICT": ".ci/run", "VDSP_BASE_IMAGE": "docker-compose.yml",
                    "VDSP_BUILD_NETWORK": "docker-compose.yml"}

#: the C kernel SDK's macros (docs/dsp_kernels.md names them) and the C library's native side's
#: (its sources, and the header vdsp_sim/capi_native.py generates): C names, not variables
C_SDK_MACROS = {m for h in [*(ROOT / "dsp_side" / "ckernel" / "include").rglob("*.h"),
                            *(ROOT / "arm_side" / "capi" / "native").glob("*.[ch]"), ROOT / "vdsp_sim" / "capi_native.py"]
                for m in re.findall(r"#define (VDSP_\w+)", h.read_text())}


def test_every_vdsp_name_in_the_code_and_docs_is_declared():
    text = "\n".join(p.read_text() for p in [*sources(), ROOT / "README.md", ROOT / "PROTOCOL.md",
                                             *(ROOT / "docs").glob("*.md")])
    used = set(re.findall(r"\bVDSP_[A-Z0-9_]*[A-Z0-9]\b", text))
    assert used - set(settings.VARIABLES) - set(NOT_THE_PACKAGES) - C_SDK_MACROS == set()
    for name, where in NOT_THE_PACKAGES.items():     # read by a script or a file, never by the packages
        assert name not in settings.VARIABLES and name in (ROOT / where).read_text(), name
    for v in settings.VARIABLES.values():     # each one says what it is
        assert v.name.startswith("VDSP_") and v.kind and v.default and len(v.doc) > 10 and v.readers, v
        assert set(v.readers) <= set(settings.ALL), v


def test_the_commands_page_table_is_the_declarations():
    assert settings.markdown_table() in (ROOT / "docs" / "commands.md").read_text()
    for name in settings.VARIABLES:
        assert f"| `{name}` (" in settings.markdown_table()


def test_values_are_read_when_asked_and_parsed_alone(monkeypatch, tmp_path):
    monkeypatch.delenv("VDSP_BUSY_POLL_US", raising=False)
    monkeypatch.setenv("VDSP_RUNTIME_DIR", str(tmp_path))
    assert settings.current().runtime_dir == tmp_path and settings.current().busy_poll_us == 0
    monkeypatch.setenv("VDSP_RUNTIME_DIR", "")             # empty is unset
    monkeypatch.setenv("VDSP_BUSY_POLL_US", "25")
    assert settings.current().runtime_dir is None and settings.current().busy_poll_us == 25
    monkeypatch.setenv("VDSP_FW_HEAP_MB", "lots")           # a bad value fails only its own reader
    s = settings.current()
    assert s.busy_poll_us == 25
    with pytest.raises(ValueError):
        _ = s.fw_heap_mb
    with pytest.raises(KeyError):
        s.raw("VDSP_NOT_DECLARED")
    assert settings.Settings({"VDSP_STRICT_CACHE": "yes", "VDSP_NO_NUMBA": "0"}).strict_cache is True
    assert settings.Settings({"VDSP_NO_NUMBA": "0"}).no_numba is False


def test_a_child_environment_is_built_not_written(monkeypatch):
    monkeypatch.setenv("VDSP_PARENT_PID", "1")
    monkeypatch.setenv("VDSP_SHM_DIR", "/somewhere")
    env = settings.child_env(VDSP_RUNTIME_DIR="/x", VDSP_SHM_DIR=None)
    assert env["VDSP_RUNTIME_DIR"] == "/x" and "VDSP_SHM_DIR" not in env
    assert "VDSP_PARENT_PID" not in env       # it names this process's parent, not the child's
    assert settings.current().runtime_dir != Path("/x") and settings.current().shm_dir == "/somewhere"


def test_the_native_hook_reads_only_vdsp_native_and_parses_it_as_settings_does():
    from vdsp_sim import native_finder
    reads, writes = env_uses(NATIVE.read_text(), "vdsp_sim/native_finder.py")
    assert len(reads) == 1 and writes == []
    assert native_finder.ENV == settings.Settings.native.name
    finder = native_finder.NativeFinder("/nowhere", {}, {})
    for text in ("0", "false", "No", " off ", "1", "yes", "on", "2", ""):
        used = settings.Settings({native_finder.ENV: text}).native
        assert (finder.why_not(env=text) == "") == used, text

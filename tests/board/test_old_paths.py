"""The modules that moved into rooms (issue 44) keep their old import paths for one release: each
old path warns (a DeprecationWarning that names the new path, pointed at the importing line) and
then is the new module itself; nothing of ours names an old path (and the suite turns the warning
into an error: pyproject.toml's filterwarnings). The old paths are ``vdsp_board._moved.MOVED``."""
from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys

import pytest

from tests.project.test_layers import OURS, ROOT, imports_among, module_name
from vdsp_board._moved import MOVED, MovedModuleWarning

SHIM_CALL = "follow(__spec__, __name__)"
LOG_FILE = "vdsp_board.log"      # the supervisor's log file in <runtime dir>/log, not a module


def _forget(old: str) -> None:
    """Import ``old`` afresh next time (its shim runs again)."""
    sys.modules.pop(old, None)
    parent, _, child = old.rpartition(".")
    if child in vars(sys.modules[parent]):
        delattr(sys.modules[parent], child)


def _a_name_of(module) -> str:
    """A function or class the module defines itself, else a name it holds (``__version__``)."""
    own = sorted(name for name, value in vars(module).items()
                 if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__)
    return own[0] if own else "__version__" if hasattr(module, "__version__") else \
        next(name for name in sorted(vars(module)) if not name.startswith("_"))


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_is_the_new_module(old):
    new = importlib.import_module(MOVED[old])
    name = _a_name_of(new)
    _forget(old)
    try:
        with pytest.warns(MovedModuleWarning, match=re.escape(f"{old} moved to {MOVED[old]}")) as caught:
            __import__(old)
        assert [w.filename for w in caught] == [__file__]       # the importing line, not the shim
        assert sys.modules[old] is new
        namespace: dict = {}
        exec(f"from {old} import {name}", namespace)       # already imported: no second warning
        assert namespace[name] is getattr(new, name)
    finally:
        _forget(old)


def test_each_old_path_is_a_shim_and_each_shim_an_old_path():
    shims = {module_name(p) for package in ("vdsp_board", "vdsp_sim") for p in (ROOT / package).glob("*.py")
             if SHIM_CALL in p.read_text()}
    assert shims == set(MOVED)
    for old, new in MOVED.items():
        assert (ROOT / (new.replace(".", "/") + ".py")).is_file(), new


def test_python_m_an_old_path_runs_the_new_module():
    old = next(o for o, n in MOVED.items() if n.endswith(".settings"))      # prints the settings' table
    runs = [subprocess.run([sys.executable, "-m", name], cwd=ROOT, capture_output=True, text=True, timeout=120)
            for name in (old, MOVED[old])]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert runs[0].stdout == runs[1].stdout and "VDSP_RUNTIME_DIR" in runs[0].stdout


def _old_names_in(path, package: str) -> set[str]:
    """The old paths a file imports or names in a string (``mock.patch`` targets, ``-m`` arguments;
    not the log file that one module's old name is also: ``"log" / "vdsp_board.log"``)."""
    nodes = list(ast.walk(ast.parse(path.read_text(), str(path))))     # parsed and walked once for both
    found = {m for m in imports_among(nodes, package) if m in MOVED or m.rpartition(".")[0] in MOVED}
    for node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= {old for old in MOVED if node.value.startswith(old + ".") or node.value == old != LOG_FILE}
    return found


def test_nothing_of_ours_names_an_old_path():
    bad = []
    for folder in (*OURS, "tests", "scripts", "examples"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if SHIM_CALL in path.read_text() or path == ROOT / "vdsp_board" / "_moved.py":
                continue
            name = module_name(path)
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            bad += [f"{path.relative_to(ROOT)}: {old}" for old in sorted(_old_names_in(path, package))]
    assert bad == []


def test_the_old_path_check_can_fail(tmp_path):
    old = sorted(MOVED)[0]
    bad = tmp_path / "m.py"
    bad.write_text(f"import {old}\nTARGET = '{old}.thing'\n")
    assert _old_names_in(bad, "tests") == {old}

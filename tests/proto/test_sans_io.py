"""The protocol package is sans-I/O: no sockets, event loops, threads, processes or shared memory."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = ROOT / "protocol"
FORBIDDEN = {"zmq", "asyncio", "threading", "socket", "mmap", "multiprocessing", "subprocess",
             "_thread", "selectors", "concurrent"}
DYNAMIC_IMPORTERS = {"import_module", "__import__", "find_spec", "import_from_path"}

FILES = sorted(PROTOCOL.rglob("*.py"))


def _top(name: str | None) -> str:
    return (name or "").split(".")[0]


def forbidden_imports(source: str, filename: str = "<src>") -> list[str]:
    """Every forbidden module named by an import statement or a dynamic import call."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _top(a.name) in FORBIDDEN]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and _top(node.module) in FORBIDDEN:
                found.append(node.module)
        elif isinstance(node, ast.Call):
            fn = node.func
            fname = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if fname in DYNAMIC_IMPORTERS:
                for arg in node.args[:1]:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                            and _top(arg.value) in FORBIDDEN:
                        found.append(arg.value)
    return found


def test_protocol_package_has_the_expected_modules():
    names = {p.name for p in FILES}
    assert {"__init__.py", "wire.py", "messages.py", "errors.py", "schema.py", "remoteproc.py",
            "constants.py"} <= names


# The checker itself must be able to fail.
@pytest.mark.parametrize("src", [
    "import zmq", "import zmq.asyncio", "import os, socket", "from asyncio import Queue",
    "from concurrent.futures import ThreadPoolExecutor", "import multiprocessing.shared_memory as shm",
    "import importlib\nimportlib.import_module('zmq')", "from importlib import import_module\nimport_module('mmap')",
    "m = __import__('subprocess')", "def f():\n    import threading\n",
    "try:\n    import zmq\nexcept ImportError:\n    pass\n",
])
def test_checker_catches_forbidden_imports(src):
    assert forbidden_imports(src)


@pytest.mark.parametrize("src", ["import struct", "from . import errors", "from .socket import x",
                                 "import msgpack", "importlib.import_module('json')", "x = 'zmq'"])
def test_checker_allows_other_imports(src):
    assert forbidden_imports(src) == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_protocol_module_imports_no_io(path):
    assert forbidden_imports(path.read_text(), str(path)) == []


def test_importing_protocol_wire_loads_no_io_modules():
    # The interpreter itself preloads a few of these (e.g. _thread); count only what the
    # protocol imports add, and require zmq/asyncio to be absent altogether.
    code = ("import sys, json; before = set(sys.modules); "
            "import protocol.wire, protocol.messages, protocol.errors, protocol.schema, "
            "protocol.remoteproc, protocol.liveness, protocol.opids; "
            "added = set(sys.modules) - before; "
            "print(json.dumps({'added': sorted(added), 'all': sorted(sys.modules)}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    mods = json.loads(out.stdout)
    assert "protocol.wire" in mods["added"]  # the import really happened in that process
    assert "zmq" not in mods["all"]
    assert "asyncio" not in mods["all"]
    assert sorted(m for m in mods["added"] if _top(m) in FORBIDDEN) == []

"""Layers a newcomer can see: the ARM SDK never loads DSP firmware code; both sides share
only the neutral operator contract in ``protocol.contract``."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def loaded_after(imports: str, prefix: str) -> list[str]:
    code = f"import sys; import {imports}; print(sorted(m for m in sys.modules if m.startswith({prefix!r})))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return eval(out.stdout)     # a list of module names printed by the child


def test_the_arm_sdk_loads_no_dsp_firmware_code():
    """``import arm_side.nn`` loaded the whole NN firmware package (and its registry)."""
    assert loaded_after("arm_side, arm_side.nn, arm_side.cv, arm_side.pointcloud.pipeline", "dsp_side") == []



def test_a_process_that_only_talks_to_the_soc_loads_no_numpy():
    """``vdsp status``, the SoC's control commands and a client that asks for no array import the
    SDK, not numpy (~0.2 s of CPU per process, some hundreds of them a suite run): a buffer's
    ``array()`` imports it when asked (tests/sdk/test_memory.py uses it)."""
    assert loaded_after("arm_side, arm_side.soc, vdsp_sim.commands.status", "numpy") == []


def test_a_process_with_blocking_socs_only_loads_no_asyncio_and_no_openssl():
    """Nor asyncio (with ssl and concurrent.futures) nor hmac's OpenSSL hashes: AsyncSoc imports
    asyncio when it opens, a server's ZAP thread (zmq.auth.thread) when its Gate starts, and an
    owner id is drawn from os.urandom without the secrets module (~0.07 s of CPU per process)."""
    for prefix in ("asyncio", "ssl", "_ssl", "hmac", "_hashlib", "concurrent", "zmq.asyncio"):
        assert loaded_after("arm_side, arm_side.soc, vdsp_sim.commands.status, vdsp_sim.sysfs, "
                            "vdsp_board.identity.curve, vdsp_board.observability.trace", prefix) == [], prefix

def test_the_contract_is_pure():
    assert loaded_after("protocol.contract.cv_ids, protocol.contract.nn_ids, protocol.contract.pointcloud_ids, "
                        "protocol.contract.image_formats, protocol.contract.tensor_types", "zmq") == []


# Which first-party packages each layer may import (its own included). Function-level imports
# count too: a late import is still an edge between the layers, and so does an import by name
# (``importlib.import_module("relay_server.main")``, ``__import__``): it hid the arrow
# dsp_side -> relay_server once.
#
# The board layer is six rooms, and the SoC's runtime one room of vdsp_sim (issue 44): a layer is
# a package, or a room of one (``vdsp_board.memory``, ``vdsp_sim.soc``). The rooms of the board
# import each other bottom up (configuration < processes < observability < memory < identity;
# socket I/O stands alone). A module directly under ``vdsp_board`` (an old path, a deprecation
# shim now: ``vdsp_board._moved``) is the layer ``vdsp_board`` itself, which only the shims' row and
# vdsp_sim's (whose old paths' shims use ``vdsp_board._moved``) allow; tests/board/test_old_paths.py
# keeps every module of ours off the old paths.
OURS = ("protocol", "vdsp_board", "vdsp_sim", "arm_side", "dsp_side", "relay_server")
ROOMS = {"vdsp_board": ("config", "processes", "observability", "memory", "identity", "sockets"),
         "vdsp_sim": ("soc",)}
BOARD = {f"vdsp_board.{room}" for room in ROOMS["vdsp_board"]}
ALLOWED = {
    "protocol": {"protocol"},
    "vdsp_board.config": {"protocol", "vdsp_board.config"},
    "vdsp_board.processes": {"protocol", "vdsp_board.config", "vdsp_board.processes"},
    "vdsp_board.observability": {"protocol", "vdsp_board.config", "vdsp_board.processes", "vdsp_board.observability"},
    "vdsp_board.memory": {"protocol", "vdsp_board.config", "vdsp_board.observability", "vdsp_board.memory"},
    "vdsp_board.identity": {"protocol", "vdsp_board.config", "vdsp_board.processes", "vdsp_board.observability",
                            "vdsp_board.memory", "vdsp_board.identity"},
    "vdsp_board.sockets": {"protocol", "vdsp_board.sockets"},
    "vdsp_board": {"protocol", "vdsp_board", *BOARD},      # the package, its old paths' shims
    "arm_side": {"protocol", *BOARD, "arm_side"},
    "dsp_side": {"protocol", *BOARD, "dsp_side"},
    "relay_server": {"protocol", *BOARD, "relay_server"},
    "vdsp_sim.soc": {"protocol", *BOARD, "arm_side", "dsp_side", "relay_server", "vdsp_sim.soc"},
    # the CLI, benchmarks, samples, fuzzer, and the shims of the SoC room's old paths
    "vdsp_sim": {"protocol", "vdsp_board", *BOARD, "arm_side", "dsp_side", "relay_server", "vdsp_sim.soc", "vdsp_sim"},
}


def layer_of(module: str) -> str:
    """The layer of a module: its package, or the room of its package it lives in."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ROOMS.get(parts[0], ()):
        return ".".join(parts[:2])
    return parts[0]


def module_name(path: Path, root: Path | None = None) -> str:
    rel = path.relative_to(root or ROOT).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _imported_by_name(node: ast.Call) -> str | None:
    """The module an ``importlib.import_module(...)`` or ``__import__(...)`` call names: its
    literal, or the literal part before an f-string's first field (``vdsp_sim.commands.{name}``
    imports ``vdsp_sim.commands``); ``"?"`` for a name computed otherwise; None for other calls."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rstrip(".") or "?"
    return "?"


def first_party_imports(path: Path, package: str) -> set[str]:
    return imports_among(ast.walk(ast.parse(path.read_text(), str(path))), package)


def imports_among(nodes, package: str) -> set[str]:
    """The first-party modules that the syntax ``nodes`` (of a module of ``package``) import."""
    found = set()
    for node in nodes:
        if isinstance(node, ast.Call) and (named := _imported_by_name(node)) is not None:
            found.add(named)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:      # relative: resolve against the module's package
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
                # `from . import x` imports the module pkg.x, not only the package
                found |= {module} | {f"{module}.{a.name}" for a in node.names}
            elif node.module:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if m.split(".")[0] in OURS}


def test_imports_only_go_down():
    """Each module against its own layer's row (a room's module against its room's)."""
    bad = []
    for package in OURS:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = module_name(path)
            allowed = ALLOWED[layer_of(name)]
            rel = path.relative_to(ROOT).with_suffix("")
            home = name if path.name == "__init__.py" else name.rpartition(".")[0]
            for module in first_party_imports(path, home):
                if layer_of(module) not in allowed:
                    bad.append(f"{rel}: imports {module}")
    assert not bad, "\n".join(bad)


def test_every_layer_has_a_row():
    """A room without a row would not be checked at all: each package and room is a layer."""
    layers = {layer_of(module_name(path)) for package in OURS for path in (ROOT / package).rglob("*.py")}
    assert layers == set(ALLOWED)
    assert all(room == "__init__" or (ROOT / package / room / "__init__.py").is_file()
               for package, rooms in ROOMS.items() for room in rooms)


def test_a_rooms_module_is_held_to_its_rooms_row():
    """``vdsp_board.config`` is the bottom room: an import of the identity room from it is an arrow up;
    an old path (a shim) is the layer ``vdsp_board``, which no row of the sides allows."""
    assert layer_of("vdsp_board.config.settings") == "vdsp_board.config"
    assert layer_of("vdsp_board.identity.curve") not in ALLOWED["vdsp_board.config"]
    assert layer_of("vdsp_sim.soc.supervisor") == "vdsp_sim.soc"
    assert layer_of("vdsp_sim.cli") not in ALLOWED["vdsp_sim.soc"]
    old = "vdsp_board.some_module"      # a module directly under the package, as an old path's shim is
    assert layer_of(old) == "vdsp_board"
    assert not [layer for layer in ALLOWED if layer_of(old) in ALLOWED[layer] and layer.startswith("vdsp_board.")]
    assert layer_of(old) not in ALLOWED["arm_side"] | ALLOWED["dsp_side"] | ALLOWED["relay_server"] | ALLOWED["vdsp_sim.soc"]


def test_the_layer_check_can_fail(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from dsp_side import core\n")
    assert {"dsp_side", "dsp_side.core"} <= first_party_imports(bad, "arm_side")
    assert "dsp_side" not in ALLOWED["arm_side"]


def test_a_relative_import_of_a_module_is_that_module(tmp_path):
    """``from . import x`` was recorded as the package alone, so its module was invisible to the
    layer and cycle checks."""
    m = tmp_path / "m.py"
    m.write_text("from . import core\nfrom .. import relay_server\nfrom .sub import thing\n")
    found = first_party_imports(m, "dsp_side")
    assert {"dsp_side.core", "dsp_side.sub.thing"} <= found
    found = first_party_imports(m, "arm_side.cv")
    assert {"arm_side.cv.core", "arm_side.relay_server"} <= found


def test_an_import_by_name_is_an_import(tmp_path):
    """``dsp_side/fwtemplate.py`` imported ``relay_server.main`` with importlib, by name, and the
    layer check did not see the upward arrow."""
    bad = tmp_path / "m.py"
    bad.write_text("import importlib\n\ndef f(kind):\n    importlib.import_module('relay_server.main')\n"
                   "    __import__(f'vdsp_sim.commands.{kind}')\n")
    assert {"relay_server.main", "vdsp_sim.commands"} <= first_party_imports(bad, "dsp_side")
    assert "relay_server" not in ALLOWED["dsp_side"]


# --- one meaning per name ---------------------------------------------------------------------
# Each of these was two things once (#24): two Firmware, Client, Image and Task classes, a
# firmware image and a CV image both in image.py, a run directory and the hbDNN runtime both in
# runtime.py. The SDK keeps the public names (arm_side's Client, Task, cv.Image; dsp_side's
# firmware process keeps Firmware); the other side was renamed.
ONE_MEANING_CLASSES = ("Firmware", "Client", "Image", "Task")
ONE_MEANING_MODULES = ("image.py", "runtime.py")


def top_level_classes(root: Path | None = None) -> dict[str, list[str]]:
    """Class name -> the first-party modules that define it at top level (firmware sources included)."""
    root = root or ROOT
    found: dict[str, list[str]] = {}
    for package in OURS:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.parse(path.read_text(), str(path)).body:
                if isinstance(node, ast.ClassDef):
                    found.setdefault(node.name, []).append(str(path.relative_to(root)))
    return found


def modules_named(name: str, root: Path | None = None) -> list[str]:
    root = root or ROOT
    return [str(p.relative_to(root)) for package in OURS for p in sorted((root / package).rglob(name))]


@pytest.fixture(scope="module")
def checkout_classes() -> dict[str, list[str]]:
    """The checkout's top-level classes, found once for the two checks that read them."""
    return top_level_classes()


def test_the_once_doubled_names_mean_one_thing(checkout_classes):
    classes = checkout_classes
    assert {n: classes.get(n) for n in ONE_MEANING_CLASSES} == {
        "Firmware": ["dsp_side/firmware.py"], "Client": ["arm_side/client.py"],
        "Image": ["arm_side/cv/image.py"], "Task": ["arm_side/task.py"]}
    assert {n: modules_named(n) for n in ONE_MEANING_MODULES} == {
        "image.py": ["arm_side/cv/image.py"], "runtime.py": ["arm_side/dnn/runtime.py"]}


def test_no_public_class_name_is_defined_twice(checkout_classes):
    """Grant, Scheduler and Tensor were two classes too (protocol.acl.AclEntry, arm_side.dnn's
    BpuScheduler and dsp_side's TensorDesc now). A new pair fails here: rename one side."""
    twice = {n: where for n, where in checkout_classes.items() if len(where) > 1 and not n.startswith("_")}
    assert twice == {}


def test_the_name_check_can_fail(tmp_path):
    for package, body in (("arm_side", "class Task:\n    pass\n"), ("relay_server", "class Task:\n    pass\n")):
        (tmp_path / package).mkdir()
        (tmp_path / package / "m.py").write_text(body)
    for package in set(OURS) - {"arm_side", "relay_server"}:
        (tmp_path / package).mkdir()
    assert top_level_classes(tmp_path) == {"Task": ["arm_side/m.py", "relay_server/m.py"]}

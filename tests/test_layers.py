"""Layers a newcomer can see: the ARM SDK never loads DSP firmware code; both sides share
only the neutral operator contract in ``protocol.contract``."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def loaded_after(imports: str, prefix: str) -> list[str]:
    code = f"import sys; import {imports}; print(sorted(m for m in sys.modules if m.startswith({prefix!r})))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return eval(out.stdout)     # a list of module names printed by the child


def test_the_arm_sdk_loads_no_dsp_firmware_code():
    """``import arm_side.nn`` loaded the whole NN firmware package (and its registry)."""
    assert loaded_after("arm_side, arm_side.nn, arm_side.cv, arm_side.pointcloud.pipeline", "dsp_side") == []


def test_the_contract_is_pure():
    assert loaded_after("protocol.contract.cv_ids, protocol.contract.nn_ids, protocol.contract.pointcloud_ids, "
                        "protocol.contract.image_formats, protocol.contract.tensor_types", "zmq") == []


# Which first-party packages each layer may import (its own included). Function-level imports
# count too: a late import is still an edge between the layers.
OURS = ("protocol", "vdsp_board", "vdsp_sim", "arm_side", "dsp_side", "relay_server")
ALLOWED = {
    "protocol": {"protocol"},
    "vdsp_board": {"protocol", "vdsp_board"},
    "arm_side": {"protocol", "vdsp_board", "arm_side"},
    "dsp_side": {"protocol", "vdsp_board", "dsp_side"},
    "relay_server": {"protocol", "vdsp_board", "relay_server"},
}


def layer_of(module: str) -> str:
    if module == "vdsp_board" or module.startswith("vdsp_board."):
        return "vdsp_board"
    return module.split(".")[0]


def first_party_imports(path: Path, package: str) -> set[str]:
    import ast
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:      # relative: resolve against the module's package
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if m.split(".")[0] in OURS}


def test_imports_only_go_down():
    bad = []
    for layer, allowed in ALLOWED.items():
        folder = ROOT / layer.replace(".", "/")
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            package = ".".join(rel.parts[:-1] if rel.name != "__init__" else rel.parts[:-1])
            for module in first_party_imports(path, package):
                if layer_of(module) not in allowed:
                    bad.append(f"{rel}: imports {module}")
    assert not bad, "\n".join(bad)


def test_the_layer_check_can_fail(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from dsp_side import core\n")
    assert {"dsp_side", "dsp_side.core"} <= first_party_imports(bad, "arm_side")
    assert "dsp_side" not in ALLOWED["arm_side"]

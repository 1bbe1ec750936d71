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

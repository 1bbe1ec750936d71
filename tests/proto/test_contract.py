"""One contract entry per operator (protocol/contract/*_ops.py): the firmware binds its kernels
to the entries, the ARM API derives from them, and the docs' hand-written NN and point-cloud
text names them (the generated files and tables: tests/tools/test_regen.py)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from protocol import opids
from protocol.contract import (cv_ids, cv_ops, framework_ops, nn_ids, nn_ops, pointcloud_ids,
                               pointcloud_ops)
from protocol.contract.operator import OperatorEntry
from dsp_side import fw_image
from dsp_side.registry import Registry

ROOT = Path(__file__).resolve().parents[2]
CATALOGS = (framework_ops, nn_ops, pointcloud_ops, cv_ops)
ALL = {op_id: e for c in CATALOGS for op_id, e in c.ENTRIES.items()}


def stock_registry() -> Registry:
    module = fw_image._import_tree(ROOT / "dsp_side" / "firmware_src" / "stock", "contract_test")
    return fw_image.registry_of(module, "stock")[1]


def test_the_stock_firmware_binds_a_kernel_to_every_entry_and_declares_nothing_else():
    registry = stock_registry()
    table = registry.table()
    assert [row["id"] for row in table] == sorted(ALL)
    for row in table:
        spec = registry.get(row["id"])
        assert spec.entry is ALL[row["id"]], row["name"]
        assert row == ALL[row["id"]].describe()


def test_j5_names_and_python_names_of_the_cv_entries():
    from vdsp_sim.samples import cv as sample
    assert sorted(cv_ops.BY_J5) == sorted(sample.SAMPLES)         # the J5 CV sample's operators, by its names
    assert all(e.name == "cv." + e.j5 for e in cv_ops.ENTRIES.values() if e.j5)
    assert all(e.name.startswith("cv.") and e.form is not None for e in cv_ops.ENTRIES.values())
    from arm_side.cv import ops
    assert {s.name: s.op_id for s in ops.OPERATORS} == {e.function_name: e.id for e in cv_ops.ENTRIES.values()}


def test_the_ids_modules_name_the_entries_ids():
    assert (cv_ids.GAUSSIAN_BLUR, cv_ids.REMAP, nn_ids.SOFTMAX, pointcloud_ids.TRANSPOSE, opids.PING, opids.COUNT) \
        == (0x0809, 0x0818, 0x0402, 0x0601, 0x0000, 0x0005)
    for mod, ids in ((cv_ops, cv_ids), (nn_ops, nn_ids), (pointcloud_ops, pointcloud_ids)):
        consts = {k: v for k, v in vars(ids).items() if k.isupper()}
        assert sorted(consts.values()) == sorted(mod.ENTRIES), ids.__name__
        assert all(getattr(mod, name).id == value for name, value in consts.items()), ids.__name__
    assert all(getattr(opids, e.name.upper()) == op_id for op_id, e in framework_ops.ENTRIES.items())


def test_a_declaration_is_checked():
    with pytest.raises(ValueError, match="outside"):
        OperatorEntry.declare(0x10000, "x")
    with pytest.raises(ValueError, match="type must be one of"):
        OperatorEntry.declare(0x1400, "x", {"a": {"type": "complex"}})
    with pytest.raises(ValueError, match="does not satisfy"):
        OperatorEntry.declare(0x1400, "x", {"a": {"type": "int", "min": 1, "default": 0}})
    with pytest.raises(ValueError, match="buffer names"):
        OperatorEntry.declare(0x1400, "x", inputs=(1, 2), buffers=(("a",), ()))
    with pytest.raises(ValueError, match="not an operator table row"):
        OperatorEntry.of_table({"name": "x"})


def test_a_registry_refuses_an_entry_bound_twice():
    registry = Registry()
    registry.bind(framework_ops.PING, lambda ctx, i, o: None)
    with pytest.raises(ValueError, match="registered twice"):
        registry.bind(framework_ops.PING, lambda ctx, i, o: None)


def test_the_arm_cv_defaults_are_the_entries_defaults():
    from arm_side.cv import ops
    for spec in ops.OPERATORS:
        entry = cv_ops.ENTRIES[spec.op_id]
        for p in spec.params:
            if p.name not in entry.params:
                continue                       # ARM-only (e.g. a morphology kernel array)
            declared = entry.params[p.name].get("default", ops.REQUIRED)
            want = tuple(declared) if isinstance(declared, list) else declared
            assert p.default == want, (spec.name, p.name)


# --- the docs' tables -------------------------------------------------------------------------

def _rows(path: Path, header: str) -> list[list[str]]:
    text = path.read_text()
    block = text[text.index(header):].split("\n\n", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()[2:]]


def test_docs_nn_operator_table_matches_the_entries():
    rows = _rows(ROOT / "docs" / "nn.md", "| id | name | inputs → outputs |")
    seen = {}
    for ids, names, _ in rows:
        lo, _, hi = ids.partition("–")
        listed = re.findall(r"`(\w+)`", names)
        numbers = range(int(lo, 16), int(hi or lo, 16) + 1)
        assert len(numbers) == len(listed), ids
        seen.update(zip(numbers, listed))
    assert seen == {op_id: e.name for op_id, e in nn_ops.ENTRIES.items()}


def test_docs_pointcloud_names_the_entries():
    text = (ROOT / "docs" / "pointcloud.md").read_text()
    for op_id, e in pointcloud_ops.ENTRIES.items():
        assert f"`0x{op_id:04x} {e.name}`" in text

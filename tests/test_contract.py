"""One contract entry per operator (protocol/contract/*_ops.py): the firmware binds its kernels
to the entries, the ARM API derives from them, and the docs' operator tables agree with them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from protocol.contract import cv_ids, cv_ops, framework_ops, nn_ops, pointcloud_ops
from protocol.contract.operator import OperatorEntry
from dsp_side import fw_image
from dsp_side.registry import Registry

ROOT = Path(__file__).resolve().parent.parent
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
    assert len(cv_ops.BY_J5) == len(cv_ops.ENTRIES)
    assert all(getattr(cv_ids, re.sub(r"(?<=[a-z])([A-Z])", r"_\1", j5).upper()) == op_id
               for j5, op_id in cv_ops.BY_J5.items())
    assert all(e.name == "cv." + e.j5 for e in cv_ops.ENTRIES.values())
    from arm_side.cv import ops
    assert {s.name: s.op_id for s in ops.OPERATORS} == {e.py_name: e.id for e in cv_ops.ENTRIES.values()}


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


def _value(text: str):
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    nums = [float(v) for v in text.split(",")]
    return nums[0] if len(nums) == 1 else nums


def test_docs_cv_operator_table_matches_the_entries():
    rows = _rows(ROOT / "docs" / "cv.md", "| id | name (J5) | ARM function |")
    assert [int(r[0], 16) for r in rows] == sorted(cv_ops.ENTRIES)
    for op_id, j5, fn, _formats, params in rows:
        entry = cv_ops.ENTRIES[int(op_id, 16)]
        assert j5 == entry.j5 and fn.strip("`").split("(")[0] == entry.py_name, (op_id, j5, fn)
        named = params.split("returns")[0]
        for name in re.findall(r"`(\w+)`", named):
            assert name in entry.params, (j5, name)
        wanted = [n for n in entry.params if n not in ("src", "dst", "map_x", "map_y")]
        if not named.startswith(("as ", "`matrix` 3×3, others as")):
            missing = [n for n in wanted if f"`{n}`" not in named and not (j5 == "filter2D" and n == "ksize")]
            assert not missing, (j5, missing)
        for name, default in re.findall(r"`(\w+)`[^`(]*\(([-\d., ]+|true|false)\)", named):
            declared = entry.params[name]["default"]
            assert _value(default) == declared, (j5, name, default, declared)


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


def test_docs_pointcloud_and_the_readme_catalog_name_the_entries():
    text = (ROOT / "docs" / "pointcloud.md").read_text()
    for op_id, e in pointcloud_ops.ENTRIES.items():
        assert f"`0x{op_id:04x} {e.name}`" in text
    readme = (ROOT / "README.md").read_text()
    catalog = " ".join(readme[readme.index("## Operator catalogs"):readme.index("## Running a SoC")].split())
    names = ", ".join(e.name for e in framework_ops.ENTRIES.values())
    assert f"framework operators ({names})" in catalog
    for title, entries in (("**CV**", cv_ops.ENTRIES), ("**NN**", nn_ops.ENTRIES),
                           ("**Point clouds**", pointcloud_ops.ENTRIES)):
        assert f"{title} (0x{min(entries):04x}–0x{max(entries):04x})" in catalog, title
    assert f"the {len(cv_ops.ENTRIES)} operators of the J5 CV sample" in catalog

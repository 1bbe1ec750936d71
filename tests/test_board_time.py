"""The board-time estimate (docs/dsp_kernels.md, "Board time"), without a SoC: the constants file
states a source for every number; every intrinsic of the IVP subset is counted and priced; a
kernel whose work is known by hand gets exactly those counts (built by the real compiler, run
through the registry as the firmware runs it); a Python operator's estimate is its table
entry's. The live path (RESULT, the SDKs, the trace) is in tests/test_live_board_time.py."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from dsp_side import ckernel
from dsp_side.ckernel import board_model as bm
from tests.test_ckernel import _ctx, _load

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "dsp_side" / "ckernel" / "include" / "xtensa" / "tie" / "xt_ivpn.h"
BOARD_SRC = ROOT / "tests" / "firmware_src" / "board"
SOURCE = re.compile(r"(source|derived|assumed): \S.{10,}")

needs_cc = pytest.mark.skipif(bool(__import__("vdsp_sim.ctoolchain", fromlist=["missing"]).missing()),
                              reason="no C compiler")


def test_every_constant_states_its_source_and_no_other_number_is_at_module_level():
    assert bm.CONSTANTS and all(SOURCE.fullmatch(c.source) for c in bm.CONSTANTS.values()), \
        [k for k, c in bm.CONSTANTS.items() if not SOURCE.fullmatch(c.source)]
    assert all(SOURCE.fullmatch(e.source) for e in bm.TABLE.values())
    assert bm.CLOCK.source.startswith("assumed") and bm.SIMD_BYTES.source.startswith("source: J5 DSP sample")
    tree = ast.parse(Path(bm.__file__).read_text())
    bare = [t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, (int, float))]
    assert bare == []       # a number of the model is a Constant with its source


def _header_intrinsics() -> tuple[list[str], list[str]]:
    text = HEADER.read_text()
    listed = re.findall(r"^\s+X\((\w+)\)", text, re.M)
    defined = re.findall(r"^#define IVP_(\w+)\(", text, re.M)
    return listed, defined


def test_every_intrinsic_is_listed_counted_priced_and_not_instrumented():
    listed, defined = _header_intrinsics()
    assert listed == defined and len(listed) >= 19
    text = HEADER.read_text()
    for name in defined:    # its macro counts it first thing
        line = re.search(rf"^#define IVP_{name}\(.*$", text, re.M).group(0)
        assert f"(VDSP_IVP_COUNT({name}), " in line, line
    assert sorted(bm.IVP) == sorted(f"IVP_{n}" for n in listed)
    assert set(bm.IVP_OUTSIDE) <= set(bm.IVP) and all(v > 0 for v in bm.IVP.values())
    # the emulation's functions are not counted as the kernel's basic blocks
    assert re.findall(r"^static inline", text, re.M) == []


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    return _load(BOARD_SRC, tmp_path_factory.mktemp("board"), "board")


def _count(registry, reps: int, rows: int, n: int = 4096):
    spec = registry.get(0x1450)
    ctx = _ctx()
    ctx.board = None
    src, dst = np.arange(n, dtype=np.uint32).astype(np.uint8), np.zeros(64 * rows, np.uint8)
    from protocol import schema
    spec.fn(ctx, [src], [dst], **schema.validate(spec.name, spec.params, {"reps": reps, "rows": rows}))
    return spec.fn._lib.counters.read(), ctx.board


@needs_cc
def test_a_kernel_of_known_work_gets_exactly_its_counts(board):
    _, registry, _ = board
    for reps, rows, n in ((0, 1, 64), (7, 3, 4096), (1000, 64, 10_000)):
        c, est = _count(registry, reps, rows, n)
        moved = min(n, 4096) + 64 * rows
        assert c["ivp"] == {**({"IVP_ADDN_2X32": reps, "IVP_DIVN_2XF32": reps} if reps else {}),
                            "IVP_GATHERAN_2XF32": 2, "IVP_GATHERDN_2XF32": 2}
        assert c["ivp_outside"] == {"IVP_GATHERAN_2XF32": 1}      # the gather from the input in DDR
        assert (c["dma_transfers"], c["dma_rows"], c["dma_bytes"]) == (2, 1 + rows, moved)
        busy = 2 * 60 + (rows - 1) * 4 + moved / 16                # DMA_SETUP, DMA_ROW, DMA_BYTES_PER_CYCLE
        assert c["dma_busy"] == pytest.approx(busy)
        assert 0 < c["dma_stall"] <= busy and c["blocks"] > 0
        ivp = reps * (1 + 16) + 2 * (8 + 1)                         # ALU, FDIV; gather 16 lanes x 0.5, data 1
        assert est.model == "cycles"
        assert est.parts["ivp"] == ivp and est.parts["outside_tcm"] == 16 * 100   # 16 lanes x DDR_ACCESS
        assert est.cycles == pytest.approx(5000 + ivp + 1600 + 2 * c["blocks"] + c["dma_stall"])
        assert est.us == pytest.approx(est.cycles / 1000)          # 1 GHz


@needs_cc
def test_basic_blocks_grow_with_the_kernels_loop_and_compute_hides_the_transfer_in(board):
    _, registry, _ = board
    blocks = [_count(registry, reps, 1)[0]["blocks"] for reps in (100, 200, 300)]
    assert blocks[2] - blocks[1] == blocks[1] - blocks[0] >= 100   # at least a block per iteration
    idle, _ = _count(registry, 0, 1)
    busy, _ = _count(registry, 1000, 1)          # 17 000 cycles of compute before the wait
    out = 60 + 64 / 16                           # the transfer out, waited for at once
    fill = 60 + 4096 / 16
    assert busy["dma_stall"] == pytest.approx(out, abs=4 * 2)      # a few blocks between issue and wait
    assert idle["dma_stall"] == pytest.approx(out + fill, abs=8 * 2)


def test_a_python_operator_gets_its_table_entry_labelled_table():
    mib = np.zeros(1 << 20, np.uint8)
    assert bm.table_us("memcpy", [mib], [mib]) == (5000 + 2 * (1 << 20) / 16) / 1000 == 136.072
    assert bm.table_us("ping", [], []) == 5.0
    assert bm.table_us("no_such_operator", [mib], []) is None
    enc = bm.table_us("pointcloud_encode", [np.zeros((300_000, 5), np.float32)], [np.zeros(300_000 * 12, np.uint8)])
    assert enc is not None and 1.0 < enc / 1000 < 100.0         # ms per 300 000 points: a sane range


def test_the_runtime_source_lists_the_names_the_model_prices():
    assert ckernel.RUNTIME.read_text().count('#include "vdsp_board.c"') == 1

"""The board-time estimate (docs/dsp_kernels.md, "Board time"), without a SoC: the constants file
states a source for every number; every intrinsic of the IVP subset is counted and priced; a
kernel whose work is known by hand gets exactly those counts (built by the real compiler, run
through the registry as the firmware runs it); a Python operator's estimate is its table
entry's; the intrinsics inlined into a kernel add none of its counted basic blocks (the same
counts as with every intrinsic a call). The live path (RESULT, the SDKs, the trace) is in
tests/integration/test_live_board_time.py."""
from __future__ import annotations

import ast
import logging
import os
import re
import types
from pathlib import Path

import numpy as np
import pytest

from arm_side.pointcloud import synthetic
from arm_side.pointcloud.params import preset
from arm_side.pointcloud.voxelize import Voxelizer
from dsp_side import ckernel, fw_image
from dsp_side.firmware_src.stock import firmware as stock
from protocol.contract import pointcloud_ops
from dsp_side.ckernel import board_model as bm
from tests.dsp.test_ckernel import _ctx, _load

ROOT = Path(__file__).resolve().parents[2]
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
                            "IVP_GATHERAN_2XF32": 2, "IVP_GATHERDN_2XF32": 2, "IVP_SCATTERN_2X32": 1, "IVP_SCATTERW": 1}
        assert c["ivp_outside"] == {"IVP_GATHERAN_2XF32": 1}      # the gather from the input in DDR
        assert (c["dma_transfers"], c["dma_rows"], c["dma_bytes"]) == (2, 1 + rows, moved)
        busy = 2 * 60 + (rows - 1) * 4 + moved / 16                # DMA_SETUP, DMA_ROW, DMA_BYTES_PER_CYCLE
        assert c["dma_busy"] == pytest.approx(busy)
        assert 0 < c["dma_stall"] <= busy and c["blocks"] > 0
        ivp = reps * (1 + 16) + 2 * (8 + 1) + 8 + 1                 # ALU, FDIV; gather 16 lanes x 0.5, data 1;
        #                                                             scatter 16 lanes x 0.5, its wait 1
        assert est.model == "cycles"
        assert est.parts["ivp"] == ivp and est.parts["outside_tcm"] == 16 * 100   # 16 lanes x DDR_ACCESS
        assert est.cycles == pytest.approx(5000 + ivp + 1600 + 2 * c["blocks"] + c["dma_stall"])
        assert est.us == pytest.approx(est.cycles / 1000)          # 1 GHz
        # the runtime prices the counts after each task (vdsp_board_summary) as board_model does
        assert est.cycles == pytest.approx(bm.cycles(c["ivp"], c["ivp_outside"], c["blocks"], c["dma_busy"],
                                                     c["dma_stall"]).cycles)


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


# --- the emulation adds no counted block (xt_ivpn.h, "how the intrinsics run on the host") ---------
def _calls_mode(monkeypatch) -> None:
    """Builds from now on compile every intrinsic as a call (the reference mode): another build key."""
    for var, default in (("CC", "cc"), ("CXX", "c++")):
        monkeypatch.setenv(var, f"{os.environ.get(var) or default} -DVDSP_IVP_CALLS")


def _stock_counts() -> list:
    """Both stages of both presets (and of CenterPoint with a number of points a pillar that is not
    a multiple of 4) on a fixed cloud, by the stock image's C kernels built from its source in this
    process: each task's outputs and board counts."""
    _, registry = fw_image.registry_of_source(stock, "stock")
    ctx = types.SimpleNamespace(core="vdsp1", state=None, log=logging.getLogger("vdsp.op.vdsp1"))
    enc, tr = (registry.get(e.id) for e in (pointcloud_ops.ENCODE, pointcloud_ops.TRANSPOSE))
    for spec in (enc, tr):
        spec.init(ctx)
    got = []
    # (CenterPoint with 5 points a pillar: stage 2 builds its 5th values' rows by 8-bit gathers)
    for name, overrides in (("centerpoint", {}), ("pointpillars", {}), ("centerpoint", {"max_points": 5})):
        p = preset(name, **overrides)
        n = 20_000
        src = synthetic.generate(n, p.dim, seed=1).astype(np.float32).view(np.uint8).reshape(-1)
        outs = [np.zeros(n * 4, np.uint8), np.zeros(n * 4, np.uint8)] + ([np.zeros(n, np.uint8)] if p.dim == 5 else [])
        enc.fn(ctx, [src], outs, num_points=n, **p.encode_params())
        got.append((enc.fn.kernel._lib.counters.read(), [o.tobytes() for o in outs]))
        cap = p.max_pillars * p.max_points
        coords, vx, vt = np.zeros((p.max_pillars, 4), np.int32), np.zeros(cap, np.int32), np.zeros(cap, np.int8)
        t = outs[2].view(np.int8) if p.dim == 5 else None
        used = Voxelizer(p).run(outs[0].view(np.int32), outs[1].view(np.int32), t, coords, vx, vt if t is not None else None)
        feats = np.zeros(int(np.prod(p.feature_shape)), np.uint8)
        tr.fn(ctx, [vx.view(np.uint8)] + ([vt.view(np.uint8)] if p.dim == 5 else []), [feats], **p.transpose_params(used))
        got.append((tr.fn.kernel._lib.counters.read(), [feats.tobytes()]))
    return got


@needs_cc
def test_inlined_intrinsics_add_no_counted_block_to_the_stock_kernels(monkeypatch):
    """Every intrinsic of the subset (the stock kernels use them all but the scatter and its
    wait and the float gather, which the board kernel's straight-line code uses: the test below,
    whose run without a loop iteration gets no extra block) inlined into the kernel, as images are built, gets the
    very counts (intrinsics, blocks, transfers, stalls) and bytes of the reference build where
    each intrinsic is a call that is not instrumented."""
    monkeypatch.setattr(ckernel, "_LIBRARY_AT", dict(ckernel._LIBRARY_AT))   # this test's builds only
    inline = _stock_counts()
    _calls_mode(monkeypatch)
    calls = _stock_counts()
    assert [c for c, _ in inline] == [c for c, _ in calls] and [o for _, o in inline] == [o for _, o in calls]
    used = set().union(*(c["ivp"] for c, _ in inline))
    board_only = {"IVP_SCATTERN_2X32", "IVP_SCATTERW", "IVP_GATHERAN_2XF32", "IVP_GATHERDN_2XF32"}
    assert used == set(bm.IVP) - board_only and all(c["blocks"] > 0 for c, _ in inline)


@needs_cc
def test_inlined_intrinsics_add_no_counted_block_per_iteration_of_a_kernels_loop(board, monkeypatch, tmp_path):
    """The limit of the above (docs/dsp_kernels.md, "Board time"): with the intrinsics inlined the
    compiler may hoist their loop-invariant work into a block before the loop and put what the
    loop leaves into a block after it, two blocks per entry of the loop; never one per iteration."""
    _, registry, _ = board
    _calls_mode(monkeypatch)
    _, calls, _ = _load(BOARD_SRC, tmp_path, "board-calls")
    extra = []
    for reps, rows in ((0, 1), (1, 1), (7, 3), (1000, 64)):
        inline, call = _count(registry, reps, rows)[0], _count(calls, reps, rows)[0]
        assert {**inline, "blocks": 0, "dma_stall": 0} == {**call, "blocks": 0, "dma_stall": 0}
        extra.append(inline["blocks"] - call["blocks"])
    assert extra[0] == 0 and set(extra[1:]) <= {0, 1, 2} and len(set(extra[1:])) == 1
    assert {"IVP_SCATTERN_2X32", "IVP_SCATTERW", "IVP_GATHERAN_2XF32", "IVP_GATHERDN_2XF32"} <= set(
        _count(registry, 0, 1)[0]["ivp"])  # (the test above)

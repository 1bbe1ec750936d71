"""Point-cloud preprocessing without a SoC: the DSP kernels (called in-process) plus the ARM
voxelization must equal the per-point CPU reference bit for bit, on clouds that exercise
every rule; hand-computed values pin the reference itself."""
from __future__ import annotations

import numpy as np
import pytest

from vdsp_sim import pointcloud_inprocess as inprocess
from arm_side.pointcloud import binfile, reference, synthetic
from arm_side.pointcloud.params import COORDS_FILL, preset
from arm_side.pointcloud.voxelize import Voxelizer
from dsp_side.operators import pointcloud as ops
from protocol.errors import InvalidArgument


def kernels(points: np.ndarray, p):
    """The DSP path's three steps with the operators called directly on byte buffers."""
    return inprocess.run(points, p)


def ref(points, p):
    with np.errstate(all="ignore"):
        return reference.preprocess(points, p)


def assert_same(points, p):
    rc, rf = ref(points, p)
    kc, kf = kernels(points, p)
    np.testing.assert_array_equal(kc, rc)
    np.testing.assert_array_equal(kf, rf)
    return rc, rf


PRESETS = ["centerpoint", "pointpillars"]


@pytest.mark.parametrize("name", PRESETS)
def test_synthetic_cloud(name):
    p = preset(name)
    pts = synthetic.generate(20000, p.dim, seed=3)
    coords, feats = assert_same(pts, p)
    assert (coords[0, 0, :, 2] >= 0).sum() > 500 and np.count_nonzero(feats) > 10000


def boundary_cloud(p):
    """Points exactly on, just inside and just outside every bound, plus NaN/inf values."""
    f32 = np.float32
    inside = np.array([(p.back + p.front) / 2, (p.right + p.left) / 2, (p.bottom + p.top) / 2, 0.5, 0.1][:p.dim],
                      np.float32)
    rows = [inside]
    for axis, (lo, hi) in enumerate(((p.back, p.front), (p.right, p.left), (p.bottom, p.top))):
        for v in (f32(lo), f32(hi), np.nextafter(f32(lo), f32(np.inf)), np.nextafter(f32(hi), f32(-np.inf)),
                  np.nan, np.inf, -np.inf):
            row = inside.copy()
            row[axis] = v
            rows.append(row)
    for v in (np.nan, np.inf, -np.inf, 1e30, -1e30):          # intensity / 5th value only quantised
        for axis in range(3, p.dim):
            row = inside.copy()
            row[axis] = v
            rows.append(row)
    return np.array(rows, np.float32)


@pytest.mark.parametrize("name", PRESETS)
def test_range_boundaries_nan_inf(name):
    p = preset(name)
    pts = boundary_cloud(p)
    coords, feats = assert_same(pts, p)
    gx, gy = p.grid
    # on a bound, NaN or inf x/y/z: skipped; just inside: kept, in the last or first cell
    cells = {tuple(r) for r in coords[0, 0, :, 2:] if r[0] >= 0}
    assert max(r[1] for r in cells) == gx - 1 and min(r[1] for r in cells) == 0
    assert max(r[0] for r in cells) == gy - 1 and min(r[0] for r in cells) == 0


def test_quantisation_rounding_and_clamping():
    """Hand-computed: with a 0..1 intensity range and scale 1 the 4th feature is r itself."""
    p = preset("pointpillars", lower=0.0, upper=1.0, scale=1.0, max_points=32)
    rs = [0.5, 1.5, 2.5, -0.5, -1.5, 127.4, 127.5, 200.0, -128.5, -300.0, np.nan, np.inf, -np.inf, 3.49999]
    pts = np.array([[10.0, 0.0, 0.0, r] for r in rs], np.float32)
    _, feats = assert_same(pts, p)
    expect = [0, 2, 2, 0, -2, 127, 127, 127, -128, -128, 0, 127, -128, 3]
    assert feats[0, 3, 0, :len(rs)].tolist() == expect


def test_hand_computed_point():
    p = preset("centerpoint")
    pts = np.array([[0.1, -0.3, -1.0, 51.0, 0.25]], np.float32)
    coords, feats = assert_same(pts, p)
    f = np.float32
    assert coords[0, 0, 0].tolist() == [0, 0, int((f(-0.3) - f(-51.2)) / f(0.2)), int((f(0.1) - f(-51.2)) / f(0.2))]
    assert coords[0, 0, 0].tolist() == [0, 0, 254, 256]
    assert (coords[0, 0, 1:] == COORDS_FILL).all()
    # (0.1 + 51.2) / 102.4 * 128 = 64.125 -> 64; (-0.3 + 51.2) / 102.4 * 128 = 63.625 -> 64;
    # 4 / 8 * 128 = 64; 51 / 255 * 128 = 25.6 -> 26; 0.25 * 128 = 32
    assert feats[0, :, 0, 0].tolist() == [64, 64, 64, 26, 32]
    assert np.count_nonzero(feats) == 5


def test_more_cells_than_pillars_overwrites_last_pillar():
    p = preset("centerpoint", max_pillars=5, max_points=3)
    xs = np.arange(9) * 1.0 + 0.05                   # 9 distinct cells along x, two points in each
    pts = np.array([[x, 0.05, 0.0, 10.0 * i, 0.0] for i, x in enumerate(np.repeat(xs, 2))], np.float32)
    coords, feats = assert_same(pts, p)
    idx = [int((np.float32(x) - np.float32(-51.2)) / np.float32(0.2)) for x in xs]
    assert coords[0, 0, :, 3].tolist() == idx[:4] + [idx[8]]       # last row: the last new cell
    assert np.count_nonzero(feats[0, 3, :, 4]) <= 3                  # the last pillar keeps its first 3 points


def test_pillar_over_max_points_keeps_first_ones():
    p = preset("pointpillars", max_pillars=4, max_points=3, lower=0.0, upper=1.0, scale=1.0)
    pts = np.array([[5.05, 0.05, 0.0, float(i)] for i in range(7)], np.float32)
    _, feats = assert_same(pts, p)
    assert feats[0, 3, 0].tolist() == [0, 1, 2]


@pytest.mark.parametrize("name", PRESETS)
def test_empty_and_all_invalid(name):
    p = preset(name)
    for pts in (np.zeros((0, p.dim), np.float32), np.full((50, p.dim), 1e6, np.float32)):
        coords, feats = assert_same(pts, p)
        assert (coords == COORDS_FILL).all() and not feats.any()


@pytest.mark.parametrize("name", PRESETS)
def test_aligned_pillar_stride_pads_with_zeros(name):
    p = preset(name, pillar_stride=40064)
    pts = synthetic.generate(5000, p.dim, seed=5)
    _, feats = assert_same(pts, p)
    plain = ref(pts, preset(name))[1]
    padded = feats[:, :, :, :40000] if p.layout == "cmp" else feats[:, :, :40000, :]
    np.testing.assert_array_equal(padded, plain)
    assert not (feats[..., 40000:] if p.layout == "cmp" else feats[:, :, 40000:]).any()


def test_random_dense_cloud_with_overflow():
    rng = np.random.default_rng(7)
    p = preset("centerpoint", max_pillars=200, max_points=4)
    pts = rng.normal(0, 3, (3000, 5)).astype(np.float32)
    pts[:, 3] = rng.uniform(-20, 300, 3000)
    assert_same(pts, p)


@pytest.mark.parametrize("dim", [4, 5])
def test_bin_files(tmp_path, dim):
    pts = synthetic.generate(1000, dim, seed=1)
    path = tmp_path / f"cloud{dim}.bin"
    pts.astype("<f4").tofile(path)                   # the dataset format: raw float32, no header
    back = binfile.read_bin(path, dim)
    assert back.dtype == np.float32 and back.shape == (1000, dim)
    np.testing.assert_array_equal(back, pts)
    (tmp_path / "bad.bin").write_bytes(b"\0" * (4 * dim + 4))
    with pytest.raises(InvalidArgument, match="whole number"):
        binfile.read_bin(tmp_path / "bad.bin", dim)


def test_params_validation():
    with pytest.raises(InvalidArgument, match="front"):
        preset("centerpoint", front=-60.0)
    with pytest.raises(InvalidArgument, match="scale"):
        preset("centerpoint", scale=0.0)
    with pytest.raises(InvalidArgument, match="pillar_stride"):
        preset("centerpoint", pillar_stride=100)
    with pytest.raises(InvalidArgument, match="unknown preset"):
        preset("second")
    assert preset("centerpoint").grid == (512, 512)


def test_operator_rejects_short_buffers():
    p = preset("centerpoint")
    small = np.zeros(16, np.uint8)
    with pytest.raises(InvalidArgument, match="input 0"):
        ops.encode(None, [small], [small, small, small], num_points=10, **p.encode_params())
    with pytest.raises(InvalidArgument, match="outputs"):
        ops.encode(None, [np.zeros(200, np.uint8)], [small] * 2, num_points=1, **p.encode_params())
    with pytest.raises(InvalidArgument, match="num_pillars"):
        ops.transpose(None, [small], [small], **dict(preset("pointpillars").transpose_params(50000)))


FIRMWARE_AFTER_SETUP = """
from vdsp_sim import pointcloud_inprocess as inprocess
from arm_side.pointcloud import synthetic
from arm_side.pointcloud.params import preset
from arm_side.memory import MemoryManager
from dsp_side.firmware import Firmware
from dsp_side.operators import pointcloud_jit as jit
from protocol import messages, wire
from protocol.constants import Command
from vdsp_sim import fuzz

KERNELS = ("encode", "_columns", "_quantize_block", "_cells_block")
inprocess.main()                                    # what the install step runs
after_setup = {k: len(getattr(jit, k).signatures) for k in KERNELS}
version, registry = fuzz.stock_registry()
fw = Firmware("vdsp0", version, registry, None, None)
with MemoryManager() as mm:
    for name in ("centerpoint", "pointpillar"):
        p = preset(name)
        pts = synthetic.generate(5000, p.dim, seed=1)
        src = mm.alloc(pts.nbytes)
        src.write(pts.tobytes())
        outs = [mm.alloc(len(pts) * 4), mm.alloc(len(pts) * 4)] + ([mm.alloc(len(pts))] if p.dim == 5 else [])
        task = messages.task(1, 0x0600, inputs=[src.handle()], outputs=[o.handle() for o in outs],
                             params=dict(p.encode_params(), num_points=len(pts)), owner=fuzz._owner_id())
        reply = fw.run(wire.encode(task), fuzz._owner_id())     # for a connection that proved our owner
        assert reply[0][3] == Command.RESULT, reply
print(after_setup == {k: len(getattr(jit, k).signatures) for k in KERNELS}, after_setup)
"""


@pytest.mark.skipif(not __import__("vdsp_board.jit").jit.AVAILABLE, reason="numba is disabled (VDSP_NO_NUMBA)")
def test_a_firmware_task_after_the_install_step_compiles_nothing(shm):
    """The install step (``python -m vdsp_sim.pointcloud_inprocess``) compiles the very signatures
    a firmware task calls: the first point-cloud task after an install stalled ~10 s in numba."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    child = subprocess.run([sys.executable, "-c", FIRMWARE_AFTER_SETUP], cwd=root, capture_output=True, text=True,
                           env=dict(os.environ, VDSP_SHM_DIR=str(shm)), timeout=240)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split()[0] == "True", child.stdout


@pytest.mark.parametrize("name", PRESETS)
def test_transpose_onto_its_own_input_gives_what_separate_buffers_give(name):
    """A fuzzed task named one buffer as input and output: OpenCV asserted (the firmware crashed)."""
    p = preset(name)
    params = dict(p.transpose_params(300))
    cap = params["max_pillars"] * params["max_points"]
    need = max(cap * 4, p.dim * params["max_points"] * params["pillar_stride"])
    rng = np.random.default_rng(5)
    shared = rng.integers(0, 256, need, dtype=np.uint8)
    t = rng.integers(0, 256, cap, dtype=np.uint8)
    inputs = [shared.copy()] + ([t] if p.dim == 5 else [])
    separate = np.zeros(need, np.uint8)
    ops.transpose(None, inputs, [separate], **params)
    aliased = shared.copy()
    ops.transpose(None, [aliased] + ([t] if p.dim == 5 else []), [aliased], **params)
    n = p.dim * params["max_points"] * params["pillar_stride"]
    np.testing.assert_array_equal(aliased[:n], separate[:n])


@pytest.mark.parametrize("name", PRESETS)
def test_voxelize_in_slices_equals_whole(name):
    """Voxelizer.run_parts over uneven consecutive slices (the DSP path voxelizes core 0's part
    while core 1 encodes) gives the bytes of run() on the whole cloud, run after run (the lookup
    table is put back after each run), also when more cells come than pillars."""
    for max_pillars in (40000, 300):
        p = preset(name, max_pillars=max_pillars)
        pts = synthetic.generate(30000, p.dim, seed=5)
        n = len(pts)
        src = np.ascontiguousarray(pts, np.float32).view(np.uint8).reshape(-1)
        cells, xyzr, t = np.zeros(n * 4, np.uint8), np.zeros(n * 4, np.uint8), np.zeros(n, np.uint8)
        ops.encode(None, [src], [cells, xyzr] + ([t] if p.dim == 5 else []), num_points=n, **p.encode_params())
        c, x, tt = cells.view(np.int32), xyzr.view(np.int32), (t.view(np.int8) if p.dim == 5 else None)
        cap = p.max_pillars * p.max_points

        def outputs():
            return (np.full((p.max_pillars, 4), 7, np.int32), np.full(cap, 0x5555, np.int32),
                    np.full(cap, 0x55, np.int8) if p.dim == 5 else None)
        vox = Voxelizer(p)
        want = outputs()
        used = vox.run(c, x, tt, *want)
        for cuts in ([0, n], [0, 12000, n], [0, 1, 29999, n], [0, 0, n]):
            got = outputs()
            parts = [(c[a:b], x[a:b], None if tt is None else tt[a:b]) for a, b in zip(cuts, cuts[1:])]
            assert vox.run_parts(iter(parts), *got) == used
            for w, g in zip(want, got):
                if w is not None:
                    np.testing.assert_array_equal(g, w)
        if max_pillars == 300:
            assert used == 300


def test_stage1_parameter_order_is_the_kernels():
    """pointcloud.encode builds the kernel's parameter vector without importing numba."""
    from dsp_side.operators import pointcloud_jit
    assert ops._PARAM_ORDER == pointcloud_jit.PARAMS

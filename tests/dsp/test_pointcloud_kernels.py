"""Point-cloud preprocessing without a SoC: the DSP kernels (called in-process) plus the ARM
voxelization must equal the per-point CPU reference bit for bit, on clouds that exercise
every rule; hand-computed values pin the reference itself."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vdsp_sim import pointcloud_inprocess as inprocess
from arm_side.pointcloud import binfile, reference, synthetic
from arm_side.pointcloud.params import COORDS_FILL, preset
from arm_side.pointcloud.voxelize import Voxelizer
from dsp_side.operators import pointcloud as ops
from protocol.errors import InvalidArgument


IMPLS = ["python", "c"]      # the DSP stages by the Python/numba kernels and by the stock image's C kernels


@pytest.fixture(params=IMPLS)
def impl(request):
    """Each test that takes it runs with the stages of both implementations."""
    if request.param == "c" and __import__("vdsp_sim.ctoolchain", fromlist=["missing"]).missing():
        pytest.skip("no C compiler")
    return request.param


def kernels(points: np.ndarray, p, impl: str = "python"):
    """The DSP path's three steps with the operators called directly on byte buffers."""
    return inprocess.run(points, p, impl)


def ref(points, p):
    with np.errstate(all="ignore"):
        return reference.preprocess(points, p)


def assert_same(points, p, impl="python"):
    rc, rf = ref(points, p)
    kc, kf = kernels(points, p, impl)
    np.testing.assert_array_equal(kc, rc)
    np.testing.assert_array_equal(kf, rf)
    return rc, rf


PRESETS = ["centerpoint", "pointpillars"]


@pytest.mark.parametrize("name", PRESETS)
def test_synthetic_cloud(name, impl):
    p = preset(name)
    pts = synthetic.generate(20000, p.dim, seed=3)
    coords, feats = assert_same(pts, p, impl)
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
def test_range_boundaries_nan_inf(name, impl):
    p = preset(name)
    pts = boundary_cloud(p)
    coords, feats = assert_same(pts, p, impl)
    gx, gy = p.grid
    # on a bound, NaN or inf x/y/z: skipped; just inside: kept, in the last or first cell
    cells = {tuple(r) for r in coords[0, 0, :, 2:] if r[0] >= 0}
    assert max(r[1] for r in cells) == gx - 1 and min(r[1] for r in cells) == 0
    assert max(r[0] for r in cells) == gy - 1 and min(r[0] for r in cells) == 0


def test_quantisation_rounding_and_clamping(impl):
    """Hand-computed: with a 0..1 intensity range and scale 1 the 4th feature is r itself."""
    p = preset("pointpillars", lower=0.0, upper=1.0, scale=1.0, max_points=32)
    rs = [0.5, 1.5, 2.5, -0.5, -1.5, 127.4, 127.5, 200.0, -128.5, -300.0, np.nan, np.inf, -np.inf, 3.49999]
    pts = np.array([[10.0, 0.0, 0.0, r] for r in rs], np.float32)
    _, feats = assert_same(pts, p, impl)
    expect = [0, 2, 2, 0, -2, 127, 127, 127, -128, -128, 0, 127, -128, 3]
    assert feats[0, 3, 0, :len(rs)].tolist() == expect


def test_hand_computed_point(impl):
    p = preset("centerpoint")
    pts = np.array([[0.1, -0.3, -1.0, 51.0, 0.25]], np.float32)
    coords, feats = assert_same(pts, p, impl)
    f = np.float32
    assert coords[0, 0, 0].tolist() == [0, 0, int((f(-0.3) - f(-51.2)) / f(0.2)), int((f(0.1) - f(-51.2)) / f(0.2))]
    assert coords[0, 0, 0].tolist() == [0, 0, 254, 256]
    assert (coords[0, 0, 1:] == COORDS_FILL).all()
    # (0.1 + 51.2) / 102.4 * 128 = 64.125 -> 64; (-0.3 + 51.2) / 102.4 * 128 = 63.625 -> 64;
    # 4 / 8 * 128 = 64; 51 / 255 * 128 = 25.6 -> 26; 0.25 * 128 = 32
    assert feats[0, :, 0, 0].tolist() == [64, 64, 64, 26, 32]
    assert np.count_nonzero(feats) == 5


def test_more_cells_than_pillars_overwrites_last_pillar(impl):
    p = preset("centerpoint", max_pillars=5, max_points=3)
    xs = np.arange(9) * 1.0 + 0.05                   # 9 distinct cells along x, two points in each
    pts = np.array([[x, 0.05, 0.0, 10.0 * i, 0.0] for i, x in enumerate(np.repeat(xs, 2))], np.float32)
    coords, feats = assert_same(pts, p, impl)
    idx = [int((np.float32(x) - np.float32(-51.2)) / np.float32(0.2)) for x in xs]
    assert coords[0, 0, :, 3].tolist() == idx[:4] + [idx[8]]       # last row: the last new cell
    assert np.count_nonzero(feats[0, 3, :, 4]) <= 3                  # the last pillar keeps its first 3 points


def test_pillar_over_max_points_keeps_first_ones(impl):
    p = preset("pointpillars", max_pillars=4, max_points=3, lower=0.0, upper=1.0, scale=1.0)
    pts = np.array([[5.05, 0.05, 0.0, float(i)] for i in range(7)], np.float32)
    _, feats = assert_same(pts, p, impl)
    assert feats[0, 3, 0].tolist() == [0, 1, 2]


@pytest.mark.parametrize("name", PRESETS)
def test_empty_and_all_invalid(name, impl):
    p = preset(name)
    for pts in (np.zeros((0, p.dim), np.float32), np.full((50, p.dim), 1e6, np.float32)):
        coords, feats = assert_same(pts, p, impl)
        assert (coords == COORDS_FILL).all() and not feats.any()


@pytest.mark.parametrize("name", PRESETS)
def test_aligned_pillar_stride_pads_with_zeros(name, impl):
    p = preset(name, pillar_stride=40064)
    pts = synthetic.generate(5000, p.dim, seed=5)
    _, feats = assert_same(pts, p, impl)
    plain = ref(pts, preset(name))[1]
    padded = feats[:, :, :, :40000] if p.layout == "cmp" else feats[:, :, :40000, :]
    np.testing.assert_array_equal(padded, plain)
    assert not (feats[..., 40000:] if p.layout == "cmp" else feats[:, :, 40000:]).any()


def test_random_dense_cloud_with_overflow(impl):
    rng = np.random.default_rng(7)
    p = preset("centerpoint", max_pillars=200, max_points=4)
    pts = rng.normal(0, 3, (3000, 5)).astype(np.float32)
    pts[:, 3] = rng.uniform(-20, 300, 3000)
    assert_same(pts, p, impl)


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


def test_operator_rejects_short_buffers(impl):
    p = preset("centerpoint")
    encode, transpose = inprocess.stages(impl)
    small = np.zeros(16, np.uint8)
    with pytest.raises(InvalidArgument, match="input 0"):
        encode([small], [small, small, small], num_points=10, **p.encode_params())
    with pytest.raises(InvalidArgument, match="outputs"):
        encode([np.zeros(200, np.uint8)], [small] * 2, num_points=1, **p.encode_params())
    with pytest.raises(InvalidArgument, match="output 2"):
        encode([np.zeros(200, np.uint8)], [small, small, small[:3]], num_points=4, **p.encode_params())
    with pytest.raises(InvalidArgument, match="scale must be > 0"):
        encode([small], [small] * 3, num_points=0, **dict(p.encode_params(), scale=0.0))
    with pytest.raises(InvalidArgument, match="greater than back"):
        encode([small], [small] * 3, num_points=0, **dict(p.encode_params(), front=-60.0))
    with pytest.raises(InvalidArgument, match="more than 32767 cells"):
        encode([small], [small] * 3, num_points=0, **dict(p.encode_params(), x_scale=1e-4))
    with pytest.raises(InvalidArgument, match="num_pillars"):
        transpose([small], [small], **dict(preset("pointpillars").transpose_params(50000)))
    with pytest.raises(InvalidArgument, match="takes 2 inputs"):
        transpose([small], [small], **dict(p.transpose_params(0)))
    with pytest.raises(InvalidArgument, match="output 0"):
        transpose([np.zeros(p.max_pillars * p.max_points * 4, np.uint8)] * 2, [small], **dict(p.transpose_params(0)))


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


@pytest.mark.skipif(not __import__("vdsp_board.config.jit").config.jit.AVAILABLE, reason="numba is disabled (VDSP_NO_NUMBA)")
def test_a_firmware_task_after_the_install_step_compiles_nothing(shm):
    """The install step (``python -m vdsp_sim.pointcloud_inprocess``) compiles the very signatures
    a firmware task calls: the first point-cloud task after an install stalled ~10 s in numba."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    child = subprocess.run([sys.executable, "-c", FIRMWARE_AFTER_SETUP], cwd=root, capture_output=True, text=True,
                           env=dict(os.environ, VDSP_SHM_DIR=str(shm)), timeout=240)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split()[0] == "True", child.stdout


@pytest.mark.parametrize("name", PRESETS)
def test_transpose_onto_its_own_input_gives_what_separate_buffers_give(name, impl):
    """A fuzzed task named one buffer as input and output: OpenCV asserted (the firmware crashed)."""
    p = preset(name)
    transpose = inprocess.stages(impl)[1]
    params = dict(p.transpose_params(300))
    cap = params["max_pillars"] * params["max_points"]
    need = max(cap * 4, p.dim * params["max_points"] * params["pillar_stride"])
    rng = np.random.default_rng(5)
    shared = rng.integers(0, 256, need, dtype=np.uint8)
    t = rng.integers(0, 256, cap, dtype=np.uint8)
    inputs = [shared.copy()] + ([t] if p.dim == 5 else [])
    separate = np.zeros(need, np.uint8)
    transpose(inputs, [separate], **params)
    aliased = shared.copy()
    transpose([aliased] + ([t] if p.dim == 5 else []), [aliased], **params)
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


# --- the stock C kernels (dsp_side/firmware_src/stock): against the numba kernels, at full size -------
RNG = np.random.default_rng(41)


def test_the_stock_image_binds_both_stages_to_its_c_kernels():
    from dsp_side import ckernel, fw_image
    from dsp_side.firmware_src.stock import firmware as stock
    from protocol.contract import pointcloud_ops
    _, registry = fw_image.registry_of(stock, "stock")
    assert {pointcloud_ops.ENCODE.id, pointcloud_ops.TRANSPOSE.id} <= {e.id for e in ckernel.entries_of(registry)}
    assert [p.name for p in sorted(Path(stock.__file__).parent.glob("*.c*"))] == \
        ["pointcloud_encode.cc", "pointcloud_transpose.c"]


@pytest.mark.parametrize("name, layout, points", [
    ("pointpillars", "cpm", 20000), ("centerpoint", "cmp", 20000),          # the presets' layouts
    ("pointpillars", "cmp", 20000), ("centerpoint", "cpm", 20000),
    ("pointpillars", "cpm", 0), ("centerpoint", "cmp", 0), ("pointpillars", "cpm", 200000),
    ("centerpoint", "cmp", 300000)])
@pytest.mark.parametrize("strict", ["0", "1"])
def test_the_c_kernels_are_bit_exact_with_the_numba_ones(monkeypatch, name, layout, points, strict):
    """The stock synthetic cloud (an empty one, the full-size ones) through the DSP path
    in-process, once with the numba stages and once with the C stages, which also pass the strict
    DMA check (no TCM destination touched before its wait)."""
    monkeypatch.setenv("VDSP_STRICT_DMA", strict)
    p = preset(name, layout=layout)
    pts = synthetic.generate(points, p.dim, seed=3)
    n = len(pts)
    src = np.ascontiguousarray(pts).view(np.uint8).reshape(-1)
    got = {}
    for impl in IMPLS:
        encode, _ = inprocess.stages(impl)
        outs = [np.full(n * 4, 0x77, np.uint8), np.full(n * 4, 0x77, np.uint8)] + [np.full(n, 0x77, np.uint8)] * (p.dim == 5)
        result = encode([src], outs, num_points=n, **p.encode_params())
        got[impl] = result, [o.tobytes() for o in outs], inprocess.run(pts, p, impl)
    assert got["c"][0] == got["python"][0]                 # points and valid, as the pipeline reads them
    assert got["c"][1] == got["python"][1]
    (cc, cf), (pc, pf) = got["c"][2], got["python"][2]
    assert (cc == pc).all() and cf.tobytes() == pf.tobytes()
    if points:
        assert got["c"][0]["valid"] > points // 2 and np.count_nonzero(pf) > 10000


@pytest.mark.parametrize("dim, layout", [(4, "cpm"), (5, "cpm"), (4, "cmp"), (5, "cmp")])
def test_the_c_transpose_fills_every_pillar_within_the_runtimes_transfers(dim, layout):
    """All 40000 pillars of 20 points in use (random voxel bytes): the most tiles, as the operator."""
    params = {"dim": dim, "layout": layout, "max_pillars": 40000, "max_points": 20, "pillar_stride": 40000,
              "num_pillars": 40000}
    cap = 40000 * 20
    ins = [RNG.integers(0, 256, cap * 4).astype(np.uint8)] + ([RNG.integers(0, 256, cap).astype(np.uint8)] * (dim == 5))
    want, got = np.full(dim * cap, 0x77, np.uint8), np.full(dim * cap, 0x77, np.uint8)
    ops.transpose(None, ins, [want], **params)
    assert inprocess.stages("c")[1](ins, [got], **params) == {"pillars": 40000}
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dim", [4, 5])
def test_the_c_encode_quantises_every_special_value_as_the_reference(dim):
    """Random points inside the ranges with every value class in every column (NaN, infinities,
    huge, tiny, ties at .5), 16-lane steps and tiles ending anywhere: the C kernel's bytes are
    the numba kernel's and the per-point reference's, its count of valid points theirs."""
    p = preset("centerpoint" if dim == 5 else "pointpillars", lower=0.0, upper=1.0, scale=1 / 256)
    n = 4096 + 37
    pts = np.stack([RNG.uniform(lo, hi, n) for lo, hi in ((p.back, p.front), (p.right, p.left), (p.bottom, p.top),
                                                          (-0.2, 1.2), (-1, 1))][:dim], axis=1).astype(np.float32)
    special = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-45, -0.0, 0.5 / 256, 1.5 / 256, -0.5 / 256,
                        127.5 / 256, -128.5 / 256], np.float32)
    rows = RNG.integers(0, n, n // 3)
    pts[rows, RNG.integers(0, dim, len(rows))] = RNG.choice(special, len(rows))
    src = pts.view(np.uint8).reshape(-1)
    outs = {impl: [np.zeros(n * 4, np.uint8), np.zeros(n * 4, np.uint8)] + [np.zeros(n, np.uint8)] * (dim == 5)
            for impl in IMPLS}
    results = {impl: inprocess.stages(impl)[0]([src], outs[impl], num_points=n, **p.encode_params()) for impl in IMPLS}
    for a, b in zip(outs["c"], outs["python"]):
        assert a.tobytes() == b.tobytes()
    # the kernel's own count (its last step's lanes past the points not counted) is the cells' count
    assert results["c"] == results["python"] == {"points": n, "valid": np.count_nonzero(outs["c"][0].view(np.int32) >= 0)}
    with np.errstate(all="ignore"):
        want = np.array([reference.encode(pt, p) for pt in pts], np.int8)
    assert (outs["c"][1].view(np.int8).reshape(n, 4) == want[:, :4]).all()
    if dim == 5:
        assert (outs["c"][2].view(np.int8) == want[:, 4]).all()


def test_where_no_compiler_is_found_the_stock_image_runs_the_python_kernels(tmp_path, monkeypatch):
    """Built without cc/c++ the image carries no kernel library and binds the Python stages; loaded
    where a compiler is found, it still does (the image decides, not the loading host)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from dsp_side import ckernel, fw_image, signing
    from dsp_side.firmware_src.stock import firmware as stock
    from protocol.contract import pointcloud_ops
    key = Ed25519PrivateKey.generate()
    monkeypatch.setenv("CC", "no-such-cc")
    monkeypatch.setenv("CXX", "no-such-c++")
    fw_image.build(Path(stock.__file__).parent, tmp_path / "img", key=key)
    monkeypatch.delenv("CC")
    monkeypatch.delenv("CXX")
    _, registry = fw_image.load(tmp_path / "img", tmp_path / "work", signing.Trust({signing.public_raw(key): "t"}))
    assert ckernel.entries_of(registry) == [] and not (tmp_path / "work" / ckernel.LIBRARY).exists()
    assert registry.get(pointcloud_ops.ENCODE.id).fn is ops.encode
    assert registry.get(pointcloud_ops.TRANSPOSE.id).fn is ops.transpose

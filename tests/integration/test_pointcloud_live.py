"""The DSP path through a live SoC (stage 1 on both cores, ARM voxelization, stage 2) equals
the per-point CPU reference bit for bit; bad input is an error reply and the core keeps serving."""
from __future__ import annotations

import numpy as np
import pytest

from arm_side import CORE_0, CORE_1, Soc, opids
from arm_side.pointcloud import reference, synthetic
from arm_side.pointcloud.params import preset
from arm_side.pointcloud.pipeline import DspPreprocessor, preprocess
from protocol.contract.pointcloud_ids import ENCODE as ENCODE_OP, TRANSPOSE as TRANSPOSE_OP
from vdsp_sim.samples import nn
from protocol.errors import InvalidArgument
from tests.dsp.test_pointcloud_kernels import boundary_cloud

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def soc(shared_soc):
    with Soc() as s:
        yield s


def assert_same(soc, points, p):
    coords, feats = preprocess(soc, points, p)
    rc, rf = reference.preprocess(points, p)
    np.testing.assert_array_equal(coords, rc)
    np.testing.assert_array_equal(feats, rf)


def test_the_stages_run_on_the_stock_images_c_kernels(shared_soc, soc):
    """Both cores' firmware processes have the stock image's C kernel library mapped (the kernel's
    record of their memory, /proc/PID/maps), which the image's firmware.py binds both stages to:
    every test of this module runs the C stages; and it is the build for the widest x86-64 level
    this CPU runs (docs/dsp_kernels.md)."""
    from pathlib import Path
    from dsp_side import ckernel
    wanted = ckernel.library_name(ckernel.cpu_levels()[-1] if ckernel.x86_64() else None)
    for core in ("vdsp0", "vdsp1"):
        maps = Path(f"/proc/{shared_soc.fw_pid(core)}/maps").read_text()
        assert f"/{wanted}" in maps, core


@pytest.mark.parametrize("name", ["centerpoint", "pointpillars"])
def test_synthetic_cloud_split_over_both_cores(soc, name):
    p = preset(name)
    assert_same(soc, synthetic.generate(30000, p.dim, seed=11), p)


@pytest.mark.parametrize("name", ["centerpoint", "pointpillars"])
def test_edge_clouds(soc, name):
    p = preset(name)
    rng = np.random.default_rng(2)
    assert_same(soc, boundary_cloud(p), p)
    assert_same(soc, np.zeros((0, p.dim), np.float32), p)
    assert_same(soc, np.full((10, p.dim), np.nan, np.float32), p)
    dense = rng.normal(0, 4, (20000, p.dim)).astype(np.float32)
    dense[:, 2] = rng.uniform(-1.5, 0.5, 20000)
    assert_same(soc, dense, preset(name, max_pillars=300, max_points=6, pillar_stride=320))


def test_full_size_centerpoint_cloud(soc):
    p = preset("centerpoint")
    pts = synthetic.generate(300_000, 5)
    with DspPreprocessor(soc, p, len(pts)) as pre:
        pre.load(pts)
        first = pre.run()
        again = pre.run()                      # buffers are reused: a second run gives the same answer
    rc, rf = reference.preprocess(pts, p)
    for r in (first, again):
        np.testing.assert_array_equal(r.coords, rc)
        np.testing.assert_array_equal(r.features, rf)
    assert first.num_pillars > 10000 and first.valid_points > 200_000
    # each DSP stage's board-time estimate (a table entry while the stages are Python, counted once C)
    assert set(first.board_us) == {"stage1", "stage2"} and all(us > 0 for us in first.board_us.values())
    assert set(first.board_models.values()) <= {"table", "cycles"}


def test_bad_input_is_an_error_and_cores_keep_serving(soc):
    p = preset("centerpoint")
    pts = soc.mem.alloc(100 * 20)
    out = [soc.mem.alloc(400), soc.mem.alloc(400)]
    try:
        with pytest.raises(InvalidArgument, match="outputs"):       # 5-dim needs the 5th-value output
            soc.rpc(ENCODE_OP, inputs=[pts], outputs=out, params=dict(p.encode_params(), num_points=100),
                    core=CORE_0).wait(5000)
        with pytest.raises(InvalidArgument, match="input 0"):        # 200 5-dim points do not fit 2000 bytes
            soc.rpc(ENCODE_OP, inputs=[pts], outputs=out + [out[0]],
                    params=dict(p.encode_params(), num_points=200), core=CORE_1).wait(5000)
        with pytest.raises(InvalidArgument, match="dim"):
            soc.rpc(ENCODE_OP, inputs=[pts], outputs=out, params=dict(p.encode_params(), dim=3, num_points=1)).wait(5000)
        with pytest.raises(InvalidArgument, match="num_pillars"):
            soc.rpc(TRANSPOSE_OP, inputs=[pts], outputs=[out[0]],
                    params=preset("pointpillars").transpose_params(50000)).wait(5000)
        for core in (CORE_0, CORE_1):
            assert soc.rpc(opids.PING, core=core).wait(5000)["core"]
    finally:
        pts.free()
        for m in out:
            m.free()
    with DspPreprocessor(soc, p, 10) as pre, pytest.raises(InvalidArgument, match="N x 5"):
        pre.load(np.zeros((10, 4), np.float32))


def test_sample_dumps_and_checks(soc, tmp_path):
    pts = synthetic.generate(20000, 4, seed=4)
    path = tmp_path / "kitti.bin"
    pts.astype("<f4").tofile(path)
    out = tmp_path / "output"
    assert nn.main(["pointpillar", "--points", str(path), "--output", str(out)]) == 0
    coords = np.loadtxt(out / "pointpillar_preprocess_coords_dsp.txt", dtype=np.int64)
    rc, rf = reference.preprocess(pts, preset("pointpillars"))
    np.testing.assert_array_equal(coords, rc.reshape(-1))
    assert (out / "pointpillar_preprocess_features_ref.txt").read_bytes() == \
        (out / "pointpillar_preprocess_features_dsp.txt").read_bytes()
    assert nn.main(["pointpillar", "--points", str(path), "--output", str(out), "--impl", "cpu"]) == 0


def test_cpu_run_compares_only_with_dumps_of_the_same_cloud(soc, tmp_path, capfd):
    """--impl cpu never judges another cloud's DSP dumps; a real difference is an E line and exit 1."""
    out, a, b = tmp_path / "output", tmp_path / "a.bin", tmp_path / "b.bin"
    common = ["--output", str(out), "--num-points", "5000"]

    def lines(*argv, status=0) -> list[str]:
        capfd.readouterr()
        assert nn.main(["pointpillar", *argv]) == status
        return [line for line in capfd.readouterr().err.splitlines() if "consistency check" in line]
    assert lines(*common, "--seed", "1", "--write-points", str(a))[0].startswith("I")    # passed, DSP vs ref
    assert a.stat().st_size == 5000 * 4 * 4
    lines(*common, "--seed", "2", "--write-points", str(b), "--impl", "cpu")
    (skipped,) = lines("--points", str(b), "--output", str(out), "--impl", "cpu")
    assert skipped.startswith("W") and "consistency check skipped" in skipped and "another cloud" in skipped
    (passed,) = lines("--points", str(a), "--output", str(out), "--impl", "cpu")
    assert passed.startswith("I") and "consistency check passed" in passed
    dsp = out / "pointpillar_preprocess_coords_dsp.txt"
    dsp.write_text(dsp.read_text().replace("\n", "\n1\n", 1))        # a DSP dump that differs
    (failed,) = lines("--points", str(a), "--output", str(out), "--impl", "cpu", status=1)
    assert failed.startswith("E") and "consistency check FAILED" in failed

"""The kernel library per x86-64 level (docs/dsp_kernels.md, "Emulation speed"): an image carries
one build of its C kernels for each level, a core loads the widest its CPU runs (or the narrower
one `VDSP_KERNEL_LEVEL` names), and every level gives the same bytes and the same board counts but
for a few basic blocks where the compiler shapes a loop's entry its own way."""
from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from dsp_side import ckernel, fw_image, signing
from tests.dsp import test_board_time
from tests.dsp.test_ckernel import EXAMPLE, _ctx, affine_ref

pytestmark = pytest.mark.skipif(bool(__import__("vdsp_sim.ctoolchain", fromlist=["missing"]).missing()),
                                reason="no C compiler")

V3 = "fpu vme sse sse2 avx avx2 bmi1 bmi2 f16c fma abm movbe xsave"
V4 = V3 + " avx512f avx512bw avx512cd avx512dq avx512vl"


def _cpuinfo(flags: str) -> str:
    return f"processor\t: 0\nmodel name\t: test\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n"


@pytest.mark.parametrize("flags, runs", [
    (V4, ["x86-64", "x86-64-v3", "x86-64-v4"]),
    (V3, ["x86-64", "x86-64-v3"]),
    (V3.replace(" bmi2", ""), ["x86-64"]),                                  # AVX2 without BMI2 is not v3
    (V4.replace(" avx512vl", ""), ["x86-64", "x86-64-v3"]),
    (" avx512f avx512bw avx512cd avx512dq avx512vl", ["x86-64"]),          # no level skipped
])
def test_the_levels_a_cpu_runs_come_from_its_flags(flags, runs):
    assert ckernel.cpu_levels(_cpuinfo(flags)) == runs
    assert ckernel.cpu_levels("processor\t: 0\n") == ["x86-64"]             # no flags line: the baseline


def test_a_core_loads_the_widest_library_its_cpu_runs_or_the_one_named(tmp_path, monkeypatch):
    monkeypatch.setattr(ckernel, "x86_64", lambda: True)
    monkeypatch.setattr(ckernel, "cpu_levels", lambda cpuinfo=None: ["x86-64", "x86-64-v3"])
    monkeypatch.delenv("VDSP_KERNEL_LEVEL", raising=False)
    for level in ckernel.LEVELS:
        (tmp_path / ckernel.library_name(level)).write_bytes(b"lib")
    assert ckernel.library_in(tmp_path) == tmp_path / "vdsp_kernels.x86-64-v3.so"     # not v4: the CPU lacks it
    monkeypatch.setenv("VDSP_KERNEL_LEVEL", "x86-64")
    assert ckernel.library_in(tmp_path) == tmp_path / ckernel.LIBRARY
    monkeypatch.setenv("VDSP_KERNEL_LEVEL", "x86-64-v4")
    with pytest.raises(ValueError, match=r"VDSP_KERNEL_LEVEL=x86-64-v4: this CPU does not run it \(it runs "
                                         r"x86-64, x86-64-v3\)"):
        ckernel.library_in(tmp_path)
    monkeypatch.setenv("VDSP_KERNEL_LEVEL", "avx2")
    with pytest.raises(ValueError, match="not one of x86-64, x86-64-v3, x86-64-v4"):
        ckernel.host_level()
    monkeypatch.delenv("VDSP_KERNEL_LEVEL")
    (tmp_path / "vdsp_kernels.x86-64-v3.so").unlink()           # an image without it: the widest it has
    assert ckernel.library_in(tmp_path) == tmp_path / ckernel.LIBRARY


@pytest.mark.skipif(not ckernel.x86_64(), reason="the levels are x86-64's")
def test_an_image_carries_a_library_per_level_and_runs_the_hosts(tmp_path, monkeypatch):
    key = Ed25519PrivateKey.generate()
    trust = signing.Trust({signing.public_raw(key): "test"})
    fw_image.build(EXAMPLE, tmp_path / "img", key=key)
    _, payload, _ = fw_image.read(tmp_path / "img", trust)
    names = set(zipfile.ZipFile(io.BytesIO(payload)).namelist())
    assert {ckernel.library_name(level) for level in ckernel.LEVELS} <= names
    src = np.arange(5000, dtype=np.uint8)
    for level in ckernel.cpu_levels():
        monkeypatch.setenv("VDSP_KERNEL_LEVEL", level)
        _, registry = fw_image.load(tmp_path / "img", tmp_path / f"work-{level}", trust)
        registry.init_all(_ctx())
        spec = registry.get(0x1410)
        assert spec.fn.library.name == ckernel.library_name(level)
        dst = np.zeros(5000, np.uint8)
        spec.fn(_ctx(), [src], [dst], gain=128, bias=3, tile=1024)
        np.testing.assert_array_equal(dst, affine_ref(src, 128, 3))


@pytest.mark.skipif(not ckernel.x86_64(), reason="the levels are x86-64's")
def test_every_level_gives_the_same_bytes_and_board_counts(monkeypatch):
    """The stock kernels' outputs and counts (intrinsics, transfers, bytes, the engine's time) at
    every level this CPU runs are the widest level's; their basic blocks differ by less than 1 %
    (a loop's entry shaped its own way by the compiler for a level: docs/dsp_kernels.md)."""
    got = {}
    for level in ckernel.cpu_levels():
        monkeypatch.setenv("VDSP_KERNEL_LEVEL", level)
        monkeypatch.setattr(ckernel, "_LIBRARY_AT", {})         # this level's build
        got[level] = test_board_time._stock_counts()
    widest = got.pop(ckernel.cpu_levels()[-1])
    for level, runs in got.items():
        for (counts, outputs), (want, want_outputs) in zip(runs, widest):
            assert outputs == want_outputs, level
            assert {**counts, "blocks": 0, "dma_stall": 0} == {**want, "blocks": 0, "dma_stall": 0}, level
            assert abs(counts["blocks"] - want["blocks"]) <= 0.01 * want["blocks"], (level, counts, want)

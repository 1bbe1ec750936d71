"""hbDSPRpcV2 with the parameters packed into the input buffer, as a J5 program packs them
(docs/capi.md, "Parameters packed into the input"; issue 42): tests/capi_packed_check.c writes
the operator's struct of hb_dsp_ops.h at byte 0 of a cached input, the data from
HB_DSP_PACKED_DATA(...), cleans it and calls hbDSPRpcV2, on libvdsp_hb (its native side), on
the native core's libvdsp_client.so and on libvdsp_hb in direct mode (its embedded SDK). Each
result is compared with the Python SDK's for the same parameters, bit for bit: a gaussianBlur
with every parameter off its default, and the point-cloud stage 1 with its two outputs split by
an hbDSPPackedBuffers. A packed input too small for its data is a coded error naming the function,
the operator and the sizes.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from protocol import errors
from protocol.contract import cv_ids, pointcloud_ids
from tests import privilege
from tests.integration.test_capi_hb_native import link_flags
from tests.integration.test_capi_native import clean_env
from vdsp_sim import capi_native

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "tests" / "capi_packed_check.c"
CLIENTS = ("libvdsp_hb", "libvdsp_client", "libvdsp_hb_direct")
W, H, STRIDE = 97, 61, 112
N = 3000
BLUR = {"src": {"format": "Y", "width": W, "height": H, "stride": STRIDE}, "dst": {"format": "Y", "width": W, "height": H},
        "ksize": [5, 3], "sigma_x": 1.5, "sigma_y": 0.75, "border": "replicate"}
ENCODE = {"dim": 4, "num_points": N, "back": 0.0, "front": 69.12, "right": -39.68, "left": 39.68, "bottom": -3.0,
          "top": 1.0, "lower": 0.0, "upper": 1.0, "x_scale": 0.16, "y_scale": 0.16, "scale": 1.0 / 128}


@pytest.fixture(scope="module")
def work():
    out = Path(tempfile.mkdtemp(prefix="vpacked-"))
    rng = np.random.default_rng(42)
    (out / "image.raw").write_bytes(rng.integers(0, 256, STRIDE * H, dtype=np.uint8).tobytes())
    points = np.stack([rng.uniform(-5, 75, N), rng.uniform(-45, 45, N), rng.uniform(-4, 2, N), rng.uniform(0, 1, N)], 1)
    (out / "points.bin").write_bytes(points.astype(np.float32).tobytes())
    yield out
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="module")
def program(work):
    """The program built for each library, on first use."""
    built: dict[str, Path] = {}

    def of(client: str) -> tuple[Path, dict]:
        library = client.removesuffix("_direct")
        if library not in built:
            if shutil.which(capi_native.cc()[0]) is None:
                privilege.require(f"no C compiler ({' '.join(capi_native.cc())})")
            out = work / library
            out.mkdir(exist_ok=True)
            cmd = [*capi_native.cc(), "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{capi_native.HB_INCLUDE}",
                   str(PROGRAM), *link_flags(library, out), "-o", str(out / "packed")]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
            built[library] = out / "packed"
        return built[library], clean_env(VDSP_RPC_MODE="direct") if library != client else clean_env()
    return of


def run(program, client: str, *args) -> str:
    path, env = program(client)
    done = subprocess.run([str(path), *map(str, args)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (client, done.stdout, done.stderr[-4000:])
    return done.stdout


@pytest.fixture(scope="module")
def python_results(shared_soc, work):
    """The Python SDK's results for the same parameters (Soc.rpc with them beside the buffers)."""
    from arm_side import Soc
    with Soc() as soc:
        src, dst = soc.mem.alloc(STRIDE * H), soc.mem.alloc(W * H)
        src.write((work / "image.raw").read_bytes())
        soc.rpc(cv_ids.GAUSSIAN_BLUR, [src], [dst], BLUR).wait(60_000)
        blurred = dst.read()
        points, cells, xyzr = soc.mem.alloc(N * 16), soc.mem.alloc(N * 4), soc.mem.alloc(N * 4)
        points.write((work / "points.bin").read_bytes())
        task = soc.rpc(pointcloud_ids.ENCODE, [points], [cells, xyzr], ENCODE)
        task.wait(60_000)
        encoded = (cells.read(), xyzr.read(), task.values["valid"])
        for m in (src, dst, points, cells, xyzr):
            m.free()
    return {"blur": blurred, "encode": encoded}


@pytest.mark.parametrize("client", CLIENTS)
def test_a_cv_operator_with_packed_parameters_gives_the_python_sdks_image(client, program, python_results, work):
    out = work / f"blur-{client}.raw"
    run(program, client, "blur", work / "image.raw", W, H, STRIDE, out)
    got = out.read_bytes()
    assert got == python_results["blur"]
    assert got != (work / "image.raw").read_bytes()[:W * H]        # the blur did something


@pytest.mark.parametrize("client", CLIENTS)
def test_the_point_cloud_stage_with_packed_parameters_and_two_outputs_gives_the_python_sdks(
        client, program, python_results, work):
    cells, xyzr = work / f"cells-{client}", work / f"xyzr-{client}"
    stdout = run(program, client, "encode", work / "points.bin", N, cells, xyzr)
    want_cells, want_xyzr, want_valid = python_results["encode"]
    assert stdout.split() == ["valid", str(want_valid)] and 0 < want_valid < N
    assert cells.read_bytes() == want_cells
    assert xyzr.read_bytes() == want_xyzr


@pytest.mark.parametrize("client", CLIENTS)
def test_a_packed_input_too_small_is_a_coded_error_naming_the_call_the_operator_and_the_sizes(
        client, program, shared_soc):
    code, text = run(program, client, "small").rstrip("\n").split("\t")
    assert int(code) == errors.InvalidArgument.code
    assert text.startswith(errors.describe(errors.InvalidArgument.code) + " (hbDSPRpcV2: operator 0x0809 "
                           "(cv.gaussianBlur) takes its parameters packed in its input: hbDSPGaussianBlurParam "
                           "(112 bytes) then its data from byte 128: the input has 128 bytes, at least 129 needed"), text

"""The C API (libvdsp_hb, docs/capi.md) as a J5 developer uses it: the example programs of
examples/capi compiled with cc/c++ -Wall -Wextra -Werror against `vdsp capi --cflags/--libs`,
then run against a live SoC with no extra environment variable (PYTHONHOME/PYTHONPATH set to
nonsense, to show the library's interpreter ignores them). Expected results come from OpenCV,
the CPU reference of the point-cloud preprocessing and onnxruntime running the whole model."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
import pytest

from arm_side import CORE_0, CORE_1, Soc, hb, opids
from tests import privilege
from tests.conftest import wait_until
from tests.live import shm_entries
from vdsp_sim import capi_build, dnn_models

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "capi"
VDSP = [sys.executable, "-m", "vdsp_sim.cli"]
# program -> (compiler, standard, extra flags)
PROGRAMS = {"test_gaussian_blur": ("c++", "-std=c++17", []), "pointcloud": ("cc", "-std=c99", []),
            "mobilenet": ("cc", "-std=c99", ["-D_POSIX_C_SOURCE=200809L", "-pthread", "-lm"]),
            "threads": ("cc", "-std=c99", ["-D_DEFAULT_SOURCE", "-pthread"]), "bad_input": ("cc", "-std=c99", [])}


_FLAGS: dict[str, list[str]] = {}


def capi_flags(option: str) -> list[str]:
    """What ``vdsp capi OPTION`` prints (asked once per module run)."""
    if option not in _FLAGS:
        res = subprocess.run(VDSP + ["capi", option], capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        _FLAGS[option] = res.stdout.split()
    return _FLAGS[option]


@pytest.fixture(scope="module")
def programs():
    """The examples, compiled once for the module (in parallel) into a private directory."""
    why = capi_build.missing()
    if why:
        privilege.require(f"the C API cannot be built on this machine: {why}")
    cflags, libs = capi_flags("--cflags"), capi_flags("--libs")
    out = Path(tempfile.mkdtemp(prefix="vcapi-"))
    try:
        procs = {}
        for name, (cc, std, extra) in PROGRAMS.items():
            src = next(EXAMPLES.glob(f"{name}.c*"))
            procs[name] = subprocess.Popen([cc, std, "-O0", "-Wall", "-Wextra", "-Werror", *cflags, str(src), *libs,
                                            *extra, "-o", str(out / name)], stderr=subprocess.PIPE, text=True)
        for name, proc in procs.items():
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"{name}: {err}"
        yield out
    finally:
        shutil.rmtree(out, ignore_errors=True)


def clean_env(**extra: str) -> dict:
    """This process's environment (it names the SoC) without LD_*/PYTHON* variables, plus
    PYTHONHOME/PYTHONPATH pointing nowhere: the program must need none of them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LD_", "PYTHON"))}
    env.update(PYTHONHOME="/nonexistent", PYTHONPATH="/nonexistent", **extra)
    return env


def run(path: Path, *args: str, env: dict | None = None, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(path), *args], env=env or clean_env(), capture_output=True, text=True,
                          timeout=timeout, **kw)


def test_the_headers_compile_as_c99_and_cxx17(tmp_path):
    if capi_build.missing():
        privilege.require(f"no C build here: {capi_build.missing()}")
    source = """#include <dnn/hb_sys.h>
#include <dnn/hb_dnn.h>
#include <hb_sys.h>
#include <hb_dnn.h>
#include <hb_dsp.h>
#include <hb_dsp.h>
int main(void) {
  hbDSPGaussianBlurParam blur; hbDSPRpcCtrlParam ctrl; hbDNNInferCtrlParam infer;
  HB_DSP_INITIALIZE_GAUSSIAN_BLUR_PARAM(&blur);
  HB_DSP_INITIALIZE_RPC_CTRL_PARAM(&ctrl);
  HB_DNN_INITIALIZE_INFER_CTRL_PARAM(&infer);
  return (int)(blur.ksize[0] + ctrl.priority + infer.priority) - 5;
}
"""
    include = capi_flags("--cflags")
    for cc, std, name in (("cc", "-std=c99", "h.c"), ("c++", "-std=c++17", "h.cc")):
        (tmp_path / name).write_text(source)
        res = subprocess.run([cc, std, "-pedantic", "-Wall", "-Wextra", "-Werror", *include, str(tmp_path / name),
                              "-o", str(tmp_path / "h")], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, (cc, res.stderr)
        assert subprocess.run([str(tmp_path / "h")], timeout=30).returncode == 0


def test_the_codes_and_constants_are_those_of_arm_side_hb(tmp_path):
    """Every HB_* constant of arm_side.hb exists in the headers with the same value, and every
    operator id of the stock firmware is there (its value from the contract)."""
    if capi_build.missing():
        privilege.require(f"no C build here: {capi_build.missing()}")
    from arm_side.capi import opsgen
    names = sorted(n for n in dir(hb) if n.startswith("HB_") and isinstance(getattr(hb, n), int))
    ops = {op.macro: op_id for op_id, op in opsgen.OPERATORS.items()}
    lines = [f'  printf("%s %lld\\n", "{n}", (long long)({n}));' for n in names + sorted(ops)]
    (tmp_path / "c.c").write_text('#include <stdio.h>\n#include <hb_dsp.h>\nint main(void) {\n' + "\n".join(lines)
                                  + "\n  return 0;\n}\n")
    res = subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", *capi_flags("--cflags"), str(tmp_path / "c.c"),
                          "-o", str(tmp_path / "c")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    got = dict(line.split() for line in subprocess.run([str(tmp_path / "c")], capture_output=True, text=True,
                                                       timeout=30).stdout.splitlines())
    assert {n: int(got[n]) for n in names} == {n: getattr(hb, n) for n in names}
    assert {n: int(got[n]) for n in ops} == ops
    assert (ops["HB_DSP_OP_PING"], ops["HB_DSP_OP_GAUSSIAN_BLUR"]) == (opids.PING, 0x0809)


def test_a_j5_cv_sample_in_cxx_gives_what_opencv_gives(programs, shared_soc, tmp_path):
    gray = cv2.GaussianBlur(np.random.default_rng(7).integers(0, 256, (480, 640), dtype=np.uint8), (0, 0), 2)
    cv2.imwrite(str(tmp_path / "input.pgm"), gray)
    res = run(programs / "test_gaussian_blur", str(tmp_path / "input.pgm"), str(tmp_path / "output.pgm"))
    assert res.returncode == 0, res.stderr
    steps = re.findall(r"test_gaussian_blur\.cc:\d+\] (.*)", res.stderr)
    assert steps == ["gaussianBlur begin", f"read image {tmp_path / 'input.pgm'} success", "rpc begin",
                     "rpc finish (vdsp1)", "write output image success", "gaussianBlur finish"], res.stderr
    out = cv2.imread(str(tmp_path / "output.pgm"), cv2.IMREAD_UNCHANGED)
    np.testing.assert_array_equal(out, cv2.GaussianBlur(gray, (5, 5), 1.5))


def test_the_point_cloud_pattern_and_the_stale_cache_without_a_flush(programs, shared_soc, tmp_path):
    assert_point_cloud_pattern(programs / "pointcloud", tmp_path)


def assert_point_cloud_pattern(program: Path, tmp_path: Path) -> str:
    """examples/capi/pointcloud.c (``program``) gives the CPU reference bit for bit; without its
    flushes the DSP reads stale DDR; strict cache mode names the forgotten flush (its stderr is
    returned)."""
    from arm_side.pointcloud import preset, reference, synthetic
    from arm_side.pointcloud.binfile import write_bin
    p = preset("pointpillars")
    points = synthetic.generate(2500, 4, seed=5)
    write_bin(str(tmp_path / "cloud.bin"), points)
    coords, features = reference.preprocess(points, p)
    valid_pillars = int((coords[0, 0, :, 0] == 0).sum())
    for flush in (True, False):
        out = tmp_path / ("flushed" if flush else "stale")
        res = run(program, str(tmp_path / "cloud.bin"), str(out), *(() if flush else ("--no-flush",)))
        assert res.returncode == 0, res.stderr
        got_coords = np.fromfile(f"{out}_coords.bin", np.int32).reshape(coords.shape)
        got_features = np.fromfile(f"{out}_features.bin", np.int8).reshape(features.shape)
        if flush:       # bit for bit the CPU reference
            assert res.stdout.split()[-1] == str(valid_pillars) and valid_pillars > 50, res.stdout
            np.testing.assert_array_equal(got_coords, coords)
            np.testing.assert_array_equal(got_features, features)
        else:           # the DSP read DDR the CPU never cleaned: zeros, not the cloud
            assert res.stdout.strip() == "valid points 0, pillars 0", res.stdout
            assert not np.array_equal(got_features, features)
    # strict cache mode names the forgotten flush when the task is submitted
    res = run(program, str(tmp_path / "cloud.bin"), str(tmp_path / "strict"), "--no-flush",
              env=clean_env(VDSP_STRICT_CACHE="1"))
    assert res.returncode == 1 and f"failed: {hb.HB_SYS_CACHE_NOT_FLUSHED} HB_SYS_CACHE_NOT_FLUSHED" in res.stderr, \
        res.stderr
    return res.stderr


def test_the_mobilenet_flow_from_threads_with_callbacks_and_a_c_layer(programs, shared_soc, tmp_path):
    from arm_side.dnn.ortload import onnxruntime as ort
    from vdsp_sim.samples.nn_mobilenet import bgr_to_nv12, test_picture
    model, whole = dnn_models.ensure(dnn_models.MOBILENET)
    nv12 = bgr_to_nv12(test_picture())
    nv12.tofile(tmp_path / "image.nv12")
    res = run(programs / "mobilenet", str(model), str(tmp_path / "image.nv12"), "3",
              env=clean_env(HB_DNN_ENABLE_DSP="1"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "threads 3, callbacks 3, same result in every thread: yes" in res.stdout
    assert "C layers made 1, destroyed 1" in res.stdout
    assert "layer logits (Dequantize) runs on DSP" in res.stderr and "layer prob (Softmax) runs on ARM" in res.stderr
    top = [(int(m[1]), float(m[2])) for m in re.finditer(r"TOP \d result id: (\d+) prob (\S+)", res.stdout)]
    prob = ort.InferenceSession(str(whole), providers=["CPUExecutionProvider"]).run(
        None, {"data": nv12[None]})[0].reshape(-1)
    want = np.argsort(-prob, kind="stable")[:5]
    assert [i for i, _ in top] == list(want), (top, want)
    np.testing.assert_allclose([p for _, p in top], prob[want], rtol=1e-5)


def test_several_threads_submit_at_once(programs, shared_soc):
    res = run(programs / "threads", "6", "20")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines() == [f"thread {i}: 20 tasks ok (vdsp0 10, vdsp1 10), 0 failed" for i in range(6)]


def test_direct_mode_and_tcp_with_curve_through_the_sdks_variables(programs, shared_soc):
    """The library connects as the Python SDK does: VDSP_RPC_MODE=direct, and a SoC on loopback
    tcp with CURVE keys (VDSP_RELAY_ENDPOINT, VDSP_KEYS_DIR)."""
    res = run(programs / "threads", "2", "4", env=clean_env(VDSP_RPC_MODE="direct"))
    assert res.returncode == 0 and res.stdout.count("4 tasks ok (vdsp0 2, vdsp1 2)") == 2, res.stdout + res.stderr
    from tests.integration.test_live_curve import running_tcp_soc
    with running_tcp_soc() as tcp:
        assert os.environ["VDSP_RELAY_ENDPOINT"].startswith("tcp://")
        res = run(programs / "threads", "2", "4")
        assert res.returncode == 0 and res.stdout.count("4 tasks ok (vdsp0 2, vdsp1 2)") == 2, \
            res.stdout + res.stderr + tcp.logs()


BAD_INPUT = {
    "alloc_null": hb.HB_SYS_INVALID_ARGUMENT, "alloc_zero": hb.HB_SYS_INVALID_ARGUMENT,
    "alloc_over_ddr": hb.HB_SYS_OUT_OF_MEMORY, "alloc": 0, "flush_bad_flag": hb.HB_SYS_INVALID_ARGUMENT,
    "flush_null": hb.HB_SYS_INVALID_ARGUMENT, "write_null_src": hb.HB_SYS_INVALID_ARGUMENT,
    "write_past_end": hb.HB_SYS_INVALID_ARGUMENT, "read_null_dest": hb.HB_SYS_INVALID_ARGUMENT,
    "read_past_end": hb.HB_SYS_INVALID_ARGUMENT, "alloc_second": 0, "free": 0,
    "free_twice": hb.HB_SYS_INVALID_ARGUMENT, "flush_freed": hb.HB_SYS_INVALID_ARGUMENT,
    "flush_made_up": hb.HB_SYS_INVALID_ARGUMENT, "unregister_allocated": hb.HB_SYS_INVALID_ARGUMENT,
    "flush_part": 0, "flush_part_past_end": hb.HB_SYS_INVALID_ARGUMENT, "register_own": 0, "unregister_own": 0,
    "unregister_twice": hb.HB_SYS_INVALID_ARGUMENT, "write_read": 0,
    "rpc_null_task": hb.HB_DNN_INVALID_ARGUMENT, "rpc_freed_input": hb.HB_SYS_INVALID_ARGUMENT,
    "rpc_made_up_input": hb.HB_SYS_INVALID_ARGUMENT, "rpc_packed_too_small": hb.HB_DNN_INVALID_ARGUMENT,
    "rpc_bad_core": hb.HB_DSP_INVALID_CORE,
    "rpc_bad_priority": hb.HB_DNN_INVALID_ARGUMENT, "rpc_buffers_null": hb.HB_DNN_INVALID_ARGUMENT,
    "rpc_buffers_negative": hb.HB_DNN_INVALID_ARGUMENT, "rpc_param_size": hb.HB_DNN_INVALID_ARGUMENT,
    "rpc_param_no_struct": hb.HB_DNN_INVALID_ARGUMENT, "rpc_bad_json": hb.HB_DNN_INVALID_ARGUMENT,
    "rpc_json_not_object": hb.HB_DNN_INVALID_ARGUMENT, "rpc_fill_out_of_range": 0,
    "wait_fill_out_of_range": hb.HB_DNN_INVALID_ARGUMENT, "value_of_failed_task": hb.HB_DNN_INVALID_ARGUMENT,
    "release": 0, "release_twice": hb.HB_DNN_INVALID_TASK_HANDLE, "wait_released": hb.HB_DNN_INVALID_TASK_HANDLE,
    "wait_null": hb.HB_DNN_INVALID_TASK_HANDLE, "wait_made_up": hb.HB_DNN_INVALID_TASK_HANDLE,
    "rpc_unknown_operator": 0, "wait_unknown_operator": hb.HB_DSP_UNKNOWN_OPERATOR, "release_unknown_operator": 0,
    "rpc_sleep": 0, "wait_timeout": hb.HB_DNN_TIMEOUT, "wait_again": 0, "value_slept_ms": 0,
    "value_missing": hb.HB_DNN_INVALID_ARGUMENT, "value_null_name": hb.HB_DNN_INVALID_ARGUMENT,
    "values_json_small": hb.HB_DNN_INVALID_ARGUMENT, "release_sleep": 0,
    "rpc_foreign": hb.HB_DSP_FOREIGN_HANDLE, "rpc_packed_foreign": hb.HB_SYS_INVALID_ARGUMENT,
    "register_foreign": hb.HB_SYS_REGISTER_MEM_FAILED,
    "dnn_missing_file": hb.HB_DNN_CAN_NOT_OPEN_FILE, "dnn_null_name": hb.HB_DNN_INVALID_ARGUMENT,
    "dnn_null_handle": hb.HB_DNN_INVALID_ARGUMENT, "dnn_not_a_model": hb.HB_DNN_INVALID_ARGUMENT,
    "dnn_garbage_model": hb.HB_DNN_INVALID_MODEL,
    "dnn_release_made_up": hb.HB_DNN_INVALID_PACKED_DNN_HANDLE, "dnn_count_made_up": hb.HB_DNN_INVALID_DNN_HANDLE,
    "dnn_handle_made_up": hb.HB_DNN_INVALID_PACKED_DNN_HANDLE, "dnn_wait_made_up": hb.HB_DNN_INVALID_TASK_HANDLE,
    "dnn_release_task_null": hb.HB_DNN_INVALID_TASK_HANDLE, "dnn_roi_infer": hb.HB_DNN_API_USE_ERROR,
    "dnn_unregister_unknown": hb.HB_DNN_INVALID_ARGUMENT, "dnn_register_null": hb.HB_DNN_INVALID_ARGUMENT,
    "free_last": 0,
}


def test_bad_input_gets_a_code_never_a_crash(programs, shared_soc):
    """NULL pointers, freed, made-up and foreign hbSysMem, unknown and released task handles,
    a size over this process's share of the DDR (VDSP_DDR_QUOTA), bad parameters, a timeout."""
    with Soc() as soc:
        theirs = soc.mem.alloc(4096)        # this test process's buffer: foreign to the program
        res = run(programs / "bad_input", f"{theirs.phys_addr:x}", env=clean_env(VDSP_DDR_QUOTA="64M"))
        assert soc.rpc(opids.PING, core=CORE_1).wait(10000) == {"core": "vdsp1"}
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    roi = [line for line in lines if line.startswith("roi_desc ")]
    assert dict(line.split() for line in lines[:-1] if line not in roi) == {k: str(v) for k, v in BAD_INPUT.items()}
    assert lines[-1] == "desc unknown error code -1234"
    # not offered, beside the code's meaning
    assert roi == ["roi_desc HB_DNN_API_USE_ERROR: API used wrongly (hbDNNRoiInfer is not offered: the runtime has no "
                   "resizer inputs)"], roi


def test_without_a_soc_the_code_and_its_description_say_to_start_one(programs, tmp_path):
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    res = run(programs / "bad_input", "nosoc", env=clean_env(VDSP_RUNTIME_DIR=str(rt)))
    assert res.returncode == 0, res.stderr
    code, desc = res.stdout.splitlines()
    assert code == f"alloc {hb.HB_DSP_RELAY_UNAVAILABLE}"
    assert desc.startswith("HB_DSP_RELAY_UNAVAILABLE:") and "vdsp up -d" in desc, desc


def test_a_killed_c_client_leaves_no_shared_memory_and_disturbs_no_one(programs, shared_soc):
    before = shm_entries()
    proc = subprocess.Popen([str(programs / "threads"), "hold"], stdout=subprocess.PIPE, text=True, env=clean_env())
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        created = shm_entries() - before
        assert len(created) >= 5, created           # 4 buffers + the owner's lock
        with Soc() as soc:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            assert soc.rpc(opids.PING, core=CORE_1).wait(10000) == {"core": "vdsp1"}
            assert wait_until(lambda: not (shm_entries() & created), 15), f"leaked: {shm_entries() & created}"
            line = re.compile(rf"\(pid {proc.pid}\) (?:disconnected|gone silent)[^:]*: (\d+) queued task\(s\) dropped")
            assert wait_until(lambda: line.search(shared_soc.log("relay")), 20), shared_soc.log("relay")[-2000:]
            assert soc.rpc(opids.PING, core=CORE_0).wait(10000) == {"core": "vdsp0"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_pkg_config_cmake_and_a_makefile_build_programs_that_run_as_they_are(shared_soc, tmp_path):
    if capi_build.missing():
        privilege.require(f"no C build here: {capi_build.missing()}")
    pcdir = capi_flags("--pkgconfig-dir")[0]
    built = []
    if shutil.which("pkg-config"):
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "vdsp-hb"], capture_output=True, text=True,
                               env=dict(os.environ, PKG_CONFIG_PATH=pcdir), timeout=60)
        assert flags.returncode == 0, flags.stderr
        subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-D_DEFAULT_SOURCE",
                        str(EXAMPLES / "threads.c"), *flags.stdout.split(), "-pthread", "-o", str(tmp_path / "pc")],
                       check=True, timeout=120)
        built.append(tmp_path / "pc")
    if shutil.which("cmake"):
        project = tmp_path / "cmake"
        project.mkdir()
        (project / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.13)\nproject(t C)\nfind_package(vdsp-hb 0.1 REQUIRED)\n"
            "find_package(Threads REQUIRED)\nadd_executable(threads threads.c)\n"
            "target_compile_definitions(threads PRIVATE _DEFAULT_SOURCE)\n"
            "target_compile_options(threads PRIVATE -Wall -Wextra -Werror)\n"
            "target_link_libraries(threads vdsp-hb::hb Threads::Threads)\n")
        shutil.copy(EXAMPLES / "threads.c", project)
        prefix = capi_flags("--prefix")[0]
        for argv in (["cmake", "-S", str(project), "-B", str(project / "b"), f"-DCMAKE_PREFIX_PATH={prefix}"],
                     ["cmake", "--build", str(project / "b")]):
            res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            assert res.returncode == 0, res.stdout + res.stderr
        built.append(project / "b" / "threads")
    if shutil.which("make"):
        shutil.copytree(EXAMPLES, tmp_path / "make")
        vdsp = Path(sys.executable).with_name("vdsp")
        res = subprocess.run(["make", "-s", "-C", str(tmp_path / "make"), f"VDSP={vdsp}", "threads"],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        built.append(tmp_path / "make" / "threads")
    assert built, "none of pkg-config, cmake and make is installed"
    for program in built:
        res = run(program, "2", "2")
        assert res.returncode == 0 and res.stdout.count("2 tasks ok") == 2, (program, res.stdout, res.stderr)


def test_the_first_c_program_of_the_readme_compiles_and_prints_what_it_says(shared_soc, tmp_path):
    if capi_build.missing():
        privilege.require(f"no C build here: {capi_build.missing()}")
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```c\n(.*?)^```", text, re.S | re.M)
    assert len(blocks) == 1
    (tmp_path / "first.c").write_text(blocks[0])
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", *capi_flags("--cflags"), str(tmp_path / "first.c"),
                    *capi_flags("--libs"), "-o", str(tmp_path / "first")], check=True, timeout=120)
    res = run(tmp_path / "first")
    assert res.returncode == 0 and res.stdout == "dst[0] = 7\nsrc[0] = 9\n", res.stdout + res.stderr

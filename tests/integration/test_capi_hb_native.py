"""The hbSys and hbDSP functions in C on the native client core (arm_side/capi/native/vdsp_hb.c;
issue 42), as a C program that calls only them sees them, against a live SoC, on libvdsp_hb (the
library of `vdsp capi`: its native side serves such a program) and on libvdsp_client.so (the
core's own build, vdsp_sim/capi_native.py):

- tests/capi_hb_native_check.c: no libpython mapped and one thread before the first call, no
  libpython after it, SIGINT/SIGTERM dispositions unchanged; a memcpy and a checksum through
  cached memory with their bytes, values (as JSON too), core; the codes and descriptions of a
  double free and a double release; a wait that times out; a released task;
- the same in direct mode (VDSP_RPC_MODE=direct: HELLO to each core, tasks to its firmware) and
  against a SoC on loopback tcp with CURVE keys, in relay and in direct mode: no libpython there
  either (the native side serves those too); a wrong server key and a key off the allow-list are
  refused with the Python SDK's code (HB_DSP_KEY_REFUSED);
- in direct mode a core that stops under a task fails it as the Python SDK's direct mode does:
  its process killed (its control connection closes) HB_DSP_CORE_DEAD, its firmware killed
  (EVENT crashed) HB_DSP_CORE_CRASHED, at once; the other core goes on; a task whose firmware
  died while its core was stopped waits for the core's word in both (HB_DSP_CORE_DEAD: hung,
  then killed), not for a new firmware link's failure (HB_DSP_CORE_OFFLINE before);
- the same under valgrind memcheck (ipc, tcp; relay and direct mode), and built with
  -fsanitize=address,undefined (LeakSanitizer on), with no suppression file;
- a fork() child's first call is HB_DNN_MULTI_PROGRESS_USE_ERROR at once, the parent goes on;
- raise(SIGINT) ends the program as it would without the library, and the SoC reclaims its DDR;
- the J5-style examples of hbSys/hbDSP only (examples/capi/threads.c, pointcloud.c), unchanged,
  give on the native library what they give on the embedded one (tests/integration/test_capi.py);
- an NN operator (softmax) takes the tensor descriptors of its parameter struct;
- memory another process granted is registered, read and cleaned; past the grant it is refused;
- parameter structs and JSON text make the body the embedded SDK's bridge makes.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import msgpack
import numpy as np
import pytest

from arm_side import capi
from arm_side.capi import opsgen
from protocol import errors
from tests import capi_library, privilege
from tests.conftest import wait_until
from tests.live import shm_entries
from tests.integration.test_capi import assert_point_cloud_pattern
from tests.integration.test_capi_native import SANITIZE, clean_env, run
from tests.sdk.test_capi_wire import _sanitizers_here
from vdsp_sim import capi_build, capi_native

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "tests" / "capi_hb_native_check.c"
EXAMPLES = ROOT / "examples" / "capi"


def link_flags(library: str, out: Path) -> list[str]:
    """What links a program with ``library``: libvdsp_hb as `vdsp capi --build` builds it (skipped
    where it cannot be built), or libvdsp_client.so built into ``out``."""
    if library == "libvdsp_hb":
        why = capi_build.ensure(log=lambda _: None)
        if why:
            privilege.require(f"no libvdsp_hb: {why}")
        return [f"-L{capi_build.libdir()}", "-lvdsp_hb", f"-Wl,-rpath,{capi_build.libdir()}"]
    capi_library.build(out)
    return [f"-L{out}", "-lvdsp_client", "-Wl,-rpath,$ORIGIN"]


@pytest.fixture(scope="module", params=["libvdsp_hb", "libvdsp_client"])
def programs(request):
    """The programs, linked with libvdsp_hb (built as `vdsp capi --build` builds it) or with the
    core's own libvdsp_client.so, built once into a private directory."""
    if shutil.which(capi_native.cc()[0]) is None:
        privilege.require(f"no C compiler ({' '.join(capi_native.cc())})")
    out = Path(tempfile.mkdtemp(prefix="vhbnative-"))
    try:
        link = link_flags(request.param, out)
        for source, name in ((CHECK, "check"), (EXAMPLES / "threads.c", "threads"),
                             (EXAMPLES / "pointcloud.c", "pointcloud")):
            cmd = [*capi_native.cc(), "-std=c99", "-Wall", "-Wextra", "-Werror", "-pthread",
                   f"-I{capi_native.HB_INCLUDE}", str(source), *link, "-lm", "-o", str(out / name)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
        yield out
    finally:
        shutil.rmtree(out, ignore_errors=True)


def assert_flow(out: dict[str, str]) -> None:
    assert out["python_before"] == "0" and out["python_after"] == "0", out
    assert out["threads_before"] == "1", out
    assert out["signals_unchanged"] == "1", out
    assert out["copied"] == "1" and out["memcpy_core"] == "2", out
    data = bytes((i * 7 + 3) & 0xff for i in range(65536))
    assert out["crc32"] == str(zlib.crc32(data)), out
    assert out["values"] == f'{{"bytes": 65536, "crc32": {zlib.crc32(data)}, "sum": {sum(data)}}}', out  # json.dumps'
    assert out["missing_value"] == str(errors.InvalidArgument.code), out
    assert out["release_twice"] == str(errors.InvalidTaskHandle.code), out
    assert out["release_twice_desc"].startswith("HB_DNN_INVALID_TASK_HANDLE: invalid task handle (handle 0x"), out
    assert out["short_wait"] == str(errors.TaskTimeout.code), out
    assert out["free_twice"] == str(errors.SysInvalidArgument.code), out
    assert "is not a buffer this process allocated or registered" in out["free_twice_desc"], out


def test_an_hbsys_hbdsp_program_has_no_python_no_thread_before_and_no_signal_handler(programs, shared_soc):
    before = shm_entries()
    out = run([programs / "check", "flow"])
    assert_flow(out)
    assert shm_entries() == before


MEMCHECK = ["valgrind", "--error-exitcode=1", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect"]


def test_valgrind_finds_no_error_and_no_leak(programs, shared_soc):
    if shutil.which("valgrind") is None:
        privilege.require("no valgrind here (apt-get install valgrind)")
    assert_flow(run([*MEMCHECK, programs / "check", "flow"], timeout=300))
    assert run([*MEMCHECK, programs / "threads", "3", "4"], timeout=300) is not None
    assert_flow(run([*MEMCHECK, programs / "check", "flow"], env=clean_env(VDSP_RPC_MODE="direct"), timeout=300))


def test_direct_mode_is_served_without_python(programs, shared_soc):
    """HELLO to each core's control endpoint, the tasks to its firmware: the flow, and tasks
    spread over both cores by several threads, with no libpython mapped."""
    before = shm_entries()
    direct = clean_env(VDSP_RPC_MODE="direct")
    assert_flow(run([programs / "check", "flow"], env=direct))
    res = subprocess.run([str(programs / "threads"), "3", "6"], env=direct, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0 and res.stdout.count("6 tasks ok (vdsp0 3, vdsp1 3)") == 3, res.stdout + res.stderr
    assert wait_until(lambda: shm_entries() == before, timeout_s=60), shm_entries() - before


# the Python SDK's side of `check stopped`: the same requests, its code printed the same way
PY_STOPPED = """
from arm_side import CORE_0, CORE_1, Soc, errors, opids
with Soc(mode="direct", autostart_relay=False) as soc:
    task = soc.rpc(opids.SLEEP, params={"ms": 20000}, core=CORE_0)
    print("submitted 1", flush=True)
    try:
        task.wait(60000)
        code = 0
    except errors.VdspError as exc:
        code = exc.code
    print("code", code)
    try:
        soc.rpc(opids.PING, core=CORE_1).wait(30000)
        print("other_core 0")
    except errors.VdspError as exc:
        print("other_core", exc.code)
"""


def stopped_under(commands: dict[str, list], stop, then=None) -> dict[str, dict[str, str]]:
    """Start each command (a program of `check stopped`'s lines) in direct mode, once each has sent
    its task call ``stop()`` (then ``then(processes)``, by name), and return each one's lines."""
    procs = {name: subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, text=True,
                                    env=clean_env(VDSP_RPC_MODE="direct", PYTHONPATH=str(ROOT)))
             for name, cmd in commands.items()}
    try:
        for proc in procs.values():
            assert proc.stdout is not None and proc.stdout.readline() == "submitted 1\n"
        stop()
        if then is not None:
            then(procs)
        outs = {name: proc.communicate(timeout=120)[0] for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for name, proc in procs.items():
        assert proc.returncode == 0, (name, outs[name])
    return {name: dict(line.split(" ", 1) for line in out.splitlines() if " " in line) for name, out in outs.items()}


def test_a_core_that_stops_under_a_direct_mode_task_fails_it_as_the_python_sdk_does(programs, live_soc):
    from arm_side import Soc

    def vdsp0_runs() -> bool:
        try:
            with Soc(mode="direct", autostart_relay=False, connect_timeout_s=5) as soc:
                return soc.control("vdsp0", "state") == "running"
        except errors.VdspError:
            return False
    commands = {"c": [programs / "check", "stopped"], "python": [sys.executable, "-c", PY_STOPPED]}
    for stop, error in ((lambda: os.kill(live_soc.fw_pid("vdsp0"), signal.SIGKILL), errors.CoreCrashed),
                        (lambda: os.kill(live_soc.pid("vdsp0"), signal.SIGKILL), errors.CoreDead)):
        assert wait_until(vdsp0_runs, timeout_s=60)      # a crashed core recovers its firmware by itself
        outs = stopped_under(commands, stop)
        for name, out in outs.items():
            assert out["code"] == str(error.code) and out["other_core"] == "0", (name, out)
        assert error.name in outs["c"]["desc"] and "vdsp0" in outs["c"]["desc"], outs["c"]


def test_a_task_whose_firmware_died_waits_for_its_cores_word_in_both_clients(programs, soc_hung_3s):
    """A killed core takes its firmware (its child) with it, and a client may hear the firmware's
    connection close, and the link it makes afresh fail to connect, before it hears the core's own
    control connection close. That order forced: vdsp0 stopped (SIGSTOP: it says nothing, and its
    control connection stays open), then its firmware killed. The task reached the firmware: the
    core's word decides (PROTOCOL.md §10), not the new link's failure (before: HB_DSP_CORE_OFFLINE
    at once, in both clients). The Python SDK judges the silent core hung at its deadline (its
    process is stopped, §9): HB_DSP_CORE_DEAD; the C client, which judges no hung deadline
    (vdsp_client.h), still waits then, and says HB_DSP_CORE_DEAD once vdsp0 is killed. (A SoC
    whose hung deadline is 3 s, not 20: the Python verdict comes that much sooner.)"""
    from arm_side import Soc

    live_soc = soc_hung_3s

    with Soc(mode="direct", autostart_relay=False, connect_timeout_s=30) as soc:
        assert wait_until(lambda: soc.control("vdsp0", "state") == "running", timeout_s=60)
    core, firmware = live_soc.pid("vdsp0"), live_soc.fw_pid("vdsp0")

    def freeze_and_kill_its_firmware() -> None:
        os.kill(core, signal.SIGSTOP)
        os.kill(firmware, signal.SIGKILL)

    c_waited = []

    def python_concludes_then_kill_the_core(procs: dict) -> None:
        try:
            procs["python"].wait(timeout=120)        # its hung verdict: HUNG_MS (--hung-ms) after vdsp0 stopped
            c_waited.append(procs["c"].poll() is None)
        finally:
            os.kill(core, signal.SIGKILL)
    commands = {"c": [programs / "check", "stopped"], "python": [sys.executable, "-c", PY_STOPPED]}
    outs = stopped_under(commands, freeze_and_kill_its_firmware, python_concludes_then_kill_the_core)
    for name, out in outs.items():
        assert out["code"] == str(errors.CoreDead.code) and out["other_core"] == "0", (name, out)
    assert c_waited == [True], "the C client concluded while vdsp0 was stopped"
    assert errors.CoreDead.name in outs["c"]["desc"] and "vdsp0" in outs["c"]["desc"], outs["c"]


def first_call(program: Path, env: dict) -> tuple[int, str]:
    """The code and text of `check flow`'s first call, which fails (its CHECK's line on stderr)."""
    done = subprocess.run([str(program), "flow"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "python_before 0" in done.stdout, done.stdout
    found = re.search(r"failed: (-\d+) (.*)", done.stderr)
    assert found, done.stderr
    return int(found.group(1)), found.group(2)


def test_tcp_with_curve_in_relay_and_direct_mode_is_served_without_python(programs, tmp_path):
    """A SoC on loopback tcp with CURVE keys (VDSP_RELAY_ENDPOINT, VDSP_KEYS_DIR; direct mode:
    VDSP_CORE_ENDPOINTS): the flow natively (no libpython), clean under valgrind; a wrong
    VDSP_SERVER_KEY, a client key off the allow-list, a missing one and one through a symlink
    fail the first call with the code the Python SDK raises, saying why."""
    from arm_side import Soc
    from tests.integration.test_live_curve import running_tcp_soc
    from vdsp_board.identity import curve
    with running_tcp_soc() as tcp:
        relay = clean_env()
        direct = clean_env(VDSP_RPC_MODE="direct",
                           VDSP_CORE_ENDPOINTS=",".join(f"{name}={url}" for name, url in tcp.ctl.items()))
        for env in (relay, direct):
            assert_flow(run([programs / "check", "flow"], env=env))
            if shutil.which("valgrind") is not None:
                assert_flow(run([*MEMCHECK, programs / "check", "flow"], env=env, timeout=300))
        _, stranger = curve.create(tmp_path / "keys", "stranger", role=None)
        (tmp_path / "link.key_secret").symlink_to(tcp.keys / "client.key_secret")
        refused = [   # (what the environment adds, the mode's, the code, what the C text says)
            ({"VDSP_SERVER_KEY": str(tcp.keys / "client.key")}, relay, errors.KeyRefused,   # a key, not the server's
             "is VDSP_SERVER_KEY the key of this server?"),
            ({"VDSP_CLIENT_KEY": str(stranger)}, direct, errors.KeyRefused, "not on its allow-list"),
            ({"VDSP_CLIENT_KEY": str(tmp_path / "none.key_secret")}, relay, errors.FileNotFound, "does not exist"),
            ({"VDSP_CLIENT_KEY": str(tmp_path / "link.key_secret")}, direct, errors.InvalidArgument,
             "must be a regular file of yours with mode 0600"),
        ]
        for extra, env, error, says in refused:
            code, text = first_call(programs / "check", {**env, **extra})
            assert code == error.code and says in text, (extra, text)
        saved = dict(os.environ)
        try:
            for extra, env, error, _ in refused:
                os.environ.clear()
                os.environ.update({**env, **extra})
                with pytest.raises(errors.VdspError) as python:
                    with Soc(mode=env.get("VDSP_RPC_MODE", "relay"), autostart_relay=False):
                        pass
                assert python.value.code == error.code, (extra, python.value)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        assert tcp.alive(), tcp.logs()


def test_a_fork_child_gets_the_multi_process_error_at_once_and_the_parent_goes_on(programs, shared_soc):
    out = run([programs / "check", "fork"])
    assert out["child_rc"] == "-6000016" and out["child_rpc"] == "-6000016", out
    assert out["child_desc"].startswith("HB_DNN_MULTI_PROGRESS_USE_ERROR: multi-process use error ("), out
    assert out["child_exit"] == "0" and out["parent_ok"] == "1", out


def test_raise_sigint_ends_the_program_and_its_ddr_is_reclaimed(programs, shared_soc):
    before = shm_entries()
    # SIGINT at its default, as for a program started from a terminal: a suite started in the
    # background by a shell (`./test.sh &`) has it ignored, and the program would inherit that
    done = subprocess.run([str(programs / "check"), "sigint"], env=clean_env(), capture_output=True, text=True,
                          timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == -signal.SIGINT, (done.returncode, done.stdout, done.stderr)
    assert "raising 1" in done.stdout and "survived" not in done.stdout
    assert wait_until(lambda: shm_entries() == before, timeout_s=60), shm_entries() - before


def test_the_examples_of_hbsys_and_hbdsp_run_unchanged_on_the_native_library(programs, shared_soc, tmp_path):
    res = subprocess.run([str(programs / "threads"), "4", "25"], env=clean_env(), capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0 and res.stdout.count("25 tasks ok") == 4, res.stdout + res.stderr
    strict = assert_point_cloud_pattern(programs / "pointcloud", tmp_path)
    assert "hbSysFlushMem(HB_SYS_MEM_CACHE_CLEAN)" in strict, strict     # a C function, not flush(CLEAN)


def test_an_nn_operator_takes_the_tensor_descriptors_of_its_struct(programs, shared_soc):
    out = run([programs / "check", "softmax"])
    x = np.arange(10, dtype=np.float32)
    want = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
    np.testing.assert_allclose(np.array(out["softmax"].split(), dtype=np.float32), want, rtol=1e-5)
    assert out["bad_dims"] == str(errors.InvalidArgument.code), out
    assert out["bad_dims_desc"].endswith("(hbDSPSoftmaxParam.input.validShape.numDimensions 9 must be in 1..8)"), out


def test_memory_another_process_granted_is_registered_and_past_the_grant_refused(programs, shared_soc):
    from arm_side import Soc
    with Soc() as soc:
        theirs = soc.mem.alloc(8192)
        theirs.write(bytes(range(256)) * 32)
        theirs.share(offset=0, size=4096)
        out = run([programs / "check", "register", f"{theirs.phys_addr:x}", "8192", "4096"])
        assert theirs.read(1) == b"\xab"          # the program's CLEAN reached our DDR
    assert out["registered_sum"] == str(sum(range(256)) * 16), out
    assert out["past_grant"] == str(errors.SysRegisterMemFailed.code), out
    assert "is not granted to this process's owner" in out["past_grant_desc"], out


def test_libvdsp_hb_moves_with_its_directory_and_names_no_checkout(shared_soc, tmp_path):
    """The library needs libzmq beside it ($ORIGIN) and no libpython; its pkg-config file finds it
    from its own place: a copy of lib/ elsewhere builds and runs an hbSys/hbDSP program."""
    if shutil.which(capi_native.cc()[0]) is None or shutil.which("pkg-config") is None:
        privilege.require("no C compiler or no pkg-config")
    why = capi_build.ensure(log=lambda _: None)
    if why:
        privilege.require(f"no libvdsp_hb: {why}")
    dynamic = subprocess.run(["readelf", "-d", str(capi_build.library())], capture_output=True, text=True).stdout
    assert "Library runpath: [$ORIGIN]" in dynamic and "libpython" not in dynamic, dynamic
    lib = tmp_path / "moved" / "lib"
    shutil.copytree(capi_build.libdir(), lib, ignore=shutil.ignore_patterns("python3*", ".*"))
    for text in (lib / "pkgconfig" / "vdsp-hb.pc", *(lib / "cmake" / "vdsp-hb").iterdir()):
        assert str(capi_build.prefix()) not in text.read_text(), text
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "vdsp-hb"], capture_output=True, text=True,
                           env={**clean_env(), "PKG_CONFIG_PATH": str(lib / "pkgconfig")}, check=True).stdout.split()
    assert f"-L{lib}" in flags or f"-L{lib}/pkgconfig/.." in flags, flags
    program = tmp_path / "threads"
    subprocess.run([*capi_native.cc(), "-std=c99", str(EXAMPLES / "threads.c"), *flags, "-pthread", "-o",
                    str(program)], check=True, timeout=300)
    res = subprocess.run([str(program), "2", "5"], env=clean_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.count("5 tasks ok") == 2, res.stdout + res.stderr
    maps = subprocess.run(["ldd", str(program)], capture_output=True, text=True).stdout
    assert str(lib) in maps.replace("/pkgconfig/..", ""), maps


@pytest.fixture(scope="module")
def sanitized():
    """(the check program built with the native side's sources under ASan, UBSan and LeakSanitizer,
    the ASAN_OPTIONS that run it so); skipped (failed under VDSP_TEST_STRICT) where they cannot run."""
    with tempfile.TemporaryDirectory(prefix="vsan") as probe:
        why, options = _sanitizers_here(Path(probe))
    privilege.require(why)
    if "detect_leaks=1" not in options:
        privilege.require("LeakSanitizer cannot run here (it needs ptrace)")
    out = Path(tempfile.mkdtemp(prefix="vhbsan-"))
    try:
        cmd = [*capi_native.cc(), *SANITIZE, *capi_native.cflags(out), "-pthread", str(CHECK),
               *(str(capi_native.NATIVE / s) for s in capi_native.SOURCES), *capi_native.link_flags(out), "-lm",
               "-o", str(out / "check")]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        yield out / "check", options
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_address_undefined_and_leak_sanitizers_find_nothing(sanitized, shared_soc):
    program, options = sanitized
    env = clean_env(ASAN_OPTIONS=options, UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")   # names the SoC
    assert_flow(run([program, "flow"], env=env, timeout=300))
    assert_flow(run([program, "flow"], env={**env, "VDSP_RPC_MODE": "direct"}, timeout=300))
    assert run([program, "softmax"], env=env, timeout=300)["bad_dims"] == str(errors.InvalidArgument.code)
    assert run([program, "fork"], env=env, timeout=300)["child_rc"] == "-6000016"


@pytest.fixture(scope="module")
def native_params():
    """(cffi's ffi with the C API's types, the built libvdsp_client.so's vdsp_hb_native_params)."""
    cffi = pytest.importorskip("cffi")
    if shutil.which(capi_native.cc()[0]) is None:
        privilege.require(f"no C compiler ({' '.join(capi_native.cc())})")
    out = Path(tempfile.mkdtemp(prefix="vhbparams-"))
    try:
        capi_library.build(out)
        ffi = cffi.FFI()
        types = re.sub(r'extern "Python"[^;]*;', "", (capi.DIR / "capi.cdef").read_text())
        ffi.cdef(types + opsgen.cdef() + "int vdsp_hb_native_params(int32_t cmd, const void *param, uint32_t size, "
                 "const char *json, void *out, size_t cap, size_t *len);")
        lib = ffi.dlopen(str(out / capi_native.LIBRARY))

        def params(cmd: int, struct=None, json_text: bytes | None = None):
            buf, n = ffi.new("char[]", 1 << 20), ffi.new("size_t *")
            size = ffi.sizeof(struct[0]) if struct is not None else 0
            code = lib.vdsp_hb_native_params(cmd, struct if struct is not None else ffi.NULL, size,
                                             json_text if json_text is not None else ffi.NULL, buf, 1 << 20, n)
            return code if code else ffi.buffer(buf, n[0])[:]
        yield ffi, params
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_a_struct_and_json_make_the_params_the_embedded_sdk_makes(native_params):
    """The native side's mapping of parameter structs (the table generated from the contract) and
    of JSON text gives the body the embedded SDK's bridge gives: the structs of
    tests/sdk/test_capi_gen.py, images, lists, strings, tensor descriptors with quantisation."""
    from arm_side.capi.bridge import Bridge
    from arm_side.nn import DataType, Layout, dense
    from arm_side.nn.tensor import Quantization, QuantiType
    ffi, params = native_params
    bridge = Bridge(ffi)

    def same(cmd: int, struct) -> None:
        assert msgpack.unpackb(params(cmd, struct)) == bridge.struct_params(opsgen.OPERATORS[cmd], struct)

    blur = ffi.new("hbDSPGaussianBlurParam *")
    blur.src.format, blur.src.width, blur.src.height, blur.src.stride = opsgen.IMAGE_FORMATS["Y"], 64, 48, 80
    blur.dst.format, blur.dst.width, blur.dst.height = opsgen.IMAGE_FORMATS["Y"], 64, 48
    blur.dst.hasRoi, blur.dst.roi.left, blur.dst.roi.top, blur.dst.roi.right, blur.dst.roi.bottom = 1, 2, 3, 40, 30
    blur.ksize, blur.sigma_x, blur.sigma_y = [7, 3], 1.25, 0.5
    border = ffi.new("char[]", "réplicate".encode())
    blur.border = border
    same(0x0809, blur)
    fill = ffi.new("hbDSPFillParam *")
    fill.value, fill.size = 9, -1
    same(0x0002, fill)
    resize = ffi.new("hbDSPRoiResizeParam *")
    resize.src.format, resize.src.width, resize.src.height = opsgen.IMAGE_FORMATS["NV12"], 32, 32
    resize.dst.format, resize.dst.width, resize.dst.height = opsgen.IMAGE_FORMATS["Y"], 16, 16
    resize.roi = [0, 0, 15, 15]
    same(0x080f, resize)
    pad = ffi.new("int64_t[]", [7, -3])
    resize.pad_value, resize.pad_value_count = pad, 2
    same(0x080f, resize)
    encode = ffi.new("hbDSPPointcloudEncodeParam *")
    for name, value in dict(dim=4, num_points=10, front=69.12, right=-39.68, scale=1 / 128).items():
        setattr(encode, name, value)
    same(0x0600, encode)
    softmax, keep = ffi.new("hbDSPSoftmaxParam *"), []
    bridge.props_to_c(dense((1, 10), DataType.F32, Layout.NONE), softmax.input, keep)
    quant = Quantization(QuantiType.SCALE, scale=(0.5, 0.25), zero_point=(1, -2), axis=1)
    bridge.props_to_c(dense((2, 5), DataType.S8, Layout.NHWC, quant=quant), softmax.output, keep)
    softmax.axis = 1
    same(0x0402, softmax)
    bridge.props_to_c(dense((2, 5), DataType.S8, Layout.NHWC, quant=Quantization(QuantiType.SHIFT, shift=(3, 4),
                                                                                 axis=1)), softmax.output, keep)
    same(0x0402, softmax)
    assert params(0x0002, ffi.new("hbDSPMemcpyParam *")) == errors.InvalidArgument.code      # not its struct
    for text in ('{"size": 4096}', '{"a": [1, 2.5, -9223372036854775808, 18446744073709551615, null, true], '
                 '"s": "\\u00e9\\ud83d\\ude00\\n", "o": {}, "e": 1e300}', ' {"x" : { "y" : [ ] } } '):
        assert params(1, json_text=text.encode()) == msgpack.packb(json.loads(text)), text
    for text in ("{value: 1", "[1]", "{} x", '{"a": 01}', '{"a": "\\q"}'):
        assert params(1, json_text=text.encode()) == errors.InvalidArgument.code, text

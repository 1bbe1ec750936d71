"""The native client core of the C library (arm_side/capi/native: vdsp_ddr, vdsp_link,
vdsp_client over vdsp_wire and libzmq; issue 42's second part), as a C program uses it with no
Python in its process: tests/capi_native_check.c, built by vdsp_sim/capi_native.py with the host
compiler (-Wall -Wextra -Werror), runs against a live SoC:

- HELLO with its DDR owner's lock (§5.2, §6.3) is answered READY; two buffers, a memcpy TASK
  through the relay, the bytes checked, a PING; the buffers freed leave no DDR file; no libpython
  is mapped in the program, and no thread ran before its first call;
- the same under valgrind memcheck (--error-exitcode=1 --leak-check=full) and built with
  -fsanitize=address,undefined (LeakSanitizer on), with no suppression file;
- what fails says so with a code: no SoC (HB_DSP_RELAY_UNAVAILABLE, saying to run `vdsp up -d`,
  without waiting the connect timeout), a claim the relay cannot verify (HB_DSP_CLAIM_REFUSED),
  a server that answers malformed replies (protocol codes) or HB_DSP_BUSY (said again, then READY);
- the built directory is relocatable: libzmq beside the library, a RUNPATH of $ORIGIN.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import msgpack
import pytest
import zmq

from protocol import errors, header
from protocol.constants import Command
from tests import capi_library, privilege
from tests.live import shm_entries
from tests.sdk.test_capi_wire import _sanitizers_here
from vdsp_sim import capi_native

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "tests" / "capi_native_check.c"
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g", "-O1"]
NO_SOC_WAIT_S = 10      # well under the 20 s connect timeout: a refusal that waited for it fails the test


def compile_check(out: Path, *extra: str, sources: tuple[str, ...] = ()) -> Path:
    """tests/capi_native_check.c into ``out``: linked with the library built there, or (``sources``)
    with the core's sources themselves."""
    program = out / ("check_asan" if sources else "check")
    link = [*(str(capi_native.NATIVE / s) for s in sources), *capi_native.link_flags(out)] if sources else \
        [f"-L{out}", "-lvdsp_client", "-Wl,-rpath,$ORIGIN"]
    cmd = [*capi_native.cc(), *capi_native.cflags(out), *extra, str(CHECK), *link, "-o", str(program)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return program


@pytest.fixture(scope="module")
def built():
    """The library and the check program, built once for the module into a private directory."""
    if shutil.which(capi_native.cc()[0]) is None:
        privilege.require(f"no C compiler ({' '.join(capi_native.cc())})")
    out = Path(tempfile.mkdtemp(prefix="vnative-"))
    try:
        capi_library.build(out)
        yield compile_check(out)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def clean_env(**extra: str) -> dict:
    """This process's environment (it names the SoC) without LD_* and PYTHON* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LD_", "PYTHON", "ASAN", "LSAN", "UBSAN"))}
    env.update(extra)
    return env


def run(cmd: list, env: dict | None = None, timeout: float = 120) -> dict[str, str]:
    done = subprocess.run([str(c) for c in cmd], env=env or clean_env(), capture_output=True, text=True,
                          timeout=timeout)
    out = dict(line.split(" ", 1) if " " in line else (line, "") for line in done.stdout.splitlines())
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-4000:])
    return out


def assert_flow(out: dict[str, str]) -> None:
    assert out["ready"] == "dsp_relay_server", out
    assert out["copied"] == "1" and out["memcpy_core"] in ("vdsp0", "vdsp1"), out
    assert out["ping_core"] == "vdsp1", out
    assert out["held"] == "0", out
    assert out["python_mapped"] == "0", out
    assert out["threads_before"] == "1", out


def test_the_codes_are_those_of_protocol_errors(built, tmp_path):
    names = {"INVALID_ARGUMENT": errors.InvalidArgument, "OUT_OF_MEMORY": errors.OutOfMemory,
             "TASK_TIMEOUT": errors.TaskTimeout, "TASK_NUM_EXCEED_LIMIT": errors.TaskNumExceedLimit,
             "RUN_TASK_FAILED": errors.RunTaskFailed, "API_USE_ERROR": errors.ApiUseError,
             "SYS_INVALID_ARGUMENT": errors.SysInvalidArgument, "SYS_OUT_OF_MEMORY": errors.SysOutOfMemory,
             "PROTOCOL_ERROR": errors.ProtocolError, "CLAIM_REFUSED": errors.ClaimRefused,
             "CORE_BUSY": errors.CoreBusy, "RELAY_UNAVAILABLE": errors.RelayUnavailable}
    lines = [f'  printf("%s %d\\n", "{n}", VDSP_E_{n});' for n in names]
    (tmp_path / "codes.c").write_text('#include <stdio.h>\n#include "vdsp_client.h"\nint main(void) {\n'
                                      + "\n".join(lines) + "\n  return 0;\n}\n")
    program = tmp_path / "codes"
    done = subprocess.run([*capi_native.cc(), *capi_native.cflags(built.parent), str(tmp_path / "codes.c"), "-o",
                           str(program)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert run([program]) == {n: str(cls.code) for n, cls in names.items()}


def test_a_c_program_says_hello_copies_through_the_relay_and_maps_no_python(built, shared_soc):
    before = shm_entries()
    out = run([built, "flow", "65536"])
    assert_flow(out)
    owner = int(out["owner"])
    assert out["phys"].split() == [hex((owner << 40) | 0x1000), hex((owner << 40) | 0x11000)]   # §6.1, §6.3
    assert shm_entries() == before      # its segments and its lock are gone


def test_a_fork_child_gets_a_coded_refusal_and_the_parent_goes_on(built, shared_soc):
    before = shm_entries()
    out = run([built, "fork"])
    assert out["child_code"] == str(errors.ApiUseError.code) and "fork()" in out["child_message"], out
    assert out["child_exit"] == "0" and out["parent_code"] == "0", out
    assert shm_entries() == before


def test_a_sleep_with_its_parameters_runs_and_a_killed_relay_fails_the_task_in_flight(built, live_soc):
    assert run([built, "sleep", "50"])["code"] == "0"
    proc = subprocess.Popen([str(built), "sleep", "8000"], stdout=subprocess.PIPE, text=True, env=clean_env())
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("submitted ")
        os.kill(live_soc.relay_pid(), signal.SIGKILL)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)
    assert out["code"] == str(errors.RelayUnavailable.code) and "closed the connection" in out["message"], out


def test_the_ddr_quota_reserve_and_reserve_lock_are_the_sdks(built, tmp_path):
    """vdsp_ddr alone (no SoC): VDSP_DDR_QUOTA and VDSP_DDR_RESERVE read as the SDK reads them (a
    refusal by the reserve needs a file system with less free space than this host's), the
    user's reserve lock taken and removed, another process's lock waited for and left alone, a
    symlink at the lock's name replaced, never followed; nothing left behind."""
    ddr = tmp_path / "ddr"
    ddr.mkdir()

    def alloc(*sizes: int, **env: str) -> list[tuple[int, str]]:
        out = run([built, "alloc", *map(str, sizes)], env=clean_env(VDSP_SHM_DIR=str(ddr), **env))
        assert not list(ddr.iterdir()), list(ddr.iterdir())
        return [(int(out[f"alloc{i}"].split(" ", 1)[0]), out[f"alloc{i}"]) for i in range(len(sizes))]

    quota = alloc(65536, 1, VDSP_DDR_QUOTA="128K")
    assert quota[0][0] == 0 and quota[1][0] == 0
    over = alloc(65536, 65537, VDSP_DDR_QUOTA="128K")
    assert over[1][0] == errors.SysOutOfMemory.code and "quota of 131072 bytes (VDSP_DDR_QUOTA" in over[1][1], over
    for bad in ("12X", "0%", "101%", "1.5M"):
        assert alloc(4096, VDSP_DDR_QUOTA=bad)[0][0] == errors.SysInvalidArgument.code, bad
        assert alloc(4096, VDSP_DDR_RESERVE=bad)[0][0] == errors.SysInvalidArgument.code, bad
    assert alloc(4096, VDSP_DDR_QUOTA=" 2 GiB ", VDSP_DDR_RESERVE="12.5 %")[0][0] == 0
    assert alloc(0)[0][0] == errors.SysInvalidArgument.code
    lock = ddr / f"vdsp-reserve-{os.geteuid()}.lock"
    elsewhere = tmp_path / "not-the-lock"
    elsewhere.write_text("keep")
    lock.symlink_to(elsewhere)
    done = subprocess.run([str(built), "alloc", "4096"], env=clean_env(VDSP_SHM_DIR=str(ddr)), capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.startswith("alloc0 0 "), done.stdout
    assert elsewhere.read_text() == "keep" and not lock.exists() and not lock.is_symlink()
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)      # another process of ours holds it: waited for, then
    try:                                                    # the allocation goes on without it
        fcntl.flock(fd, fcntl.LOCK_EX)
        done = subprocess.run([str(built), "alloc", "4096"], env=clean_env(VDSP_SHM_DIR=str(ddr)),
                              capture_output=True, text=True, timeout=60)
        assert done.stdout.startswith("alloc0 0 "), done.stdout
        assert lock.exists() and os.fstat(fd).st_ino == lock.stat().st_ino     # not removed by who did not hold it
    finally:
        os.close(fd)
        lock.unlink()
    assert not list(ddr.iterdir())


def test_valgrind_finds_no_error_and_no_leak(built, shared_soc):
    if shutil.which("valgrind") is None:
        privilege.require("no valgrind here (apt-get install valgrind)")
    memcheck = ["valgrind", "--error-exitcode=1", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect"]
    assert_flow(run([*memcheck, built, "flow"], timeout=300))
    no_soc = tempfile.mkdtemp(prefix="vns", dir="/tmp")
    try:        # the paths that fail clean up too
        assert run([*memcheck, built, "open"], env=clean_env(VDSP_RUNTIME_DIR=no_soc))["code"] == \
            str(errors.RelayUnavailable.code)
    finally:
        os.rmdir(no_soc)


@pytest.fixture(scope="module")
def sanitized(built):
    """(the check program built with the core's sources under ASan, UBSan and LeakSanitizer, the
    environment that runs it so); skipped (failed under VDSP_TEST_STRICT) where they cannot run."""
    with tempfile.TemporaryDirectory(prefix="vsan") as probe:
        why, options = _sanitizers_here(Path(probe))
    privilege.require(why)
    if "detect_leaks=1" not in options:
        privilege.require("LeakSanitizer cannot run here (it needs ptrace)")
    program = compile_check(built.parent, *SANITIZE, sources=capi_native.SOURCES)
    return program, clean_env(ASAN_OPTIONS=options, UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")


def test_address_undefined_and_leak_sanitizers_find_nothing(sanitized, shared_soc):
    program, env = sanitized
    assert_flow(run([program, "flow"], env=env, timeout=300))


def test_without_a_relay_the_code_says_to_start_one_at_once(built, tmp_path):
    """No runtime dir, one without a socket, a socket nobody listens on: HB_DSP_RELAY_UNAVAILABLE
    saying to run `vdsp up -d`, long before the connect timeout."""
    rt = Path(tempfile.mkdtemp(prefix="vns", dir="/tmp"))
    try:
        cases = {"no runtime dir": rt / "none", "no socket": rt}
        for case, where in cases.items():
            out = run([built, "open"], env=clean_env(VDSP_RUNTIME_DIR=str(where)), timeout=NO_SOC_WAIT_S)
            assert out["code"] == str(errors.RelayUnavailable.code), (case, out)
            assert "vdsp up -d" in out["message"], (case, out)
        import socket
        with socket.socket(socket.AF_UNIX) as stale:     # bound, then closed: a socket file nobody listens on
            stale.bind(str(rt / "relay.sock"))
        out = run([built, "open"], env=clean_env(VDSP_RUNTIME_DIR=str(rt)), timeout=NO_SOC_WAIT_S)
        assert out["code"] == str(errors.RelayUnavailable.code) and "nothing listens" in out["message"], out
        assert "vdsp up -d" in out["message"], out
    finally:
        shutil.rmtree(rt, ignore_errors=True)


def test_a_claim_the_relay_cannot_verify_is_refused(built, shared_soc, tmp_path):
    """The program's DDR directory is not the SoC's: the relay finds no lock of its owner there."""
    ddr = tmp_path / "ddr"
    ddr.mkdir()
    out = run([built, "open"], env=clean_env(VDSP_SHM_DIR=str(ddr)))
    assert out["code"] == str(errors.ClaimRefused.code), out
    assert "lock file missing" in out["message"], out
    assert not list(ddr.iterdir())      # it left nothing behind


# --- a server of our own making: what the client does with its answers ------------------------

def _ready(msg_id: int) -> list[list[bytes]]:
    return [[header.pack(Command.READY, msg_id),
             msgpack.packb({"name": "fake", "role": "relay", "protocol": 2, "heartbeat_ms": 500})]]


def _reply(command: int, body: bytes, *raw: bytes, version: int = 2):
    return lambda msg_id: [[header.pack(command, msg_id, version=version), body, *raw]]


def _error(code: int, message: str):
    return _reply(Command.ERROR, msgpack.packb({"code": code, "message": message}))


ANSWERS = {     # case -> (answers to successive HELLOs, the code the program must print, words of its message)
    "not msgpack": ([_reply(Command.READY, b"\xc1")], errors.ProtocolError.code, ""),
    "READY without protocol": ([_reply(Command.READY, msgpack.packb({"name": "x", "role": "y"}))],
                               errors.ProtocolError.code, "lacks required field 'protocol'"),
    "READY with a bool protocol": ([_reply(Command.READY, msgpack.packb({"name": "x", "role": "y", "protocol": True}))],
                                   errors.ProtocolError.code, "'protocol' must be int"),
    "one frame": ([lambda i: [[header.pack(Command.READY, i)]]], errors.ProtocolError.code, "one frame"),
    "65 frames": ([_reply(Command.READY, msgpack.packb({"name": "x", "role": "y", "protocol": 2}), *[b"r"] * 63)],
                  errors.MessageTooLarge.code, ""),
    "version 1": ([_reply(Command.READY, b"\x80", version=1)], errors.BadMagic.code, ""),
    "ERROR without code": ([_reply(Command.ERROR, msgpack.packb({"message": "m"}))], errors.ProtocolError.code,
                           "lacks required field 'code'"),
    "ERROR with a positive code": ([_error(7, "odd")], errors.RunTaskFailed.code, "odd"),
    "claim refused": ([_error(errors.ClaimRefused.code, "process 1 does not hold it")], errors.ClaimRefused.code,
                      "does not hold it"),
    "a stray reply first": ([lambda i: [*_ready(i + 100), *_ready(i)]], 0, ""),
    "busy, busy, ready": ([_error(errors.CoreBusy.code, "busy"), _error(errors.CoreBusy.code, "busy"), _ready], 0, ""),
}


def converse(program: Path, env: dict, answers: list) -> tuple[dict[str, str], str, list[dict], int]:
    """Run ``program open`` against a ROUTER of ours that answers its HELLOs with ``answers`` in
    turn (the last again); (its "key value" lines, its stderr, the HELLO bodies, its pid)."""
    where = Path(tempfile.mkdtemp(prefix="vfk", dir="/tmp"))
    ctx = zmq.Context()
    server = ctx.socket(zmq.ROUTER)
    server.linger = 0
    server.bind(f"ipc://{where}/relay.sock")
    ddr = where / "ddr"
    ddr.mkdir()
    env = dict(env, VDSP_RELAY_ENDPOINT=f"ipc://{where}/relay.sock", VDSP_SHM_DIR=str(ddr))
    proc = subprocess.Popen([str(program), "open"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hellos = []
    try:
        while proc.poll() is None:
            if not server.poll(50):
                continue
            ident, head, body, *_ = server.recv_multipart()
            got = header.Header.parse(head)
            if got.command == Command.HELLO:
                hellos.append(msgpack.unpackb(body))
                for message in answers[min(len(hellos), len(answers)) - 1](got.msg_id):
                    server.send_multipart([ident, *message])
        stdout, stderr = proc.communicate(timeout=60)
        assert not list(ddr.iterdir()), "it left DDR files behind"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        server.close(0)
        ctx.term()
        shutil.rmtree(where, ignore_errors=True)
    return dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line), stderr, hellos, proc.pid


def check_answers(program: Path, env: dict, case: str) -> None:
    answers, code, words = ANSWERS[case]
    out, stderr, hellos, pid = converse(program, env, answers)
    assert out.get("code") == str(code) and not stderr, (out, stderr[-4000:])
    assert words in out.get("message", ""), out
    first = hellos[0]
    assert first["role"] == "client" and first["pid"] == pid and first["name"] == f"pid{pid}", first
    assert 1 <= first["owner"] < 1 << 22 and first["lock_fd"] >= 3, first
    assert len(hellos) == (3 if case.startswith("busy") else 1), hellos


@pytest.mark.parametrize("case", sorted(ANSWERS))
def test_a_servers_answers_to_hello(built, case):
    check_answers(built, clean_env(), case)


@pytest.mark.parametrize("case", sorted(ANSWERS))
def test_a_servers_answers_to_hello_under_the_sanitizers(sanitized, case):
    check_answers(*sanitized, case)


def test_the_built_directory_runs_where_it_is_moved_and_names_no_checkout(built, shared_soc, tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.copytree(built.parent, moved, ignore=shutil.ignore_patterns("check_asan"))
    for binary in (moved / capi_native.LIBRARY, moved / "check"):
        assert str(ROOT).encode() not in binary.read_bytes(), binary
        assert b"/.venv/" not in binary.read_bytes(), binary
    assert_flow(run([moved / "check", "flow"]))

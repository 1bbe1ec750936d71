"""Lifecycle input never kills a core: bad firmware names, malformed or oversized images,
zip bombs and symlinks are error replies, and the core stays alive, offline and answering.

Each case once killed the core process (or made the relay declare it dead): a 256-byte
firmware name (OSError: File name too long), a header without ``version`` (KeyError), a
1 GiB image read and hashed in the core's event loop; a 524 KB zip bomb unpacked to
512 MiB and booted; a symlink in the firmware directory was followed.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import struct
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from arm_side import CORE_1, Soc, errors, opids
from dsp_side import fw_image, signing
from protocol.constants import HEARTBEAT_INTERVAL_MS
from vdsp_board.processes import rundir
from tests.conftest import wait_until
from tests.live import bytes_read

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
VDSP = [sys.executable, "-m", "vdsp_sim.cli"]
RP2 = "/sys/class/remoteproc/remoteproc2"
CORE = "vdsp1"
EINVAL, ENOENT = -22, -2
MiB = 1 << 20
FW_SRC = b'VERSION = "1.0.0"\n\n\ndef register(registry):\n    pass\n'


# --- images built by hand, in the image module's own format -------------------------------

def pack(header, payload: bytes) -> bytes:
    """An image of ``header`` and ``payload`` signed with the SoC's own key (VDSP_RUNTIME_DIR's),
    so the checks after the signature's are the ones tested."""
    blob = json.dumps(header).encode()
    signed = fw_image.MAGIC + struct.pack("<I", len(blob)) + blob
    seal = signing.sign(signed, signing.install_key())
    return signed + struct.pack("<I", len(seal)) + seal + payload


def sealed(header: dict, payload: bytes) -> dict:
    """``header`` with the payload's true size and checksum."""
    return {**header, "payload_size": len(payload), "payload_sha256": hashlib.sha256(payload).hexdigest()}


def zip_of(members) -> bytes:
    """members: (ZipInfo or name, bytes) pairs."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in members:
            zf.writestr(info, data)
    return buf.getvalue()


@pytest.fixture(scope="module")
def base(shared_soc, tmp_path_factory) -> dict:
    """The header of a valid tiny firmware (framework operators only)."""
    tree = tmp_path_factory.mktemp("src") / "tiny"
    tree.mkdir()
    (tree / "firmware.py").write_bytes(FW_SRC)
    return fw_image.build(tree, tmp_path_factory.mktemp("out") / "tiny")


@pytest.fixture
def fwdir(shared_soc) -> Path:
    return rundir.firmware_dir(shared_soc.rt)


@pytest.fixture
def soc(shared_soc):
    """A relay client; vdsp1 is stopped first and must be running again (its own image) at the end."""
    with Soc() as s:
        if s.control(CORE, "state") != "offline":
            s.control(CORE, "state", "stop")
        yield s
    rundir.firmware_path_file(shared_soc.rt).unlink(missing_ok=True)


def core_status(live) -> dict:
    """vdsp1's own answer to QUERY (direct mode: from the core process, not the relay)."""
    with Soc(mode="direct", connect_timeout_s=5) as direct:
        return next(c for c in direct.query("cores")["cores"] if c["name"] == CORE)


def alive_offline_then_boots(live, soc) -> None:
    """The core process survived, answers QUERY, is offline, and a valid start works."""
    assert live.sup.procs[CORE].poll() is None, "the core process died"
    status = core_status(live)
    assert status["pid"] == live.pid(CORE) and status["state"] == "offline"
    assert soc.control(CORE, "state") == "offline"
    soc.control(CORE, "firmware", CORE)
    assert soc.control(CORE, "state", "start") == "running"
    assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": CORE}


def refused_start(live, soc, name: str, exc_cls=errors.RemoteprocInvalid, code: int = EINVAL,
                  within_s: float = 5.0) -> errors.VdspError:
    soc.control(CORE, "firmware", name)
    t0 = time.monotonic()
    with pytest.raises(exc_cls) as info:
        soc.control(CORE, "state", "start", timeout_ms=15000)
    assert info.value.code == code, info.value
    assert time.monotonic() - t0 < within_s
    alive_offline_then_boots(live, soc)
    return info.value


# --- 1. firmware names ----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["x" * 256, "\u00e9" * 128, "a/b", "/abs", "a\x00b", ".", "..", "", "\n",
                                  "a\nb", "tab\there", "del\x7f"],
                         ids=["256-bytes", "256-utf8-bytes", "slash", "absolute", "nul", "dot", "dotdot", "empty",
                              "newline-only", "inner-newline", "tab", "del"])
def test_invalid_firmware_names_are_einval_at_the_write(shared_soc, soc, name):
    with pytest.raises(errors.RemoteprocInvalid) as info:
        soc.control(CORE, "firmware", name)
    assert info.value.code == EINVAL
    assert soc.control(CORE, "firmware") == CORE          # the refused write changed nothing
    soc.control(CORE, "firmware", "missing")
    refused_start(shared_soc, soc, "missing", errors.RemoteprocNoEnt, ENOENT)


def test_a_255_byte_name_is_valid_and_boots_even_behind_a_long_search_path(shared_soc, soc, fwdir):
    name = "v" * 255
    assert soc.control(CORE, "firmware", name + "\n") == name
    with pytest.raises(errors.RemoteprocNoEnt):
        soc.control(CORE, "state", "start")
    assert shared_soc.sup.procs[CORE].poll() is None
    (fwdir / name).write_bytes((fwdir / CORE).read_bytes())
    # a custom directory whose path + name exceed PATH_MAX: it cannot hold the image (ENAMETOOLONG),
    # so the search goes on to the default directory, as for a missing one
    rundir.firmware_path_file(shared_soc.rt).write_text("/" + "/".join(["d" * 200] * 20) + "/")
    assert soc.control(CORE, "state", "start") == "running"
    soc.control(CORE, "state", "stop")
    (fwdir / name).unlink()
    alive_offline_then_boots(shared_soc, soc)


def test_a_core_started_with_a_too_long_firmware_name_stays_up_offline(runtime_env):
    """The name from ``vdsp core --firmware`` is not checked by a write: the boot refuses it."""
    from tests.live import LiveSoc
    live = LiveSoc(runtime_env, relay=False, core_args=["--firmware", "y" * 300])
    live.start(wait=False)                        # the cores stay offline: nothing to wait for
    try:
        def statuses():
            try:
                with Soc(mode="direct", connect_timeout_s=2) as direct:
                    cores = direct.query("cores")["cores"]
            except errors.VdspError:
                return None
            return cores if all("pid" in c for c in cores) else None
        cores = wait_until(statuses, 60, 0.2)     # the start timeout: cores starved of CPU answer late
        assert live.sup.dead() == []
        assert cores and [c["state"] for c in cores] == ["offline", "offline"]
        with Soc(mode="direct", connect_timeout_s=5) as direct:
            for name in ("vdsp0", "vdsp1"):
                direct.control(name, "firmware", name)
                assert direct.control(name, "state", "start") == "running"
        assert "is not valid" in (runtime_env / "dmesg").read_text()
    finally:
        live.stop_and_check()


def test_sysfs_echo_of_a_too_long_name_is_invalid_argument(shared_soc, soc):
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(shared_soc.rt), PYTHONPATH=str(ROOT))

    def sh(*argv):
        return subprocess.run([*VDSP, *argv], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    res = sh("sysfs", "echo", "n" * 300, f"{RP2}/firmware")
    board, *reason = res.stderr.strip().splitlines()      # the board's line, then the core's reason
    assert res.returncode == 1 and board == "sh: echo: write error: Invalid argument", res.stderr
    assert reason and "over the limit of 255 bytes for a file name" in reason[-1], res.stderr
    assert sh("sysfs", "cat", f"{RP2}/firmware").stdout == f"{CORE}\n"
    assert sh("sysfs", "echo", "start", f"{RP2}/state").returncode == 0
    assert sh("sysfs", "cat", f"{RP2}/state").stdout == "running\n"
    soc.control(CORE, "state", "stop")
    alive_offline_then_boots(shared_soc, soc)


# --- 2. header schema -----------------------------------------------------------------------

def _drop(key):
    return lambda h: {k: v for k, v in h.items() if k != key}


def _set(key, value):
    return lambda h: {**h, key: value}


HEADERS = {
    "no version": (_drop("version"), "version"),
    "version not a string": (_set("version", 1), "version"),
    "no name": (_drop("name"), "name"),
    "name not a string": (_set("name", ["x"]), "name"),
    "operators not a list": (_set("operators", "ping"), "operators"),
    "operator without id": (lambda h: {**h, "operators": [{k: v for k, v in o.items() if k != "id"}
                                                          for o in h["operators"]]}, "id"),
    "payload_size a string": (lambda h: {**h, "payload_size": str(h["payload_size"])}, "payload_size"),
    "payload_size a bool": (_set("payload_size", True), "payload_size"),
    "no payload_sha256": (_drop("payload_sha256"), "payload_sha256"),
    "no built": (_drop("built"), "built"),
    "header a list": (lambda h: [h], "object"),
}


@pytest.mark.parametrize("damage", list(HEADERS))
def test_malformed_headers_are_einval_and_name_the_field(shared_soc, soc, fwdir, base, damage):
    payload = zip_of([("firmware.py", FW_SRC)])
    mutate, field = HEADERS[damage]
    (fwdir / "malformed").write_bytes(pack(mutate(sealed(base, payload)), payload))
    exc = refused_start(shared_soc, soc, "malformed")
    assert field in exc.message


# --- 3. image size and heartbeats -----------------------------------------------------------

def test_a_1_gib_image_is_refused_by_its_size_without_reading_it(shared_soc, soc, fwdir, base):
    size = 1 << 30
    header = {**base, "payload_sha256": "0" * 64}
    for _ in range(2):   # the header's length depends on payload_size's digits
        header["payload_size"] = size - len(pack(header, b""))
    path = fwdir / "huge"
    with open(path, "wb") as f:
        f.write(pack(header, b""))
        f.truncate(size)                 # sparse: no disk space, same size as seen by fstat
    try:
        exc = refused_start(shared_soc, soc, "huge", within_s=1.5)
        assert "limit" in exc.message and str(size) in exc.message
    finally:
        path.unlink()


MAX_IMAGE = getattr(fw_image, "MAX_IMAGE", 64 * MiB)


def limit_sized_image(base: dict) -> bytes:
    """A valid image of exactly MAX_IMAGE bytes (a stored, incompressible-sized blob)."""
    limit = MAX_IMAGE
    blob_len = limit - 64 * 1024
    for _ in range(3):
        payload = zip_of([("firmware.py", FW_SRC), (zipfile.ZipInfo("blob.bin"), bytes(blob_len))])
        data = pack(sealed(base, payload), payload)
        blob_len += limit - len(data)
    assert len(data) == limit
    return data


def test_a_limit_sized_image_boots_while_the_core_keeps_answering(shared_soc, soc, fwdir, base):
    """The core reads only the image's bounded header; the firmware process reads and hashes the payload,
    so the core answers QUERYs all through the load (each within a heartbeat interval, a loaded host's
    bound) and the kernel counts it reading kilobytes, not the image (a payload hashed in the core's
    loop reads all of it)."""
    (fwdir / "big").write_bytes(limit_sized_image(base))
    soc.control(CORE, "firmware", "big")
    outcome = {}

    def start():
        with Soc() as other:
            try:
                outcome["state"] = other.control(CORE, "state", "start", timeout_ms=30000)
            except errors.VdspError as exc:
                outcome["error"] = exc
    worker = threading.Thread(target=start)
    latencies, loading = [], 0
    with Soc(mode="direct", connect_timeout_s=5) as direct:
        direct.query("cores")   # the session's HELLOs, before the clock: only the boot is timed
        read_before = bytes_read(shared_soc.pid(CORE))
        worker.start()
        while worker.is_alive() or len(latencies) < 5:
            t0 = time.monotonic()
            status = next(c for c in direct.query("cores")["cores"] if c["name"] == CORE)
            latencies.append(time.monotonic() - t0)
            assert status["pid"] == shared_soc.pid(CORE)
            loading += status["fw_pid"] is not None and status["state"] == "offline"
            time.sleep(0.01)
    worker.join()
    read = bytes_read(shared_soc.pid(CORE)) - read_before
    print(f"vdsp1 answered {len(latencies)} QUERYs during the boot ({loading} while its firmware loaded), "
          f"the slowest in {max(latencies) * 1000:.1f} ms; it read {read} bytes")
    assert outcome == {"state": "running"}
    assert loading >= 1, "no QUERY was answered while the firmware process loaded the image"
    assert read < MiB, f"the core process read {read} bytes during the boot of a {MAX_IMAGE}-byte image"
    assert max(latencies) < HEARTBEAT_INTERVAL_MS / 1000, f"QUERY waited {max(latencies):.3f} s during the boot"
    assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": CORE}
    soc.control(CORE, "state", "stop")
    (fwdir / "big").unlink()
    alive_offline_then_boots(shared_soc, soc)


# --- 4. the payload: zip bombs, member kinds ------------------------------------------------

def bomb(unpacked: int) -> bytes:
    """firmware.py + a member of ``unpacked`` zero bytes, deflated to ~1/1000."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("firmware.py", FW_SRC)
        chunk = bytes(MiB)
        info = zipfile.ZipInfo("bomb.py")
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w") as member:
            for _ in range(unpacked // MiB):
                member.write(chunk)
    return buf.getvalue()


def symlink_member() -> bytes:
    link = zipfile.ZipInfo("link.py")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    return zip_of([("firmware.py", FW_SRC), (link, b"/etc/passwd")])


PAYLOADS = {
    "zip bomb": (lambda: bomb(128 * MiB), "unpack"),
    "too many members": (lambda: zip_of([("firmware.py", FW_SRC)] + [(f"m{i}.py", b"") for i in range(2000)]),
                         "members"),
    "symlink member": (symlink_member, "link.py"),
    "directory member": (lambda: zip_of([("firmware.py", FW_SRC), ("pkg/", b"")]), "pkg/"),
    "parent path": (lambda: zip_of([("firmware.py", FW_SRC), ("../evil.py", b"")]), "evil.py"),
}


@pytest.mark.parametrize("kind", list(PAYLOADS))
def test_bad_payloads_are_refused_before_anything_is_unpacked(shared_soc, soc, fwdir, base, kind):
    make, word = PAYLOADS[kind]
    payload = make()
    (fwdir / "payload").write_bytes(pack(sealed(base, payload), payload))
    exc = refused_start(shared_soc, soc, "payload")
    assert word in exc.message
    assert not (shared_soc.rt / f"{CORE}.fw" / "bomb.py").exists()


# --- symlinks and special files in the firmware directory -----------------------------------

def test_a_symlinked_image_is_refused(shared_soc, soc, fwdir):
    (fwdir / "linked").symlink_to(fwdir / CORE)
    try:
        exc = refused_start(shared_soc, soc, "linked")
        assert "symbolic link" in exc.message
    finally:
        (fwdir / "linked").unlink()


def test_a_fifo_or_directory_in_place_of_an_image_is_refused_without_hanging(shared_soc, soc, fwdir):
    os.mkfifo(fwdir / "fifo")
    (fwdir / "adir").mkdir()
    try:
        for name in ("fifo", "adir"):
            if soc.control(CORE, "state") == "running":
                soc.control(CORE, "state", "stop")
            exc = refused_start(shared_soc, soc, name, within_s=2.0)
            assert "regular file" in exc.message
    finally:
        (fwdir / "fifo").unlink()
        (fwdir / "adir").rmdir()

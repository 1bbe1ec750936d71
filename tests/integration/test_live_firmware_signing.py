"""A live core boots only firmware signed by a trusted key, and runs nothing of any other.

Each refused image (unsigned, signed by an unknown key, header or payload changed after
signing, a signed manifest that lies about the code) is an EINVAL reply naming the reason,
a dmesg line saying it, and a core that stays alive, offline and bootable. The image's
firmware.py writes a marker file when imported: for an image refused on its signature or
payload the marker never appears, and for a lying manifest no operator ever runs.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from arm_side import CORE_1, Soc, errors
from dsp_side import fw_image, signing
from vdsp_sim.soc.stock import install_stock
from vdsp_board.processes import rundir
from tests.live import LiveSoc

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
VDSP = [sys.executable, "-m", "vdsp_sim.cli"]
CORE = "vdsp1"
EINVAL = -22
TOUCH = 0x1400

SOURCE = '''import pathlib
pathlib.Path({imported!r}).write_text("imported")
VERSION = "1.0.0"


def register(registry):
    @registry.operator(0x1400, "touch", params={{"n": {{"type": "int", "default": 1}}}})
    def touch(ctx, inputs, outputs, n):
        """Leave a mark that it ran."""
        pathlib.Path({ran!r}).write_text("ran")
        return {{"n": n}}
'''


class Marked:
    """A source tree whose firmware.py leaves ``imported`` when imported and whose operator
    0x1400 leaves ``ran`` when it runs."""

    def __init__(self, tmp: Path) -> None:
        self.tree, self.imported, self.ran = tmp / "marked", tmp / "imported.marker", tmp / "ran.marker"
        self.tree.mkdir()
        (self.tree / "firmware.py").write_text(SOURCE.format(imported=str(self.imported), ran=str(self.ran)))

    def build(self, out: Path, **kw) -> bytes:
        fw_image.build(self.tree, out, **kw)
        self.imported.unlink()           # the build imports the tree: only what follows counts
        return out.read_bytes()


@pytest.fixture
def marked(tmp_path) -> Marked:
    return Marked(tmp_path)


@pytest.fixture
def fwdir(shared_soc) -> Path:
    return rundir.firmware_dir(shared_soc.rt)


@pytest.fixture
def soc(shared_soc):
    """A relay client; vdsp1 stopped first, and booting its own image again at the end."""
    with Soc() as s:
        if s.control(CORE, "state") != "offline":
            s.control(CORE, "state", "stop")
        yield s
        if s.control(CORE, "state") != "offline":
            s.control(CORE, "state", "stop")
        s.control(CORE, "firmware", CORE)
        assert s.control(CORE, "state", "start") == "running"


def header_and_payload(data: bytes) -> tuple[dict, bytes]:
    hlen = struct.unpack_from("<I", data, 8)[0]
    slen = struct.unpack_from("<I", data, 12 + hlen)[0]
    return json.loads(data[12:12 + hlen]), data[12 + hlen + 4 + slen:]


def signed_image(header: dict, payload: bytes, key) -> bytes:
    blob = json.dumps(header, sort_keys=True).encode()
    signed = fw_image.MAGIC + struct.pack("<I", len(blob)) + blob
    seal = signing.sign(signed, key)
    return signed + struct.pack("<I", len(seal)) + seal + payload


def dmesg(live) -> str:
    return (live.rt / "dmesg").read_text()


def alive_and_offline(live, soc) -> None:
    assert live.sup.procs[CORE].poll() is None, "the core process died"
    with Soc(mode="direct", connect_timeout_s=5) as direct:
        status = next(c for c in direct.query("cores")["cores"] if c["name"] == CORE)
    assert status["pid"] == live.pid(CORE) and status["state"] == "offline" and status["fw_pid"] is None
    assert soc.control(CORE, "state") == "offline"
    with pytest.raises(errors.CoreOffline):
        soc.rpc(TOUCH, core=CORE_1).wait(2000)


def refused(live, soc, name: str, *words: str) -> errors.VdspError:
    """Start vdsp1 on image ``name``: EINVAL naming ``words``, in dmesg too; alive and offline."""
    lines = len(dmesg(live).splitlines())
    soc.control(CORE, "firmware", name)
    with pytest.raises(errors.RemoteprocInvalid) as info:
        soc.control(CORE, "state", "start", timeout_ms=30000)
    assert info.value.code == EINVAL
    new = "\n".join(dmesg(live).splitlines()[lines:])
    for word in words:
        assert word in info.value.message, info.value.message
        assert word in new, new
    assert f"firmware {name} is not valid" in new and "is now up" not in new
    alive_and_offline(live, soc)
    return info.value


# --- refused images -------------------------------------------------------------------------

def test_an_unsigned_image_is_refused_and_none_of_it_runs(shared_soc, soc, fwdir, marked):
    marked.build(fwdir / "unsigned", key=None)
    refused(shared_soc, soc, "unsigned", "is unsigned", "--allow-unsigned")
    assert not marked.imported.exists()


def test_an_image_signed_by_an_unknown_key_is_refused_and_none_of_it_runs(shared_soc, soc, fwdir, marked):
    stranger = Ed25519PrivateKey.generate()
    marked.build(fwdir / "stranger", key=stranger)
    refused(shared_soc, soc, "stranger", "unknown key", signing.key_id(signing.public_raw(stranger)))
    assert not marked.imported.exists()


def test_an_image_built_under_another_runtime_directory_is_refused(shared_soc, soc, fwdir, marked):
    """The tutorial: `vdsp firmware build` signs with the key of the runtime directory it runs under;
    a SoC under another runtime directory does not trust that key."""
    from vdsp_sim.soc.private_soc import fresh_runtime_dir
    other = fresh_runtime_dir()
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("VDSP_KEYS_DIR", "VDSP_RUNTIME_DIR")}
        env.update(VDSP_RUNTIME_DIR=str(other), PYTHONPATH=str(ROOT))
        for argv in (["keygen"], ["build", str(marked.tree), "-o", str(fwdir / "elsewhere")]):
            out = subprocess.run([*VDSP, "firmware", *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=120)
            assert out.returncode == 0, out.stdout + out.stderr
        marked.imported.unlink()
        theirs = signing.key_id(signing.public_raw(signing.install_key(other / "keys")))
        refused(shared_soc, soc, "elsewhere", "unknown key", theirs)
        assert not marked.imported.exists()
    finally:
        shutil.rmtree(other, ignore_errors=True)


def test_a_header_changed_after_signing_is_a_bad_signature(shared_soc, soc, fwdir, marked):
    data = marked.build(fwdir / "edited")
    header, payload = header_and_payload(data)
    # the operator table edited in place, the seal kept: what an attacker with no key can do
    edited = data.replace(b'"name": "touch"', b'"name": "tauch"', 1)
    assert edited != data and len(edited) == len(data)
    (fwdir / "edited").write_bytes(edited)
    refused(shared_soc, soc, "edited", "bad signature")
    assert not marked.imported.exists()


def test_a_payload_changed_after_signing_is_refused_before_it_is_unpacked(shared_soc, soc, fwdir, marked):
    data = bytearray(marked.build(fwdir / "patched"))
    header, payload = header_and_payload(bytes(data))
    data[len(data) - len(payload) + 40] ^= 1          # a byte of the deflated firmware.py
    (fwdir / "patched").write_bytes(bytes(data))
    refused(shared_soc, soc, "patched", "checksum mismatch")
    assert not marked.imported.exists()
    assert not (shared_soc.rt / f"{CORE}.fw" / "firmware.py").exists()


@pytest.mark.parametrize("lie", ["hides an operator", "loosens a parameter"])
def test_a_signed_manifest_that_does_not_match_the_code_boots_nothing(shared_soc, soc, fwdir, marked, lie):
    """Signed by a trusted key, but the manifest lies about the code: the firmware refuses to
    serve once the code has registered, and no operator ever runs."""
    header, payload = header_and_payload(marked.build(fwdir / "liar"))
    touch = next(o for o in header["operators"] if o["id"] == TOUCH)
    if lie == "hides an operator":
        header["operators"].remove(touch)
    else:    # same id and name: what the loader compared before
        touch["params"] = {"n": {"type": "int", "default": 1, "min": 0, "max": 3}}
    (fwdir / "liar").write_bytes(signed_image(header, payload, signing.install_key()))
    refused(shared_soc, soc, "liar", "does not match the signed manifest", "0x1400")
    with pytest.raises(errors.CoreOffline):
        soc.rpc(TOUCH, params={"n": 2}, core=CORE_1).wait(2000)
    assert not marked.ran.exists()


# --- trust, untrust, and the images that are booted -----------------------------------------

def test_trusting_a_key_lets_its_images_boot_and_untrusting_it_stops_them(shared_soc, soc, fwdir, marked, tmp_path):
    ci = Ed25519PrivateKey.generate()
    (tmp_path / "ci.pub").write_bytes(ci.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                                   serialization.PublicFormat.OpenSSH))
    marked.build(fwdir / "from-ci", key=ci)
    refused(shared_soc, soc, "from-ci", "unknown key")
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(shared_soc.rt), PYTHONPATH=str(ROOT))

    def vdsp(*argv):
        return subprocess.run([*VDSP, *argv], env=env, capture_output=True, text=True, timeout=60)
    res = vdsp("firmware", "trust", str(tmp_path / "ci.pub"))
    assert res.returncode == 0 and "trusted ed25519:" in res.stdout, res.stderr
    assert "ci " in vdsp("firmware", "trusted").stdout
    assert soc.control(CORE, "state", "start") == "running"
    assert marked.imported.exists()
    assert soc.rpc(TOUCH, params={"n": 5}, core=CORE_1).wait(5000) == {"n": 5} and marked.ran.exists()
    status = next(c for c in soc.query("cores")["cores"] if c["name"] == CORE)
    assert status["firmware_signer"].startswith("ci (ed25519:") and status["allow_unsigned"] is False
    assert "signed by ci (ed25519:" in dmesg(shared_soc)
    info = vdsp("firmware", "info", str(fwdir / "from-ci"))
    assert "signed:   ci (ed25519:" in info.stdout and "trusted here" in info.stdout
    soc.control(CORE, "state", "stop")
    assert vdsp("firmware", "untrust", "ci").returncode == 0
    refused(shared_soc, soc, "from-ci", "unknown key")
    assert "REFUSED" in vdsp("firmware", "info", str(fwdir / "from-ci")).stdout


def test_the_stock_images_are_signed_by_this_install(shared_soc, soc):
    for core in soc.query("cores")["cores"]:
        if core["name"] != CORE:
            assert core["firmware_signer"].startswith(f"{signing.INSTALL_NAME} (ed25519:"), core
            assert core["allow_unsigned"] is False
    key = shared_soc.rt / "keys" / signing.SIGNING_KEY
    assert key.exists() and (key.stat().st_mode & 0o777) == 0o600


# --- install_stock never keeps an image the cores would refuse --------------------------------

def test_install_stock_replaces_images_the_cores_would_refuse(runtime_env, marked):
    fwdir = rundir.firmware_dir(runtime_env)
    assert [(p.name, why) for p, why in install_stock(runtime_env)] == \
        [("vdsp0", "missing"), ("vdsp1", "missing")]
    assert install_stock(runtime_env) == []                    # trusted images are kept
    marked.build(fwdir / "vdsp0", key=None)                                  # unsigned
    marked.build(fwdir / "vdsp1", key=Ed25519PrivateKey.generate())          # an unknown key
    replaced = dict((p.name, why) for p, why in install_stock(runtime_env))
    assert "unsigned" in replaced["vdsp0"] and "unknown key" in replaced["vdsp1"], replaced
    for name in ("vdsp0", "vdsp1"):
        header, _, signer = fw_image.read(fwdir / name)
        assert header["name"] == "stock" and signer.name == signing.INSTALL_NAME
    marked.build(fwdir / "vdsp1", key=None)
    assert install_stock(runtime_env, allow_unsigned=True) == []   # the cores' own policy
    # vdsp up does the same before it starts the cores
    live = LiveSoc(runtime_env)
    live.start()
    try:
        cores = {c["name"]: c for c in live.status["cores"]}
        assert cores["vdsp1"]["firmware_signer"].startswith("install (") and cores["vdsp1"]["state"] == "running"
        assert not marked.imported.exists()
    finally:
        live.stop_and_check()


def test_install_stock_rebuilds_a_stock_image_an_earlier_version_built(runtime_env, marked):
    """After an upgrade, the stock image of the old sources (this install's key, named "stock")
    is built again from today's; an image of another name, the user's, is kept."""
    fwdir = rundir.firmware_dir(runtime_env)
    install_stock(runtime_env)
    stock_ops = fw_image.read(fwdir / "vdsp0")[0]["operators"]
    marked.build(fwdir / "vdsp0", name="stock")        # what an earlier vdsp-sim's stock image is to it
    mine = marked.build(fwdir / "vdsp1", name="mine")
    replaced = [(p.name, why) for p, why in install_stock(runtime_env)]
    assert [name for name, _ in replaced] == ["vdsp0"] and "other sources" in replaced[0][1], replaced
    header, _, signer = fw_image.read(fwdir / "vdsp0")
    assert header["name"] == "stock" and header["operators"] == stock_ops and signer.name == signing.INSTALL_NAME
    assert (fwdir / "vdsp1").read_bytes() == mine
    assert install_stock(runtime_env) == []                    # today's stock image is kept


# --- development: --allow-unsigned -----------------------------------------------------------

def test_allow_unsigned_boots_an_unsigned_image_and_says_so(runtime_env, marked):
    live = LiveSoc(runtime_env, core_args=["--allow-unsigned"])
    live.start()
    try:
        fwdir = rundir.firmware_dir(runtime_env)
        marked.build(fwdir / "dev", key=None)
        marked.build(fwdir / "stranger", key=Ed25519PrivateKey.generate())
        env = dict(os.environ, VDSP_RUNTIME_DIR=str(runtime_env), PYTHONPATH=str(ROOT))
        with Soc() as soc:
            soc.control(CORE, "state", "stop")
            soc.control(CORE, "firmware", "stranger")                        # still refused: a signature
            with pytest.raises(errors.RemoteprocInvalid, match="unknown key"):   # that does not verify
                soc.control(CORE, "state", "start")
            soc.control(CORE, "firmware", "dev")
            assert soc.control(CORE, "state", "start") == "running"
            assert soc.rpc(TOUCH, core=CORE_1).wait(5000) == {"n": 1} and marked.ran.exists()
        status = json.loads(subprocess.run([*VDSP, "status", "--json"], env=env, capture_output=True, text=True,
                                           timeout=60).stdout)
        cores = {c["name"]: c for c in status["cores"]}
        assert cores[CORE]["firmware_signer"] == "UNSIGNED" and cores[CORE]["allow_unsigned"] is True
        assert cores["vdsp0"]["firmware_signer"].startswith("install (") and cores["vdsp0"]["allow_unsigned"]
        text = subprocess.run([*VDSP, "status"], env=env, capture_output=True, text=True, timeout=60).stdout
        assert f"WARNING: {CORE} runs with --allow-unsigned" in text and f"{CORE} UNSIGNED" in text, text
        assert "booting UNSIGNED firmware dev: --allow-unsigned is set" in dmesg(live)
        assert "booting UNSIGNED firmware" in live.log(CORE) and "--allow-unsigned" in live.log(CORE)
    finally:
        live.stop_and_check()

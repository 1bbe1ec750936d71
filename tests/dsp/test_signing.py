"""dsp_side.signing and signed images, without a SoC: keys made with private modes, seals
that verify only with a trusted key over the exact signed bytes, unsafe key files refused,
and image code that never runs before its signature and manifest are checked."""
from __future__ import annotations

import json
import os
import stat
import struct
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from dsp_side import fw_image, signing
from protocol import errors

EINVAL = -22


@pytest.fixture
def keys(tmp_path, monkeypatch) -> Path:
    """A key directory (VDSP_KEYS_DIR) with this install's signing key, trusted."""
    directory = tmp_path / "keys"
    monkeypatch.setenv("VDSP_KEYS_DIR", str(directory))
    signing.keygen(directory)
    return directory


def write_key(path: Path, key, mode: int = 0o600) -> Path:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(mode)
    return path


def write_public(path: Path, key: Ed25519PrivateKey, fmt: str = "ssh") -> Path:
    enc, pub = ((serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH) if fmt == "ssh" else
                (serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    path.write_bytes(key.public_key().public_bytes(enc, pub))
    return path


def refused(fn, reason: str) -> signing.SignatureError:
    with pytest.raises(signing.SignatureError) as info:
        fn()
    assert info.value.reason == reason and info.value.code == EINVAL
    assert reason in info.value.message, info.value.message
    return info.value


# --- keys -------------------------------------------------------------------------------------

def test_keygen_makes_a_private_key_and_trusts_it_once(tmp_path):
    directory = tmp_path / "keys"
    path, made = signing.keygen(directory)
    assert made and path == directory / signing.SIGNING_KEY
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.lstat(directory).st_mode) == 0o700
    raw = signing.public_raw(signing.load_private(path))
    assert [(n, r) for n, r, _ in signing.trusted(directory)] == [(signing.INSTALL_NAME, raw)]
    assert (directory / signing.SIGNING_PUB).read_text().startswith("ssh-ed25519 ")
    before = path.read_bytes()
    assert signing.keygen(directory) == (path, False)          # kept, never replaced
    assert path.read_bytes() == before


def test_a_second_install_has_another_key(tmp_path):
    a = signing.public_raw(signing.load_private(signing.keygen(tmp_path / "a")[0]))
    b = signing.public_raw(signing.load_private(signing.keygen(tmp_path / "b")[0]))
    assert a != b


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_a_secret_key_readable_by_others_is_refused(tmp_path, mode):
    path = write_key(tmp_path / "k.pem", Ed25519PrivateKey.generate(), mode)
    with pytest.raises(errors.InvalidArgument, match="0600"):
        signing.load_private(path)


def test_key_files_are_not_followed_through_symlinks_and_are_bounded(tmp_path):
    real = write_key(tmp_path / "real.pem", Ed25519PrivateKey.generate())
    (tmp_path / "link.pem").symlink_to(real)
    with pytest.raises(errors.InvalidArgument, match="symbolic link"):
        signing.load_private(tmp_path / "link.pem")
    big = tmp_path / "big.pem"
    big.write_bytes(b"x" * (signing.MAX_KEY_FILE + 1))
    big.chmod(0o600)
    with pytest.raises(errors.InvalidArgument, match="limit"):
        signing.load_private(big)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(errors.InvalidArgument, match="regular file"):
        signing.load_private(tmp_path / "fifo")
    with pytest.raises(errors.FileNotFound):
        signing.load_private(tmp_path / "missing.pem")


def test_only_ed25519_keys_are_accepted(tmp_path):
    other = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(errors.InvalidArgument, match="not an Ed25519"):
        signing.load_private(write_key(tmp_path / "ec.pem", other))
    (tmp_path / "ec.pub").write_bytes(other.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(errors.InvalidArgument, match="not an Ed25519"):
        signing.trust(tmp_path / "keys", tmp_path / "ec.pub")
    (tmp_path / "junk.pub").write_text("hello\n")
    with pytest.raises(errors.InvalidArgument, match="not an Ed25519"):
        signing.trust(tmp_path / "keys", tmp_path / "junk.pub")


@pytest.mark.parametrize("fmt", ["ssh", "pem"])
def test_trust_and_untrust(tmp_path, fmt):
    directory = tmp_path / "keys"
    key = Ed25519PrivateKey.generate()
    path, kid = signing.trust(directory, write_public(tmp_path / "alice.pub", key, fmt))
    assert path == directory / signing.TRUSTED / "alice.pub" and kid == signing.key_id(signing.public_raw(key))
    assert signing.Trust.of(directory).keys == {signing.public_raw(key): "alice"}
    assert signing.untrust(directory, "alice") == path
    assert signing.untrust(directory, "alice") is None
    assert signing.Trust.of(directory).keys == {}
    for bad in ("a/b", ".hidden", "x" * 65, "a\nb"):
        with pytest.raises(errors.InvalidArgument):
            signing.trust(directory, tmp_path / "alice.pub", bad)


def test_unsafe_trusted_keys_are_never_trusted(tmp_path):
    directory = tmp_path / "keys"
    signing.keygen(directory)
    folder = directory / signing.TRUSTED
    elsewhere = write_public(tmp_path / "mallory.pub", Ed25519PrivateKey.generate())
    (folder / "mallory.pub").symlink_to(elsewhere)                 # a symlink: skipped
    writable = write_public(folder / "eve.pub", Ed25519PrivateKey.generate())
    writable.chmod(0o666)                                          # writable by others: skipped
    assert [n for n, _, _ in signing.trusted(directory)] == [signing.INSTALL_NAME]
    folder.chmod(0o777)                                            # a directory others can write: refused
    with pytest.raises(errors.InvalidArgument, match="writable by group or others"):
        signing.Trust.of(directory)


# --- seals ------------------------------------------------------------------------------------

def test_a_seal_verifies_only_with_a_trusted_key_over_the_same_bytes(tmp_path):
    key, stranger = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    trust = signing.Trust({signing.public_raw(key): "ci"})
    data = b"VDSPFW\x00\x02" + b"header bytes"
    seal = signing.sign(data, key)
    signer = signing.verify(data, seal, trust, "img")
    assert str(signer) == f"ci ({signing.key_id(signing.public_raw(key))})" and not signer.unsigned
    refused(lambda: signing.verify(data, b"", trust, "img"), signing.UNSIGNED)
    refused(lambda: signing.verify(data, signing.sign(data, stranger), trust, "img"), signing.UNKNOWN_KEY)
    refused(lambda: signing.verify(data + b"!", seal, trust, "img"), signing.BAD_SIGNATURE)
    forged = json.loads(seal)
    forged["sig"] = json.loads(signing.sign(data, stranger))["sig"]     # a trusted key, another's signature
    refused(lambda: signing.verify(data, json.dumps(forged).encode(), trust, "img"), signing.BAD_SIGNATURE)
    for junk in (b"{", b"[]", b'{"alg": "rsa"}', json.dumps({**json.loads(seal), "key": "AAAA"}).encode()):
        refused(lambda: signing.verify(data, junk, trust, "img"), signing.BAD_SIGNATURE)


def test_allow_unsigned_admits_only_unsigned_images():
    key = Ed25519PrivateKey.generate()
    dev = signing.Trust({}, allow_unsigned=True)
    assert signing.verify(b"x", b"", dev, "img").unsigned
    refused(lambda: signing.verify(b"x", signing.sign(b"x", key), dev, "img"), signing.UNKNOWN_KEY)


def test_the_firmware_process_trusts_exactly_the_key_the_core_verified():
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    trust = signing.Trust.only(signing.verify(b"x", signing.sign(b"x", key),
                                              signing.Trust({signing.public_raw(key): "k"}), "img").public_b64)
    assert not trust.allow_unsigned and list(trust.keys) == [signing.public_raw(key)]
    refused(lambda: signing.verify(b"x", signing.sign(b"x", other), trust, "img"), signing.UNKNOWN_KEY)
    refused(lambda: signing.verify(b"x", b"", trust, "img"), signing.UNSIGNED)
    with pytest.raises(errors.InvalidArgument):
        signing.Trust.only("not base64!")


# --- signed images ----------------------------------------------------------------------------

MARKED = '''import pathlib
pathlib.Path({marker!r}).write_text("imported")
VERSION = "1.0.0"


def register(registry):
    @registry.operator(0x1400, "touch", params={{"n": {{"type": "int", "default": 1}}}})
    def touch(ctx, inputs, outputs, n):
        """Say it ran."""
        return {{"n": n}}
'''


@pytest.fixture
def marked(tmp_path) -> tuple[Path, Path]:
    """(source tree whose firmware.py writes ``marker`` when imported, marker)."""
    tree, marker = tmp_path / "marked", tmp_path / "imported.marker"
    tree.mkdir()
    (tree / "firmware.py").write_text(MARKED.format(marker=str(marker)))
    return tree, marker


def built(tree: Path, marker: Path, out: Path, **kw) -> bytes:
    fw_image.build(tree, out, **kw)
    marker.unlink()                     # building imports the tree; only what follows counts
    return out.read_bytes()


def parts(data: bytes) -> tuple[dict, bytes]:
    hlen = struct.unpack_from("<I", data, 8)[0]
    slen = struct.unpack_from("<I", data, 12 + hlen)[0]
    return json.loads(data[12:12 + hlen]), data[12 + hlen + 4 + slen:]


def repack(header: dict, payload: bytes, key) -> bytes:
    blob = json.dumps(header, sort_keys=True).encode()
    signed = fw_image.MAGIC + struct.pack("<I", len(blob)) + blob
    seal = signing.sign(signed, key)
    return signed + struct.pack("<I", len(seal)) + seal + payload


def test_a_built_image_is_signed_by_this_install(keys, marked, tmp_path):
    tree, marker = marked
    built(tree, marker, tmp_path / "img")
    header, size, signer = fw_image.check(tmp_path / "img")
    assert signer.name == signing.INSTALL_NAME and size == (tmp_path / "img").stat().st_size
    header, registry = fw_image.load(tmp_path / "img", tmp_path / "work")
    assert marker.exists() and registry.get(0x1400).name == "touch"


def test_building_without_a_signing_key_says_how_to_make_one(tmp_path, monkeypatch, marked):
    monkeypatch.setenv("VDSP_KEYS_DIR", str(tmp_path / "empty"))
    with pytest.raises(errors.FileNotFound, match="vdsp firmware keygen"):
        fw_image.build(marked[0], tmp_path / "img")


@pytest.mark.parametrize("case", ["unsigned", "unknown key", "header changed", "seal of another image"])
def test_no_code_runs_from_an_image_whose_signature_is_refused(keys, marked, tmp_path, case):
    tree, marker = marked
    out, work = tmp_path / "img", tmp_path / "work"
    if case == "unsigned":
        data = built(tree, marker, out, key=None)
    elif case == "unknown key":
        data = built(tree, marker, out, key=Ed25519PrivateKey.generate())
    elif case == "header changed":      # the manifest edited after signing (same length)
        data = built(tree, marker, out).replace(b'"version": "1.0.0"', b'"version": "1.0.1"', 1)
    else:                               # a valid seal, moved onto another header
        data = built(tree, marker, out)
        other = built(tree, marker, tmp_path / "other", name="other")
        hlen, olen = struct.unpack_from("<I", data, 8)[0], struct.unpack_from("<I", other, 8)[0]
        data = other[:12 + olen] + data[12 + hlen:]
    out.write_bytes(data)
    reason = {"unsigned": signing.UNSIGNED, "unknown key": signing.UNKNOWN_KEY}.get(case, signing.BAD_SIGNATURE)
    for fn in (fw_image.check, fw_image.read, lambda p: fw_image.load(p, work)):
        refused(lambda: fn(out), reason)
    assert not marker.exists() and not work.exists()


def test_a_payload_changed_after_signing_is_refused_before_unpacking(keys, marked, tmp_path):
    tree, marker = marked
    data = bytearray(built(tree, marker, tmp_path / "img"))
    data[-40] ^= 1                                                    # in the zip, not in the signed header
    (tmp_path / "img").write_bytes(data)
    with pytest.raises(fw_image.ImageError, match="checksum"):
        fw_image.load(tmp_path / "img", tmp_path / "work")
    assert not marker.exists() and not (tmp_path / "work").exists()


@pytest.mark.parametrize("lie", ["hidden operator", "params", "inputs", "doc", "extra operator", "version"])
def test_a_signed_manifest_that_does_not_match_the_code_is_refused(keys, marked, tmp_path, lie):
    tree, marker = marked
    header, payload = parts(built(tree, marker, tmp_path / "img"))
    ops = header["operators"]
    custom = next(o for o in ops if o["id"] == 0x1400)
    if lie == "hidden operator":
        ops.remove(custom)
    elif lie == "params":
        custom["params"] = {"n": {"type": "int", "default": 1, "max": 3}}
    elif lie == "inputs":
        custom["inputs"] = [0, 4]
    elif lie == "doc":
        custom["doc"] = "harmless"
    elif lie == "extra operator":
        ops.append({**custom, "id": 0x1401, "name": "ghost"})
    else:
        header["version"] = "2.0.0"
    (tmp_path / "img").write_bytes(repack(header, payload, signing.install_key()))
    assert fw_image.check(tmp_path / "img")[2].name == signing.INSTALL_NAME   # the signature itself is good
    with pytest.raises(fw_image.ImageError, match="does not match the signed manifest") as info:
        fw_image.load(tmp_path / "img", tmp_path / "work")
    assert ("0x1401" if lie == "extra operator" else "version" if lie == "version" else "0x1400") in info.value.message


def test_examine_shows_a_refused_signature_without_raising(keys, marked, tmp_path):
    tree, marker = marked
    built(tree, marker, tmp_path / "img", key=Ed25519PrivateKey.generate())
    header, _, verdict = fw_image.examine(tmp_path / "img")
    assert header["version"] == "1.0.0" and isinstance(verdict, signing.SignatureError)
    assert verdict.reason == signing.UNKNOWN_KEY and not marker.exists()


def test_format_1_images_are_refused_with_a_word_on_rebuilding(keys, tmp_path):
    (tmp_path / "old").write_bytes(fw_image.MAGIC_V1 + struct.pack("<I", 2) + b"{}")
    with pytest.raises(fw_image.ImageError, match="rebuild"):
        fw_image.check(tmp_path / "old")

"""dsp_side.fw_image and the firmware name rules, without a SoC: every malformed, oversized or
hostile input is an ImageError (EINVAL) or FileNotFound, never another exception, a hang, or
bytes unpacked past the limits. The live counterparts are in test_live_image_limits.py."""
from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import stat
import struct
import time
import zipfile
from pathlib import Path

import pytest

from dsp_side import fw_image, signing
from dsp_side.remoteproc import Device
from protocol import errors
from protocol.remoteproc import FIRMWARE_NAME_MAX, firmware_name_problem

FW_SRC = b'VERSION = "1.0.0"\n\n\ndef register(registry):\n    pass\n'
MiB = 1 << 20


def pack(header, payload: bytes) -> bytes:
    """An image of ``header`` and ``payload``, signed with the trusted key of the ``keys`` fixture."""
    blob = header if isinstance(header, bytes) else json.dumps(header).encode()
    signed = fw_image.MAGIC + struct.pack("<I", len(blob)) + blob
    seal = signing.sign(signed, signing.install_key())
    return signed + struct.pack("<I", len(seal)) + seal + payload


def payload_at(data: bytes) -> int:
    """Offset of the payload in a packed image."""
    hlen = struct.unpack_from("<I", data, 8)[0]
    return 12 + hlen + 4 + struct.unpack_from("<I", data, 12 + hlen)[0]


def sealed(header: dict, payload: bytes) -> dict:
    return {**header, "payload_size": len(payload), "payload_sha256": hashlib.sha256(payload).hexdigest()}


def zip_of(members, compression=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for info, data in members:
            zf.writestr(info, data)
    return buf.getvalue()


@pytest.fixture(scope="module", autouse=True)
def keys(tmp_path_factory):
    """A key directory of its own (VDSP_KEYS_DIR) with a signing key, trusted."""
    directory = tmp_path_factory.mktemp("keys")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VDSP_KEYS_DIR", str(directory))
        signing.keygen(directory)
        yield directory


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict:
    tree = tmp_path_factory.mktemp("src") / "tiny"
    tree.mkdir()
    (tree / "firmware.py").write_bytes(FW_SRC)
    return fw_image.build(tree, tmp_path_factory.mktemp("out") / "tiny")


@pytest.fixture
def write(tmp_path, base):
    """write(payload=..., header=..., raw=...) -> path of an image made of those parts."""
    def make(payload: bytes | None = None, header=None, raw: bytes | None = None, name: str = "img") -> Path:
        path = tmp_path / name
        if raw is None:
            payload = zip_of([("firmware.py", FW_SRC)]) if payload is None else payload
            raw = pack(sealed(base, payload) if header is None else header, payload)
        path.write_bytes(raw)
        return path
    return make


def refused(fn, *words, cls=fw_image.ImageError):
    with pytest.raises(cls) as info:
        fn()
    assert type(info.value) is cls or cls is fw_image.ImageError and isinstance(info.value, cls)
    for word in words:
        assert word in info.value.message, info.value.message
    return info.value


def refused_everywhere(path: Path, tmp_path: Path, *words) -> None:
    """check (the core), read (CLI, deploy) and load (the firmware process) all refuse it."""
    refused(lambda: fw_image.check(path), *words)
    refused(lambda: fw_image.read(path), *words)
    work = tmp_path / "refused-work"
    refused(lambda: fw_image.load(path, work), *words)
    assert not work.exists() or not any(work.rglob("*"))     # nothing was unpacked


# --- firmware names ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["vdsp1", "vdsp_fw.bin", "v" * FIRMWARE_NAME_MAX, "\u00e9" * 127, "-x", "a b",
                                  "...", ".hidden", "a..b"])
def test_valid_firmware_names(name):
    assert firmware_name_problem(name) is None
    dev = Device("vdsp0", "vdsp0")
    assert dev.write("firmware", name + "\n") is None and dev.read("firmware") == name


@pytest.mark.parametrize("name, why", [
    ("", "empty"), (".", "not a file name"), ("..", "not a file name"), ("a/b", "'/'"), ("/abs", "'/'"),
    ("x" * 256, "256 bytes"), ("\u00e9" * 128, "256 bytes"), ("a\x00b", "control"), ("a\nb", "control"),
    ("a\tb", "control"), ("a\x7fb", "control"), ("a\udc80b", "UTF-8"),
])
def test_invalid_firmware_names_are_einval_and_change_nothing(name, why):
    assert why in firmware_name_problem(name)
    dev = Device("vdsp0", "vdsp0")
    before = dev.snapshot()
    with pytest.raises(errors.RemoteprocInvalid) as info:
        dev.write("firmware", name)
    assert info.value.code == -22 and len(info.value.message) < 200
    assert dev.snapshot() == before


def test_a_name_is_checked_again_at_lookup(tmp_path):
    for name in ("x" * 300, "a/b", "..", ""):
        refused(lambda: fw_image.find(name, [tmp_path]), "invalid firmware name")


def test_lookup_skips_directories_that_cannot_hold_the_name_and_refuses_non_files(tmp_path, write):
    good = write(name="vdsp1")
    too_long = Path("/" + "/".join(["d" * 200] * 21))       # dir + name over PATH_MAX: ENAMETOOLONG
    a_file = good                                          # a search "directory" that is a file: ENOTDIR
    assert fw_image.find("vdsp1", [too_long, a_file, tmp_path / "nope", tmp_path]) == good
    refused(lambda: fw_image.find("vdsp2", [too_long, tmp_path]), "not found", cls=errors.FileNotFound)
    (tmp_path / "linked").symlink_to(good)
    refused(lambda: fw_image.find("linked", [tmp_path]), "symbolic link")
    (tmp_path / "adir").mkdir()
    refused(lambda: fw_image.find("adir", [tmp_path]), "not a regular file")
    os.mkfifo(tmp_path / "fifo")
    refused(lambda: fw_image.find("fifo", [tmp_path]), "not a regular file")
    refused(lambda: fw_image.find("vdsp1", [Path("/tmp/a\x00b"), tmp_path]), "cannot look up")


# --- the file: symlinks, special files, size ---------------------------------------------------

def test_the_image_is_opened_without_following_a_symlink(tmp_path, write):
    good = write()
    (tmp_path / "ln").symlink_to(good)
    refused_everywhere(tmp_path / "ln", tmp_path, "symbolic link")
    refused(lambda: fw_image.check(tmp_path / "missing"), "does not exist", cls=errors.FileNotFound)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    old = signal.signal(signal.SIGALRM, lambda *a: pytest.fail("opening a FIFO blocked"))
    signal.alarm(5)
    try:
        refused_everywhere(tmp_path / "fifo", tmp_path, "not a regular file")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_an_image_over_the_size_limit_is_refused_by_fstat_before_any_read(tmp_path, base, monkeypatch):
    header = {**base, "payload_sha256": "0" * 64, "payload_size": fw_image.MAX_IMAGE}
    path = tmp_path / "huge"
    with open(path, "wb") as f:
        f.write(pack(header, b""))
        f.truncate(1 << 30)
    reads = []
    monkeypatch.setattr(os, "pread", lambda *a: reads.append(a) or b"")
    t0 = time.monotonic()
    refused_everywhere(path, tmp_path, f"{1 << 30} bytes", "limit")
    assert reads == [] and time.monotonic() - t0 < 1


def test_the_size_limit_is_inclusive(tmp_path, base, monkeypatch):
    path = tmp_path / "img"
    payload = zip_of([("firmware.py", FW_SRC)])
    path.write_bytes(pack(sealed(base, payload), payload))
    monkeypatch.setattr(fw_image, "MAX_IMAGE", path.stat().st_size)
    assert fw_image.check(path)[1] == fw_image.MAX_IMAGE
    fw_image.load(path, tmp_path / "work")
    monkeypatch.setattr(fw_image, "MAX_IMAGE", path.stat().st_size - 1)
    refused_everywhere(path, tmp_path, "limit")


# --- the header ---------------------------------------------------------------------------------

def _drop(key):
    return lambda h: {k: v for k, v in h.items() if k != key}


def _set(key, value):
    return lambda h: {**h, key: value}


def _op(**change):
    return lambda h: {**h, "operators": [{**h["operators"][0], **change}] + h["operators"][1:]}


def _op_drop(key):
    return lambda h: {**h, "operators": [{k: v for k, v in h["operators"][0].items() if k != key}]}


HEADERS = [
    ("header a list", lambda h: [h], "JSON object"),
    ("header a string", lambda h: "x", "JSON object"),
    ("no format", _drop("format"), "format"),
    ("format a bool", _set("format", True), "format"),
    ("format a string", _set("format", "1"), "format"),
    ("format 1", _set("format", 1), "format"),   # format 2 is the one read now
    ("format 3", _set("format", 3), "format"),
    *[(f"no {key}", _drop(key), key) for key in ("name", "version", "built", "operators", "payload_size",
                                                 "payload_sha256")],
    ("name empty", _set("name", ""), "name"),
    ("name a list", _set("name", ["x"]), "name"),
    ("name too long", _set("name", "n" * 256), "name"),
    ("version an int", _set("version", 1), "version"),
    ("version not x.y.z", _set("version", "1.0"), "version"),
    ("built an int", _set("built", 0), "built"),
    ("operators a dict", _set("operators", {}), "operators"),
    ("operators a string", _set("operators", "ping"), "operators"),
    ("payload_size a string", lambda h: {**h, "payload_size": str(h["payload_size"])}, "payload_size"),
    ("payload_size a float", lambda h: {**h, "payload_size": float(h["payload_size"])}, "payload_size"),
    ("payload_size a bool", _set("payload_size", True), "payload_size"),
    ("payload_size negative", _set("payload_size", -1), "payload_size"),
    ("payload_sha256 an int", _set("payload_sha256", 0), "payload_sha256"),
    ("payload_sha256 upper case", lambda h: {**h, "payload_sha256": h["payload_sha256"].upper()}, "payload_sha256"),
    ("operator a string", lambda h: {**h, "operators": ["ping"]}, "operator #0"),
    *[(f"operator without {key}", _op_drop(key), key) for key in ("id", "name", "params", "inputs", "outputs",
                                                                   "doc")],
    ("operator id a string", _op(id="0"), "'id'"),
    ("operator id a bool", _op(id=False), "'id'"),
    ("operator id over 16 bits", _op(id=0x10000), "'id'"),
    ("operator params a list", _op(params=[]), "'params'"),
    ("operator param without type", _op(params={"x": {}}), "'params'"),
    ("operator inputs reversed", _op(inputs=[2, 1]), "'inputs'"),
    ("operator outputs of three", _op(outputs=[0, 1, 2]), "'outputs'"),
    ("operator doc null", _op(doc=None), "'doc'"),
    ("operator ids twice", lambda h: {**h, "operators": h["operators"] + h["operators"][:1]}, "twice"),
]


@pytest.mark.parametrize("damage, mutate, word", HEADERS, ids=[h[0] for h in HEADERS])
def test_the_header_schema_is_checked_field_by_field(tmp_path, base, write, damage, mutate, word):
    payload = zip_of([("firmware.py", FW_SRC)])
    path = write(payload, header=mutate(sealed(base, payload)))
    refused_everywhere(path, tmp_path, word)


def test_extra_header_fields_are_ignored(tmp_path, base, write):
    payload = zip_of([("firmware.py", FW_SRC)])
    header, registry = fw_image.load(write(payload, header={**sealed(base, payload), "signed_by": [1]}), tmp_path / "w")
    assert header["version"] == "1.0.0" and len(registry) > 0


@pytest.mark.parametrize("blob, word", [
    (b"[" * 100_000 + b"]" * 100_000, "corrupt header"),     # RecursionError in json, not a crash
    (b"\xff\xfe\x00", "corrupt header"),
    (b'"payload_size": 1e999', "payload_size"),
    (b'"name": NaN', "name"),
    (b'"version": Infinity', "version"),
])
def test_hostile_header_json(tmp_path, base, write, blob, word):
    if blob.startswith(b'"'):     # one field of a valid header replaced by this JSON text
        key = blob.split(b'"')[1].decode()
        payload = zip_of([("firmware.py", FW_SRC)])
        blob = json.dumps({**sealed(base, payload), key: "@"}).encode().replace(f'"{key}": "@"'.encode(), blob)
        assert json.loads(blob)
    refused_everywhere(write(raw=pack(blob, b"")), tmp_path, word)


def test_header_length_over_its_limit_and_sizes_that_do_not_add_up(tmp_path, base, write):
    raw = fw_image.MAGIC + struct.pack("<I", fw_image.MAX_HEADER + 1) + b"{}"
    refused_everywhere(write(raw=raw), tmp_path, "header of", "limit")
    payload = zip_of([("firmware.py", FW_SRC)])
    good = pack(sealed(base, payload), payload)
    refused_everywhere(write(raw=good[:-1]), tmp_path, "truncated")
    refused_everywhere(write(raw=good + b"\0"), tmp_path, "too long")
    damaged = payload[:-30] + b"X" * 30                   # the zip's end record, checksum updated
    refused_everywhere(write(raw=pack(sealed(base, damaged), damaged)), tmp_path, "zip")
    at = len(good) - len(payload) + 40                    # a byte of the deflated firmware.py
    corrupt = write(raw=good[:at] + bytes([good[at] ^ 1]) + good[at + 1:])
    fw_image.check(corrupt)                                   # the core's bounded checks cannot see it...
    refused(lambda: fw_image.read(corrupt), "checksum")       # ...the firmware process's read does
    refused(lambda: fw_image.load(corrupt, tmp_path / "w"), "checksum")


# --- the payload --------------------------------------------------------------------------------

def bomb(unpacked: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("firmware.py", FW_SRC)
        info = zipfile.ZipInfo("bomb.py")
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w") as member:
            for _ in range(unpacked // MiB):
                member.write(bytes(MiB))
    return buf.getvalue()


def test_a_zip_bomb_is_refused_from_the_central_directory(tmp_path, write, monkeypatch):
    monkeypatch.setattr(fw_image, "MAX_UNPACKED", 4 * MiB)
    payload = bomb(5 * MiB)
    assert len(payload) < 64 * 1024
    path = write(payload)
    opened = []
    real_open = zipfile.ZipFile.open
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    refused_everywhere(path, tmp_path, "would unpack to", "limit")
    assert opened == []                                    # nothing was decompressed
    monkeypatch.setattr(fw_image, "MAX_UNPACKED", 6 * MiB)   # under the limit it loads
    fw_image.load(path, tmp_path / "ok")
    assert (tmp_path / "ok" / "bomb.py").stat().st_size == 5 * MiB


def test_unpacking_is_counted_against_the_budget_whatever_the_central_directory_says(tmp_path, base):
    payload = zip_of([("firmware.py", FW_SRC), ("big.py", b"#" * 300_000)])
    with zipfile.ZipFile(io.BytesIO(payload)) as zf:
        with pytest.raises(fw_image.ImageError, match="limit of 100000"):
            fw_image._extract(zf, tmp_path / "w", "test", budget=100_000)
        fw_image._extract(zf, tmp_path / "w2", "test", budget=300_000 + len(FW_SRC))


def test_a_central_directory_that_understates_a_member_is_refused(tmp_path, write):
    payload = bytearray(zip_of([("firmware.py", FW_SRC), ("big.py", b"#" * 100_000)]))
    cd = payload.rindex(b"PK\x01\x02")                     # the last central directory entry: big.py
    struct.pack_into("<L", payload, cd + 24, 1000)         # its uncompressed size: 1000 instead of 100000
    path = write(bytes(payload))
    fw_image.check(path)                                      # the central directory alone looks fine
    refused(lambda: fw_image.load(path, tmp_path / "w"), "big.py")
    assert (tmp_path / "w" / "big.py").stat().st_size <= 1000


def _symlink(name="link.py"):
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def _mode(name, mode):
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = mode << 16
    return info


def _bzip2(name="b.py"):
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_BZIP2
    return info


PAYLOADS = [
    ("symlink", lambda: zip_of([("firmware.py", FW_SRC), (_symlink(), b"/etc/passwd")]), "symbolic link"),
    ("fifo member", lambda: zip_of([("firmware.py", FW_SRC), (_mode("f.py", stat.S_IFIFO | 0o600), b"")]),
     "not a regular file"),
    ("directory", lambda: zip_of([("firmware.py", FW_SRC), ("pkg/", b"")]), "directory"),
    ("absolute", lambda: zip_of([("firmware.py", FW_SRC), ("/tmp/x.py", b"")]), "unsafe path"),
    ("parent", lambda: zip_of([("firmware.py", FW_SRC), ("a/../../x.py", b"")]), "unsafe path"),
    ("backslash", lambda: zip_of([("firmware.py", FW_SRC), ("..\\x.py", b"")]), "unsafe path"),
    ("empty part", lambda: zip_of([("firmware.py", FW_SRC), ("a//x.py", b"")]), "unsafe path"),
    ("long part", lambda: zip_of([("firmware.py", FW_SRC), ("p" * 256 + ".py", b"")]), "unsafe path"),
    ("twice", lambda: zip_of([("firmware.py", FW_SRC), ("firmware.py", FW_SRC)]), "twice"),
    ("bzip2", lambda: zip_of([("firmware.py", FW_SRC), (_bzip2(), b"x")]), "compression method"),
    ("not a zip", lambda: b"hello, world" * 10, "not a zip"),
    ("empty", lambda: b"", "not a zip"),
    ("comment", lambda: zip_of([("firmware.py", FW_SRC)])[:-2] + b"\x03\x00abc", "end record"),
]


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize("kind, make, word", PAYLOADS, ids=[p[0] for p in PAYLOADS])
def test_bad_members_are_refused_before_unpacking(tmp_path, write, kind, make, word):
    refused_everywhere(write(make()), tmp_path, word)


def test_an_encrypted_member_is_refused(tmp_path, write):
    payload = bytearray(zip_of([("firmware.py", FW_SRC)]))
    for sig, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):   # set bit 0 in both headers
        at = payload.index(sig)
        payload[at + flag_at] |= 1
    refused_everywhere(write(bytes(payload)), tmp_path, "encrypted")


def test_too_many_members(tmp_path, write, monkeypatch):
    monkeypatch.setattr(fw_image, "MAX_MEMBERS", 3)
    path = write(zip_of([("firmware.py", FW_SRC)] + [(f"m{i}.py", b"") for i in range(3)]))
    refused_everywhere(path, tmp_path, "4 members", "limit of 3")


def test_zip64_records_and_oversized_central_directories_are_refused_before_parsing(tmp_path, write, monkeypatch):
    payload = zip_of([("firmware.py", FW_SRC)])
    eocd = len(payload) - 22
    locator = b"PK\x06\x07" + b"\0" * 16                   # a zip64 locator just before the end record
    cd_size, cd_offset = struct.unpack_from("<LL", payload, eocd + 12)
    with_locator = bytearray(payload[:eocd] + locator + payload[eocd:])
    struct.pack_into("<L", with_locator, len(with_locator) - 22 + 16, cd_offset)
    refused_everywhere(write(bytes(with_locator)), tmp_path, "zip64")
    monkeypatch.setattr(fw_image, "MAX_CENTRAL_DIR", cd_size - 1)
    refused_everywhere(write(payload), tmp_path, "central directory")


def test_load_unpacks_private_regular_files(tmp_path, write):
    header, registry = fw_image.load(write(zip_of([("firmware.py", FW_SRC), ("sub/util.py", b"X = 1\n")])),
                                  tmp_path / "w")
    for rel in ("firmware.py", "sub/util.py"):
        st = os.lstat(tmp_path / "w" / rel)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600


def test_an_odd_image_name_still_loads(tmp_path, base, write):
    payload = zip_of([("firmware.py", FW_SRC)])
    header, _ = fw_image.load(write(payload, header={**sealed(base, payload), "name": "my.ops-v2 (test)"}),
                           tmp_path / "w")
    assert header["name"] == "my.ops-v2 (test)"


def test_random_damage_is_only_ever_an_image_error(tmp_path, base):
    """Seeded mutations of a valid image (bit flips, cuts, splices): check, read and load
    raise ImageError or nothing, never another exception."""
    import random
    rng = random.Random(20261123)
    payload = zip_of([("firmware.py", FW_SRC), ("sub/util.py", b"X = 1\n" * 50)])
    good = pack(sealed(base, payload), payload)
    path = tmp_path / "img"
    for i in range(400):
        data = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(data))
            kind = rng.random()
            if kind < 0.6:
                data[at] ^= 1 << rng.randrange(8)
            elif kind < 0.8:
                del data[at:at + rng.randrange(1, 64)]
            else:
                data[at:at] = rng.randbytes(rng.randrange(1, 64))
        if rng.random() < 0.5:   # reseal, so that damage to the zip itself gets past the checksum
            body = bytes(data[payload_at(good):])
            data = bytearray(pack(sealed(base, body), body))
        path.write_bytes(bytes(data))
        for fn in (fw_image.check, fw_image.read, lambda p: fw_image.load(p, tmp_path / f"w{i}")):
            try:
                fn(path)
            except (fw_image.ImageError, signing.SignatureError):   # damage to the signed bytes: bad signature
                pass

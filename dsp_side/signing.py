"""Firmware signatures: which images a core may boot.

An image is signed when it is built, with an Ed25519 key (RFC 8032, through the
``cryptography`` package). A core boots an image only if its signature verifies with
a *trusted* public key; a core started with ``--allow-unsigned`` (development) also
boots an image that carries no signature at all, and says so at every boot and in
``vdsp status``. An image signed by an unknown key, or whose signature does not verify,
is refused in every mode.

The key directory is the CURVE key directory (``VDSP_KEYS_DIR``, else
``<runtime dir>/keys``, see ``vdsp_board.identity.curve``)::

    firmware-signing.pem          this install's signing key (PKCS#8 PEM, mode 0600), made by
                                  'vdsp firmware keygen' or the first 'vdsp up'; never committed
    firmware-signing.pub          its public key (OpenSSH one-line format), to hand to other installs
    firmware-trusted/NAME.pub     the public keys whose images the cores boot (OpenSSH or PEM);
                                  this install's own key is trusted as ``install`` when it is made

What is signed: the image's magic, header length and header, byte for byte as in the
file. The header carries the payload's size and SHA-256, so the signature covers the
code as well; the firmware process checks the payload against that digest before it
unpacks anything. The seal that follows the header is a JSON object
``{"alg": "ed25519", "key": BASE64(32-byte public key), "sig": BASE64(64-byte signature)}``.

Every file is opened without following a symbolic link, must be a regular file of ours
that group and others cannot write (a secret key: nor read), and is bounded in size; the
directories holding trusted keys must be real directories of ours that group and others
cannot write. A trusted-key file that breaks these rules is skipped (and logged), never
trusted.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import errno
import hashlib
import json
import logging
import os
import stat
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from protocol import errors

log = logging.getLogger("vdsp.signing")
SIGNING_KEY = "firmware-signing.pem"
SIGNING_PUB = "firmware-signing.pub"
TRUSTED = "firmware-trusted"
INSTALL_NAME = "install"          # the name this install's own key is trusted under
MAX_KEY_FILE = 16 << 10           # bytes of a key file (an Ed25519 key in PEM is ~120)
MAX_TRUSTED = 256                 # trusted keys read; more is refused
MAX_SEAL = 1024                   # bytes of an image's seal
UNSIGNED, UNKNOWN_KEY, BAD_SIGNATURE = "unsigned", "unknown key", "bad signature"


class SignatureError(errors.RemoteprocInvalid):
    """An image a core must not boot: unsigned, signed by an unknown key, or a bad signature (EINVAL).
    ``reason`` is one of UNSIGNED, UNKNOWN_KEY, BAD_SIGNATURE."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def key_id(public_raw: bytes) -> str:
    """A short, stable name of a public key: ``ed25519:`` and 16 hex digits of its SHA-256."""
    return "ed25519:" + hashlib.sha256(public_raw).hexdigest()[:16]


def _name_problem(name: str) -> str | None:
    if not name or "/" in name or name.startswith(".") or len(name) > 64 or any(ord(c) < 32 for c in name):
        return f"key name {name!r} must be 1..64 characters without '/', control characters or a leading '.'"
    return None


# --- files ------------------------------------------------------------------------------------

def _read(path: Path, *, secret: bool = False, owned: bool = True) -> bytes:
    """A key file's bytes: not through a symbolic link, a regular file of at most MAX_KEY_FILE
    bytes, ours (``owned``) and not writable by others (``secret``: nor readable).
    Raises FileNotFound / InvalidArgument."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise errors.FileNotFound(f"key file {path} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise errors.InvalidArgument(f"key file {path} is a symbolic link: refusing it") from None
        raise errors.InvalidArgument(f"cannot open key file {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise errors.InvalidArgument(f"key file {path} is not a regular file")
        if owned and st.st_uid != os.getuid():
            raise errors.InvalidArgument(f"key file {path} is owned by uid {st.st_uid}, not by you: refusing it")
        if st.st_mode & (0o077 if secret else 0o022):
            need = "mode 0600" if secret else "not writable by group or others"
            raise errors.InvalidArgument(f"key file {path} must be {need} (it is {stat.S_IMODE(st.st_mode):04o})")
        if st.st_size > MAX_KEY_FILE:
            raise errors.InvalidArgument(f"key file {path} is {st.st_size} bytes, over the limit of {MAX_KEY_FILE}")
        data = os.read(fd, MAX_KEY_FILE + 1)
    except OSError as exc:
        raise errors.InvalidArgument(f"cannot read key file {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_KEY_FILE:
        raise errors.InvalidArgument(f"key file {path} is over the limit of {MAX_KEY_FILE} bytes")
    return data


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write ``path`` atomically (a temporary file, then rename, which replaces a symlink
    rather than following it)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _check_dir(path: Path) -> None:
    """A directory that decides what is trusted: real, ours, not writable by group or others.
    Raises InvalidArgument."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise errors.InvalidArgument(f"{path} is not a directory (a symlink or a file): refusing its keys")
    if st.st_uid != os.getuid():
        raise errors.InvalidArgument(f"{path} is owned by uid {st.st_uid}, not by you: refusing its keys")
    if st.st_mode & 0o022:
        raise errors.InvalidArgument(f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}): "
                                     f"refusing its keys (chmod 700 {path})")


def load_private(path: Path) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PKCS#8 PEM or OpenSSH file (unencrypted, mode 0600, ours).
    Raises FileNotFound / InvalidArgument."""
    data = _read(path, secret=True)
    for loader in (serialization.load_pem_private_key, serialization.load_ssh_private_key):
        try:
            key = loader(data, password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            continue
        if not isinstance(key, Ed25519PrivateKey):
            raise errors.InvalidArgument(f"{path} holds a {type(key).__name__}, not an Ed25519 private key")
        return key
    raise errors.InvalidArgument(f"{path} is not an unencrypted Ed25519 private key (PKCS#8 PEM or OpenSSH)")


def parse_public(data: bytes, where: str) -> bytes:
    """The raw 32 bytes of an Ed25519 public key given in OpenSSH or PEM form. Raises InvalidArgument."""
    for loader in (serialization.load_ssh_public_key, serialization.load_pem_public_key):
        try:
            key = loader(data.strip())
        except (ValueError, TypeError, UnsupportedAlgorithm):
            continue
        if not isinstance(key, Ed25519PublicKey):
            raise errors.InvalidArgument(f"{where} holds a {type(key).__name__}, not an Ed25519 public key")
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    raise errors.InvalidArgument(f"{where} is not an Ed25519 public key (OpenSSH 'ssh-ed25519 ...' or PEM)")


def public_raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _public_line(raw: bytes, comment: str) -> bytes:
    line = Ed25519PublicKey.from_public_bytes(raw).public_bytes(serialization.Encoding.OpenSSH,
                                                                  serialization.PublicFormat.OpenSSH)
    return line + f" {comment}\n".encode()


# --- the key directory ------------------------------------------------------------------------

def signing_key_path(directory: Path) -> Path:
    return directory / SIGNING_KEY


def keygen(directory: Path) -> tuple[Path, bool]:
    """This install's signing key in ``directory``, made (and trusted as ``install``) if
    missing. Returns (its path, whether it was made now). Raises InvalidArgument."""
    path = signing_key_path(directory)
    if os.path.lexists(path):
        load_private(path)                 # an existing key must be usable, not silently replaced
        return path, False
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, pem)
    finally:
        os.close(fd)
    raw = public_raw(key)
    _write(directory / SIGNING_PUB, _public_line(raw, "vdsp-firmware-signing"), 0o644)
    trust(directory, directory / SIGNING_PUB, INSTALL_NAME)
    log.info("made the firmware signing key %s (%s), trusted as %r", path, key_id(raw), INSTALL_NAME)
    return path, True


def trust(directory: Path, public_file: Path, name: str | None = None) -> tuple[Path, str]:
    """Trust the Ed25519 public key in ``public_file`` as ``name`` (default: the file's stem).
    Returns (the trusted file, the key's id). Raises FileNotFound / InvalidArgument."""
    name = name or public_file.name.removesuffix(".pub")
    problem = _name_problem(name)
    if problem:
        raise errors.InvalidArgument(problem)
    raw = parse_public(_read(public_file, owned=False), str(public_file))
    folder = directory / TRUSTED
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_dir(folder)
    target = folder / f"{name}.pub"
    _write(target, _public_line(raw, name), 0o600)
    return target, key_id(raw)


def untrust(directory: Path, name: str) -> Path | None:
    """Stop trusting the key named ``name``; its former path, or None if there was none."""
    problem = _name_problem(name)
    if problem:
        raise errors.InvalidArgument(problem)
    path = directory / TRUSTED / f"{name}.pub"
    try:
        path.unlink()
    except FileNotFoundError:
        return None
    return path


def trusted(directory: Path) -> list[tuple[str, bytes, Path]]:
    """(name, raw public key, file) of every trusted key, by name. A file that is unsafe or
    not an Ed25519 public key is skipped with a warning. Raises InvalidArgument when the
    directories are unsafe or hold more than MAX_TRUSTED entries."""
    folder = directory / TRUSTED
    if not os.path.lexists(folder):
        return []
    _check_dir(directory)
    _check_dir(folder)
    names = sorted(n for n in os.listdir(folder) if n.endswith(".pub") and not n.startswith("."))
    if len(names) > MAX_TRUSTED:
        raise errors.InvalidArgument(f"{folder} holds {len(names)} keys, over the limit of {MAX_TRUSTED}")
    out = []
    for entry in names:
        path = folder / entry
        try:
            out.append((entry[:-4], parse_public(_read(path), str(path)), path))
        except errors.VdspError as exc:
            log.warning("trusted firmware key skipped: %s", exc.message)
    return out


@dataclasses.dataclass(frozen=True)
class Trust:
    """What a core boots: images signed by one of ``keys`` (raw public key -> name), and
    unsigned ones too if ``allow_unsigned``. ``where`` names the keys' origin in messages."""

    keys: dict
    allow_unsigned: bool = False
    where: str = ""

    @classmethod
    def of(cls, directory: Path, allow_unsigned: bool = False) -> "Trust":
        """The keys trusted in ``directory`` (read now: trust and untrust apply at the next boot)."""
        return cls({raw: name for name, raw, _ in trusted(directory)}, allow_unsigned, str(directory / TRUSTED))

    @classmethod
    def only(cls, public_b64: str | None, name: str = "signer") -> "Trust":
        """Exactly one key (base64), or none and unsigned images (``public_b64`` None): what a
        core hands its firmware process after choosing the image. Raises InvalidArgument."""
        if public_b64 is None:
            return cls({}, True, "the core's choice: unsigned")
        raw = _b64(public_b64, 32)
        if raw is None:
            raise errors.InvalidArgument(f"signer key {public_b64[:60]!r} is not 32 bytes of base64")
        return cls({raw: name}, False, "the key the core verified")


def _b64(text, size: int) -> bytes | None:
    if not isinstance(text, str):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == size else None


# --- seals ------------------------------------------------------------------------------------

def sign(signed: bytes, key: Ed25519PrivateKey) -> bytes:
    """The seal of ``signed`` (the image's magic, header length and header)."""
    seal = {"alg": "ed25519", "key": base64.b64encode(public_raw(key)).decode(),
            "sig": base64.b64encode(key.sign(signed)).decode()}
    return json.dumps(seal, sort_keys=True).encode()


@dataclasses.dataclass(frozen=True)
class Signer:
    """Who signed an image a core may boot: ``name`` and ``key_id``, or ``unsigned``."""

    name: str
    key_id: str = ""
    public_b64: str | None = None

    @property
    def unsigned(self) -> bool:
        return self.public_b64 is None

    def __str__(self) -> str:
        return "UNSIGNED" if self.unsigned else f"{self.name} ({self.key_id})"


def parse_seal(seal: bytes, where: str) -> tuple[bytes, bytes]:
    """(raw public key, signature) of a seal. Raises SignatureError (bad signature)."""
    try:
        doc = json.loads(seal)
    except (ValueError, RecursionError):
        doc = None
    key = _b64(doc.get("key"), 32) if isinstance(doc, dict) else None
    sig = _b64(doc.get("sig"), 64) if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("alg") != "ed25519" or key is None or sig is None:
        raise SignatureError(BAD_SIGNATURE, f"{where}: bad signature: the seal is malformed "
                                            "(it must be ed25519 with a 32-byte key and a 64-byte signature)")
    return key, sig


def verify(signed: bytes, seal: bytes | None, trust: Trust, where: str) -> Signer:
    """Who signed ``signed``, if ``trust`` lets a core boot it. Raises SignatureError:
    unsigned (and unsigned images not allowed), unknown key, bad signature."""
    if not seal:
        if trust.allow_unsigned:
            return Signer(UNSIGNED)
        raise SignatureError(UNSIGNED, f"{where} is unsigned: a core boots only images signed by a trusted key "
                                       "(build it with 'vdsp firmware build', which signs, or start the core "
                                       "with --allow-unsigned for development)")
    raw, sig = parse_seal(seal, where)
    name = trust.keys.get(raw)
    if name is None:
        raise SignatureError(UNKNOWN_KEY, f"{where} is signed by an unknown key {key_id(raw)}, not trusted in "
                                          f"{trust.where or 'this SoC'} (to trust it: 'vdsp firmware trust FILE.pub')")
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(sig, signed)
    except InvalidSignature:
        raise SignatureError(BAD_SIGNATURE, f"{where} has a bad signature (key {name}, {key_id(raw)}): the image "
                                            "was changed after it was signed") from None
    return Signer(name, key_id(raw), base64.b64encode(raw).decode())


def default_dir() -> Path:
    """The key directory of this SoC (``VDSP_KEYS_DIR``, else ``<runtime dir>/keys``)."""
    from vdsp_board.identity import curve
    return curve.keys_dir()


def install_key(directory: Path | None = None) -> Ed25519PrivateKey:
    """This install's signing key. Raises FileNotFound (saying how to make one) / InvalidArgument."""
    path = signing_key_path(directory or default_dir())
    try:
        return load_private(path)
    except errors.FileNotFound:
        raise errors.FileNotFound(f"no firmware signing key {path}: make it with 'vdsp firmware keygen' (the first "
                                  "'vdsp up' does too), or build with --key FILE, or --unsigned") from None

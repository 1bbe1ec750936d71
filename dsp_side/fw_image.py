"""DSP firmware images: build one from an operator source tree, verify it, load it.

An operator source tree is a folder whose ``firmware.py`` defines ``VERSION``
("x.y.z") and ``register(registry)``, which registers its operators explicitly
(other modules of the folder may be imported relatively). Every image also
carries the framework operators (PING, memcpy, ...), registered by the loader
first, like the runtime library a DSP image links.

File layout (format 2; all integers little-endian)::

    magic         8 bytes   b"VDSPFW\\x00\\x02"
    header_len    u32
    header        JSON: format, name, version, built, operators (the manifest:
                  id, name, params, inputs, outputs, doc), payload_size, payload_sha256,
                  and sanitize ("undefined" or "address") for an image whose C kernels were
                  built with a sanitizer (absent otherwise; the core starts the firmware of an
                  "address" image with ASan's runtime preloaded: dsp_side.fwproc)
    seal_len      u32       0 for an unsigned image, at most signing.MAX_SEAL
    seal          JSON: the Ed25519 signature of magic + header_len + header (dsp_side.signing)
    payload       zip archive of the source tree (*.py and C/C++ kernel sources, sorted, fixed
                  timestamps) and, when it binds C kernels, their compiled library
                  (dsp_side.ckernel: the signature covers the compiled code too)

Nothing of an image runs, and nothing of it is even parsed, before its signature is
checked against the trusted keys (:class:`signing.Trust`): an unsigned image, one signed
by an unknown key or whose signature does not verify is a :class:`signing.SignatureError`
(EINVAL). Then the header's schema, the sizes and (in the firmware process, before
unpacking) the payload's SHA-256, which the signed header names, are checked. After the
code has registered its operators, the registry must equal the signed manifest
operator for operator (id, name, parameters, buffer counts, doc) or the image is refused
before any operator can run. Format 1 images (no seal) are refused: rebuild them.

Limits and rules (each refusal is an :class:`ImageError`, EINVAL):

- the image is opened without following a symbolic link (``O_NOFOLLOW``) and must
  be a regular file of at most ``MAX_IMAGE`` bytes (checked by ``fstat`` before
  any read); the header is at most ``MAX_HEADER`` bytes and follows the schema
  of :func:`_check_header` (every field present, with its type);
- the payload is checked from the zip's central directory *before* anything is
  unpacked: at most ``MAX_MEMBERS`` members, unpacking to at most ``MAX_UNPACKED``
  bytes in all, each a regular file (no symbolic link, directory or device) under
  a relative path without ``..``, stored or deflated, not encrypted; unpacking
  then counts the bytes actually written against the same budget, as the central
  directory may lie.

:func:`check` does only bounded reads (header, end of the zip, its central
directory: well under a few MiB whatever the image), so a core can call it in its
event loop; :func:`read` (and :func:`load`, in the firmware process) also reads
the whole payload and verifies its SHA-256.
"""
from __future__ import annotations

import errno
import hashlib
import importlib.machinery
import importlib.util
import io
import json
import os
import re
import shutil
import stat
import struct
import sys
import time
import zipfile
import zlib
from pathlib import Path
from types import ModuleType

from protocol import errors
from protocol.remoteproc import firmware_name_problem
from dsp_side import ckernel, signing
from dsp_side.ckernel import build as ckbuild
from dsp_side.operators import framework
from dsp_side.registry import Registry

MAGIC = b"VDSPFW\x00\x02"
MAGIC_V1 = b"VDSPFW\x00\x01"     # before images were signed: refused, with a word on rebuilding
_LEN = struct.Struct("<I")
FORMAT = 2
MAX_HEADER = 1 << 20
MAX_IMAGE = 64 << 20            # bytes of a whole image file (magic, header, payload)
MAX_UNPACKED = 64 << 20         # bytes of the unpacked payload, all members together
MAX_MEMBERS = 1024              # files in the payload
MAX_CENTRAL_DIR = MAX_MEMBERS * 512   # bytes of the zip's central directory
MAX_MEMBER_PATH = 1024          # bytes of a member's path (each component at most 255)
_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)
_EOCD = struct.Struct("<4s4H2LH")       # zip end of central directory record, without comment
_EOCD_SIG, _ZIP64_LOCATOR_SIG = b"PK\x05\x06", b"PK\x06\x07"
_CHUNK = 1 << 20
# What a damaged or hostile zip can raise from the zipfile module.
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, ValueError,
               NotImplementedError, RuntimeError, struct.error)


class ImageError(errors.RemoteprocInvalid):
    """An image that cannot be used (corrupt, truncated, wrong format): EINVAL."""


def _sources(src: Path) -> list[Path]:
    if not (src / "firmware.py").is_file():
        raise errors.FileNotFound(f"{src} is not an operator source tree: it has no firmware.py")
    return sorted(p for p in src.rglob("*.py") if "__pycache__" not in p.parts)


def _zip(src: Path, files: list[Path], built: dict[str, bytes] | None = None) -> bytes:
    """The payload: ``files`` (under ``src``) and the ``built`` members (name: bytes), sorted."""
    members = {str(path.relative_to(src)): path.read_bytes() for path in files}
    members.update(built or {})
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, _ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, members[name])
    return buf.getvalue()


def _kernel_library(src: Path, registry: Registry, sanitize: str | None) -> dict[str, bytes]:
    """{library name: bytes} of the tree's C kernels, one per x86-64 level ({} when it binds
    none). Raises ImageError with the compiler's message."""
    entries = ckernel.entries_of(registry)
    if not entries:
        return {}
    try:
        return ckbuild.compile_levels(src, entries, sanitize=sanitize)
    except (ckbuild.CompileError, ValueError) as exc:
        raise ImageError(f"{src}: the C kernels do not build: {exc}") from exc


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Image code compiled from its source at every import, never read from (or written to) a
    bytecode cache: a cache outside the tree (``PYTHONPYCACHEPREFIX``) kept the previous image's
    code under the same path, and a firmware unpacks every image into one directory, where the
    next image's file of the same size and mtime matched it (the old code ran, not the signed)."""

    def get_code(self, fullname: str):
        path = self.get_filename(fullname)
        return compile(self.get_data(path), path, "exec", dont_inherit=True)


_IMAGE_ROOTS: set[str] = set()      # trees whose modules _SourceOnlyLoader loads (_import_tree's roots)


def _image_path_hook(path: str):
    """The path hook of an image tree and its subpackages: their modules from source only."""
    if any(path == root or path.startswith(root + os.sep) for root in _IMAGE_ROOTS):
        return importlib.machinery.FileFinder(path, (_SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES))
    raise ImportError(path)


def _import_tree(root: Path, tag: str) -> ModuleType:
    """Import ``root/firmware.py`` as a package module (relative imports work), every module of
    the tree from its source (:class:`_SourceOnlyLoader`)."""
    name = f"vdsp_firmware_{tag}"
    tree = str(root)
    if _image_path_hook not in sys.path_hooks:
        sys.path_hooks.insert(0, _image_path_hook)
    _IMAGE_ROOTS.add(tree)
    for cached in [p for p in sys.path_importer_cache if p == tree or p.startswith(tree + os.sep)]:
        del sys.path_importer_cache[cached]         # a finder of an earlier import of this directory
    spec = importlib.util.spec_from_file_location(name, root / "firmware.py",
                                                  loader=_SourceOnlyLoader(name, str(root / "firmware.py")),
                                                  submodule_search_locations=[tree])
    assert spec is not None and spec.loader is not None     # a .py file path always has both
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise ImageError(f"firmware.py of {root} failed to import: {type(exc).__name__}: {exc}") from exc
    return module


def registry_of(module: ModuleType, where: str) -> tuple[str, Registry]:
    """(version, registry with framework + the module's operators). Raises ImageError."""
    version = getattr(module, "VERSION", None)
    if not isinstance(version, str) or not _VERSION_RE.match(version):
        raise ImageError(f"{where}: VERSION must be a string like '1.2.3', got {version!r}")
    register = getattr(module, "register", None)
    if not callable(register):
        raise ImageError(f"{where}: firmware.py must define register(registry)")
    registry = Registry()
    framework.register(registry)
    try:
        register(registry)
    except (ValueError, TypeError) as exc:
        raise ImageError(f"{where}: operator registration failed: {exc}") from exc
    return version, registry


def registry_of_source(module: ModuleType, where: str) -> tuple[str, Registry]:
    """:func:`registry_of` for a firmware module run from its source tree in this process, without
    an image (the loopback SoC, the fuzzer): its C kernels, if it binds any, are compiled once per
    process (:func:`dsp_side.ckernel.build.library_for`). Raises ImageError (also with the
    compiler's message)."""
    version, registry = registry_of(module, where)
    entries = ckernel.entries_of(registry)
    if not entries or module.__file__ is None:
        return version, registry
    src = Path(module.__file__).resolve().parent
    try:
        ckernel.use_library(src, ckbuild.library_for(src, entries))
    except (ckbuild.CompileError, ValueError) as exc:
        raise ImageError(f"{src}: the C kernels do not build: {exc}") from exc
    return registry_of(module, where)


def registry_of_tree(src: Path) -> tuple[str, Registry]:
    """(VERSION, registry) of the firmware source tree ``src``. Raises FileNotFound, ImageError."""
    _sources(src)
    module = _import_tree(src.resolve(), f"table_{abs(hash(str(src)))}_{time.monotonic_ns()}")
    return registry_of(module, str(src))


def operator_table(src: Path) -> tuple[str, list[dict]]:
    """(VERSION, operator table) of the firmware source tree ``src``, as :func:`build` records
    them in an image (the framework operators included; JSON with sorted keys, as the header is).
    Raises FileNotFound, ImageError."""
    version, registry = registry_of_tree(src)
    return version, json.loads(json.dumps(registry.table(), sort_keys=True))


INSTALL_KEY = "install"


def build(src: Path, out: Path, name: str | None = None, *, key=INSTALL_KEY, sanitize: bool | str | None = None,
          sources: str | None = None) -> dict:
    """Build an image of ``src`` into ``out``; returns its header. ``key``: an Ed25519 private
    key, INSTALL_KEY (this install's signing key, see :func:`signing.install_key`) or None
    (an unsigned image, which only a core started with --allow-unsigned boots). ``sanitize``:
    C kernels compiled with a sanitizer, ``"undefined"`` (or True) or ``"address"``
    (:mod:`dsp_side.ckernel.build`), recorded in the header when the image has C kernels.
    ``sources``: a digest of the tree the builder recorded (``vdsp firmware install-stock``
    records the stock tree's, to know an image built by an earlier vdsp-sim), in the header.
    Raises FileNotFound (no source tree, no signing key), ImageError, InvalidArgument (a bad key)."""
    if key == INSTALL_KEY:
        key = signing.install_key()
    src = src.resolve()
    files = _sources(src)
    module = _import_tree(src, f"build_{abs(hash(str(src)))}_{time.monotonic_ns()}")
    version, registry = registry_of(module, str(src))
    try:
        sanitizer = ckbuild.sanitizer(sanitize)
    except ValueError as exc:
        raise ImageError(str(exc)) from None
    built = _kernel_library(src, registry, sanitizer)
    payload = _zip(src, files + ckbuild.sources(src), built)
    header = {"format": FORMAT, "name": name or src.name, "version": version,
              "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "operators": registry.table(), "payload_size": len(payload),
              "payload_sha256": hashlib.sha256(payload).hexdigest(),
              **({"sanitize": sanitizer} if sanitizer and built else {}),
              **({"sources": sources} if sources is not None else {})}
    blob = json.dumps(header, sort_keys=True).encode()
    signed = MAGIC + _LEN.pack(len(blob)) + blob
    seal = signing.sign(signed, key) if key is not None else b""
    write_atomically(out, signed + _LEN.pack(len(seal)) + seal + payload)
    return header


def write_atomically(out: Path, data: bytes) -> None:
    """Write ``out`` through a temporary file and a rename: a core never sees a half-written
    image, and a symbolic link planted at ``out`` or at the temporary name is replaced, not
    followed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, out)


def _short(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def _open(path: Path) -> tuple[int, int]:
    """(fd, size) of the image at ``path``: not through a symbolic link, a regular file, not
    over MAX_IMAGE (fstat, before any read). Raises FileNotFound or ImageError; the caller closes fd."""
    try:   # O_NONBLOCK: opening a FIFO planted in its place must not block
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise errors.FileNotFound(f"firmware image {path} does not exist") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ImageError(f"{path} is a symbolic link: a firmware image must be a regular file") from exc
        raise ImageError(f"cannot open firmware image {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:   # an embedded NUL
        raise ImageError(f"cannot open firmware image {path!r}: {exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ImageError(f"{path} is not a regular file")
        if st.st_size > MAX_IMAGE:
            raise ImageError(f"{path} is {st.st_size} bytes, over the limit of {MAX_IMAGE} bytes for a firmware image")
    except OSError as exc:
        os.close(fd)
        raise ImageError(f"cannot stat firmware image {path}: {exc.strerror or exc}") from exc
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def _pread(fd: int, offset: int, n: int, path: Path) -> bytes:
    """Exactly ``n`` bytes at ``offset``. Raises ImageError (truncated, I/O error)."""
    parts, got = [], 0
    try:
        while got < n:
            chunk = os.pread(fd, min(n - got, _CHUNK), offset + got)
            if not chunk:
                raise ImageError(f"{path} is truncated (it changed while being read?)")
            parts.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise ImageError(f"cannot read firmware image {path}: {exc.strerror or exc}") from exc
    return b"".join(parts)


def _parts(fd: int, size: int, path: Path) -> tuple[bytes, bytes, int]:
    """(signed bytes: magic + header length + header, seal, payload offset) of an open image,
    with bounded reads and nothing parsed. Raises ImageError."""
    start = len(MAGIC) + _LEN.size
    head = _pread(fd, 0, min(size, start), path)
    if head[:len(MAGIC)] == MAGIC_V1:
        raise ImageError(f"{path} is a format 1 image, made before images were signed: rebuild it with "
                         "'vdsp firmware build'")
    if head[:len(MAGIC)] != MAGIC:
        raise ImageError(f"{path} is not a vdsp firmware image (bad magic)")
    if len(head) < start:
        raise ImageError(f"{path} is truncated")
    (hlen,) = _LEN.unpack_from(head, len(MAGIC))
    if hlen > MAX_HEADER:
        raise ImageError(f"{path}: header of {hlen} bytes, over the limit of {MAX_HEADER} bytes")
    if start + hlen + _LEN.size > size:
        raise ImageError(f"{path} is truncated (header of {hlen} bytes)")
    rest = _pread(fd, start, hlen + _LEN.size, path)
    (slen,) = _LEN.unpack_from(rest, hlen)
    if slen > signing.MAX_SEAL:
        raise ImageError(f"{path}: seal of {slen} bytes, over the limit of {signing.MAX_SEAL} bytes")
    seal_at = start + hlen + _LEN.size
    if seal_at + slen > size:
        raise ImageError(f"{path} is truncated (seal of {slen} bytes)")
    seal = _pread(fd, seal_at, slen, path)
    return head + rest[:hlen], seal, seal_at + slen


def _parse_header(signed: bytes, size: int, offset: int, path: Path) -> dict:
    """The header in ``signed``; its schema and the payload's size (the file's ``size`` less
    ``offset``) are checked. Raises ImageError."""
    try:
        header = json.loads(signed[len(MAGIC) + _LEN.size:])
    except (ValueError, RecursionError) as exc:
        raise ImageError(f"{path}: corrupt header: {exc}") from exc
    _check_header(header, str(path))
    payload = size - offset
    if payload != header["payload_size"]:
        state = "truncated" if payload < header["payload_size"] else "too long"
        raise ImageError(f"{path} is {state}: payload {payload} of {header['payload_size']} bytes")
    return header


def _header(fd: int, size: int, path: Path, trust: signing.Trust | None,
            judge: bool = True) -> tuple[dict, int, signing.Signer | signing.SignatureError]:
    """(header, payload offset, signer) of an open image: the signature is verified against
    ``trust`` (None: this SoC's trusted keys) before the header is parsed. ``judge`` False
    (inspection only) returns the SignatureError in place of the signer instead of raising it.
    Raises ImageError, SignatureError."""
    signed, seal, offset = _parts(fd, size, path)
    signer: signing.Signer | signing.SignatureError
    try:
        signer = signing.verify(signed, seal, _trust(trust), str(path))
    except signing.SignatureError as exc:
        if judge:
            raise
        signer = exc
    return _parse_header(signed, size, offset, path), offset, signer


def _trust(trust: signing.Trust | None) -> signing.Trust:
    return signing.Trust.of(signing.default_dir()) if trust is None else trust


def _describe(value) -> str:
    text = json.dumps(value) if isinstance(value, (int, float, str, bool, type(None))) else type(value).__name__
    return text if len(text) <= 40 else text[:40] + "..."


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _field(obj: dict, key: str, ok, what: str, where: str):
    if key not in obj:
        raise ImageError(f"{where}: field {key!r} is missing")
    if not ok(obj[key]):
        raise ImageError(f"{where}: field {key!r} must be {what}, got {_describe(obj[key])}")
    return obj[key]


def _count_pair(value) -> bool:
    return (isinstance(value, list) and len(value) == 2 and all(_is_int(v) for v in value)
            and 0 <= value[0] <= value[1])


def _check_header(header, where: str) -> None:
    """The header schema: every field present with its type (extra fields are ignored).
    Raises ImageError naming the field."""
    if not isinstance(header, dict):
        raise ImageError(f"{where}: the header must be a JSON object, got {_describe(header)}")
    fmt = header.get("format")
    if not _is_int(fmt) or fmt != FORMAT:
        raise ImageError(f"{where}: unsupported image format {_describe(fmt)} (this loader reads format {FORMAT})")
    at = f"{where}: header"
    _field(header, "name", lambda v: isinstance(v, str) and 0 < len(v) <= 255, "a string of 1 to 255 characters", at)
    _field(header, "version", lambda v: isinstance(v, str) and _VERSION_RE.match(v), "a string like '1.2.3'", at)
    _field(header, "built", lambda v: isinstance(v, str) and len(v) <= 64, "a string (a UTC time)", at)
    _field(header, "payload_size", lambda v: _is_int(v) and v >= 0, "a non-negative integer", at)
    _field(header, "payload_sha256", lambda v: isinstance(v, str) and _SHA256_RE.match(v),
           "64 lowercase hex digits", at)
    if "sanitize" in header:
        _field(header, "sanitize", lambda v: v in ckbuild.SANITIZERS, f"one of {', '.join(ckbuild.SANITIZERS)}", at)
    if "sources" in header:
        _field(header, "sources", lambda v: isinstance(v, str) and _SHA256_RE.match(v), "64 lowercase hex digits", at)
    operators = _field(header, "operators", lambda v: isinstance(v, list), "a list", at)
    ids = set()
    for i, op in enumerate(operators):
        on = f"{where}: header operator #{i}"
        if not isinstance(op, dict):
            raise ImageError(f"{on} must be an object, got {_describe(op)}")
        op_id = _field(op, "id", lambda v: _is_int(v) and 0 <= v <= 0xFFFF, "an integer 0..65535", on)
        _field(op, "name", lambda v: isinstance(v, str) and 0 < len(v) <= 255, "a string of 1 to 255 characters", on)
        _field(op, "params", lambda v: isinstance(v, dict) and all(
            isinstance(k, str) and isinstance(p, dict) and isinstance(p.get("type"), str) for k, p in v.items()),
            "an object of parameter specs (each with a string 'type')", on)
        _field(op, "inputs", _count_pair, "[min, max] counts", on)
        _field(op, "outputs", _count_pair, "[min, max] counts", on)
        _field(op, "doc", lambda v: isinstance(v, str), "a string", on)
        if op_id in ids:
            raise ImageError(f"{on}: id 0x{op_id:04x} appears twice")
        ids.add(op_id)


class _Window(io.RawIOBase):
    """Read-only file object over bytes [start, start + size) of ``fd`` (pread: the
    descriptor's offset is not used). Lets zipfile read the central directory in place."""

    def __init__(self, fd: int, start: int, size: int) -> None:
        super().__init__()
        self._fd, self._start, self._size, self._pos = fd, start, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise OSError(errno.EINVAL, "seek before the start of the payload")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer) -> int:
        n = max(0, min(len(buffer), self._size - self._pos))
        data = os.pread(self._fd, n, self._start + self._pos) if n else b""
        buffer[:len(data)] = data
        self._pos += len(data)
        return len(data)


def _member_problem(info: zipfile.ZipInfo) -> str | None:
    name = info.filename
    if info.is_dir() or info.external_attr & 0x10:   # 0x10: the MS-DOS directory attribute
        return "is a directory, not a regular file"
    mode = info.external_attr >> 16        # unix mode; a file type of 0 (no type given) is a file
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
        return "is a symbolic link, not a regular file" if stat.S_ISLNK(mode) else "is not a regular file"
    if (not name or name.startswith("/") or "\\" in name or "\x00" in name
            or len(name.encode()) > MAX_MEMBER_PATH
            or any(part in ("", ".", "..") or len(part.encode()) > 255 for part in name.split("/"))):
        return "has an unsafe path (absolute, '..', empty parts or too long)"
    if info.flag_bits & 0x1:
        return "is encrypted"
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return f"uses compression method {info.compress_type} (only stored and deflated are read)"
    return None


def _open_zip(fileobj, size: int, where: str) -> zipfile.ZipFile:
    """The payload as a ZipFile whose members were all checked, from the end record and the
    central directory only: nothing is decompressed. Raises ImageError."""
    if size < _EOCD.size:
        raise ImageError(f"{where}: the payload is not a zip archive")
    start = max(0, size - _EOCD.size - 4)     # the end record and the 4 bytes before it, if any
    try:
        fileobj.seek(start)
        tail = fileobj.read(size - start).rjust(_EOCD.size + 4, b"\0")
    except OSError as exc:
        raise ImageError(f"cannot read {where}: {exc}") from exc
    if len(tail) != _EOCD.size + 4:
        raise ImageError(f"{where} is truncated (it changed while being read?)")
    sig, disk, cd_disk, n_disk, n_total, cd_size, cd_offset, comment = _EOCD.unpack(tail[4:])
    # Our builds write no archive comment and no zip64 records: anything else is refused
    # before zipfile reads a central directory of any size.
    if sig != _EOCD_SIG or comment or disk or cd_disk or n_disk != n_total:
        raise ImageError(f"{where}: the payload is not a zip archive this loader reads (bad end record)")
    if tail[:4] == _ZIP64_LOCATOR_SIG:
        raise ImageError(f"{where}: the payload uses zip64 records, which images never need")
    if n_total > MAX_MEMBERS:
        raise ImageError(f"{where}: the payload has {n_total} members, over the limit of {MAX_MEMBERS} members")
    if cd_size > MAX_CENTRAL_DIR or cd_offset + cd_size != size - _EOCD.size:
        raise ImageError(f"{where}: the payload's zip central directory is damaged or too large "
                         f"({cd_size} bytes at {cd_offset})")
    try:
        zf = zipfile.ZipFile(fileobj)
    except _ZIP_ERRORS as exc:
        raise ImageError(f"{where}: the payload is not a valid zip archive: {exc}") from exc
    try:
        infos = zf.infolist()
        if len(infos) != n_total:
            raise ImageError(f"{where}: the payload's zip central directory is damaged "
                             f"({len(infos)} members, {n_total} announced)")
        total, seen = 0, set()
        for info in infos:
            problem = _member_problem(info)
            if problem is None and info.filename in seen:
                problem = "appears twice"
            if problem is not None:
                raise ImageError(f"{where}: payload member {_short(info.filename)} {problem}")
            seen.add(info.filename)
            total += info.file_size
        if total > MAX_UNPACKED:
            raise ImageError(f"{where}: the payload would unpack to {total} bytes, "
                             f"over the limit of {MAX_UNPACKED} bytes")
    except BaseException:
        zf.close()
        raise
    return zf


def check(path: Path, trust: signing.Trust | None = None) -> tuple[dict, int, signing.Signer]:
    """(header, file size, signer) of an image a core may boot, with bounded reads only (a
    core calls this in its event loop): symlink, type and size limit, the signature against
    ``trust`` (None: this SoC's trusted keys, no unsigned images), header schema, payload
    size, the zip's end record and central directory. The SHA-256 and the members' contents
    are left to :func:`read` / :func:`load`. Raises FileNotFound, ImageError, SignatureError."""
    fd, size = _open(path)
    try:
        header, offset, signer = _header(fd, size, path, trust)
        assert not isinstance(signer, signing.SignatureError)   # judged: a bad signature raised
        _open_zip(_Window(fd, offset, size - offset), size - offset, str(path)).close()
    finally:
        os.close(fd)
    return header, size, signer


def read(path: Path, trust: signing.Trust | None = None) -> tuple[dict, bytes, signing.Signer]:
    """(header, payload, signer) of a verified image (signature as in :func:`check`, and the
    payload's SHA-256). Raises FileNotFound, ImageError, SignatureError."""
    header, payload, signer = _read(path, trust, judge=True)
    return header, payload, signer


def examine(path: Path, trust: signing.Trust | None = None) -> tuple[dict, bytes, signing.Signer | signing.SignatureError]:
    """Like :func:`read`, for inspection ('vdsp firmware info'): a signature ``trust`` refuses
    is returned as the SignatureError in place of the signer. Raises FileNotFound, ImageError."""
    return _read(path, trust, judge=False)


def _read(path: Path, trust: signing.Trust | None, judge: bool):
    fd, size = _open(path)
    try:
        header, offset, signer = _header(fd, size, path, trust, judge)
        payload = _pread(fd, offset, size - offset, path)
    finally:
        os.close(fd)
    if hashlib.sha256(payload).hexdigest() != header["payload_sha256"]:
        raise ImageError(f"{path}: checksum mismatch, the payload is not the one that was signed "
                         "(the image is corrupt or was changed after it was signed)")
    _open_zip(io.BytesIO(payload), len(payload), str(path)).close()
    return header, payload, signer


def _extract(zf: zipfile.ZipFile, workdir: Path, where: str, budget: int | None = None) -> None:
    """Unpack every (checked) member into ``workdir``, streaming, counting the bytes really
    written against ``budget`` (default MAX_UNPACKED) and each member's announced size.
    Raises ImageError."""
    budget = MAX_UNPACKED if budget is None else budget
    left = budget
    for info in zf.infolist():
        dest = workdir.joinpath(*info.filename.split("/"))
        try:
            dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as out, zf.open(info) as src:
                written = 0
                while chunk := src.read(_CHUNK):
                    written += len(chunk)
                    if written > info.file_size:
                        raise ImageError(f"{where}: payload member {_short(info.filename)} unpacks to more "
                                         f"than the {info.file_size} bytes its central directory entry announces")
                    if written > left:
                        raise ImageError(f"{where}: the payload unpacks to more than the limit of {budget} bytes")
                    out.write(chunk)
        except _ZIP_ERRORS as exc:
            raise ImageError(f"{where}: cannot unpack {_short(info.filename)}: {exc}") from exc
        left -= written


def load(path: Path, workdir: Path, trust: signing.Trust | None = None) -> tuple[dict, Registry]:
    """Verify (as :func:`read`), unpack into ``workdir`` and import an image: (header, registry).
    Nothing is unpacked or imported before the signature, header and payload are verified;
    the registry the code builds must then equal the signed manifest.

    Raises FileNotFound, ImageError (also when the code does not match the manifest), SignatureError.
    """
    header, payload, _ = read(path, trust)
    shutil.rmtree(workdir, ignore_errors=True)
    try:
        workdir.mkdir(parents=True, mode=0o700)
    except OSError as exc:
        raise ImageError(f"cannot create {workdir} to unpack {path}: {exc.strerror or exc}") from exc
    with _open_zip(io.BytesIO(payload), len(payload), str(path)) as zf:
        _extract(zf, workdir, str(path))
    tag = re.sub(r"\W", "_", header["name"], flags=re.ASCII)[:64]
    ckernel.mark_image(workdir)             # its kernels are the library it carries, or none
    module = _import_tree(workdir, f"{tag}_{header['payload_sha256'][:12]}")
    version, registry = registry_of(module, str(path))
    if version != header["version"]:
        raise ImageError(f"{path}: code does not match the signed manifest: the code is version {version}, "
                         f"the manifest says {header['version']}")
    problem = manifest_mismatch(header["operators"], registry.table())
    if problem:
        raise ImageError(f"{path}: code does not match the signed manifest: {problem}")
    return header, registry


def manifest_mismatch(manifest: list, table: list) -> str | None:
    """What differs between a manifest and the operator table the code registered (compared
    as JSON values, every field), or None when they are equal."""
    registered = {op["id"]: op for op in json.loads(json.dumps(table))}
    listed = {op["id"]: op for op in manifest}
    for op_id in sorted(set(registered) | set(listed)):
        mine, theirs = registered.get(op_id), listed.get(op_id)
        if theirs is None:
            assert mine is not None     # the id came from one of the two
            return f"the code registers operator 0x{op_id:04x} {mine['name']}, which the manifest does not list"
        if mine is None:
            return f"the manifest lists operator 0x{op_id:04x} {theirs['name']}, which the code does not register"
        fields = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        if fields:
            return f"operator 0x{op_id:04x} {mine['name']} differs in {', '.join(fields)}"
    return None


def find(name: str, search: list[Path]) -> Path:
    """The first ``dir/name`` in ``search`` that exists. Raises ImageError for an invalid
    name (see protocol.remoteproc.firmware_name_problem) or an entry that is not a regular
    file (a symbolic link, a FIFO, a directory...), FileNotFound listing the dirs."""
    problem = firmware_name_problem(name)
    if problem is not None:
        raise ImageError(f"invalid firmware name {_short(name)}: {problem}")
    for directory in search:
        candidate = Path(directory) / name
        try:
            st = os.lstat(candidate)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:   # no such file can exist there: search on
                continue
            raise ImageError(f"cannot look up firmware {name!r} in {directory}: {exc.strerror or exc}") from exc
        except ValueError as exc:   # an embedded NUL in the search path
            raise ImageError(f"cannot look up firmware {name!r} in {str(directory)!r}: {exc}") from exc
        if stat.S_ISLNK(st.st_mode):
            raise ImageError(f"{candidate} is a symbolic link: a firmware image must be a regular file")
        if not stat.S_ISREG(st.st_mode):
            raise ImageError(f"{candidate} is not a regular file")
        return candidate
    raise errors.FileNotFound(f"firmware {name!r} not found in {', '.join(map(str, search)) or 'no directory'}")

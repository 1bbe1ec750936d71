"""DSP firmware images: build one from an operator source tree, verify it, load it.

An operator source tree is a folder whose ``firmware.py`` defines ``VERSION``
("x.y.z") and ``register(registry)``, which registers its operators explicitly
(other modules of the folder may be imported relatively). Every image also
carries the framework operators (PING, memcpy, ...), registered by the loader
first, like the runtime library a DSP image links.

File layout (all integers little-endian)::

    magic         8 bytes   b"VDSPFW\\x00\\x01"
    header_len    u32
    header        JSON: format, name, version, built, operators (the manifest:
                  id, name, params, inputs, outputs, doc), payload_size, payload_sha256
    payload       zip archive of the source tree (*.py, sorted, fixed timestamps)

Loading checks the magic, the sizes and the SHA-256 of the payload, so a
corrupt or truncated image is refused with a clear error before any code runs.
"""
from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import re
import shutil
import struct
import sys
import time
import zipfile
from pathlib import Path
from types import ModuleType

from protocol import errors
from dsp_side.operators import framework
from dsp_side.registry import Registry

MAGIC = b"VDSPFW\x00\x01"
_LEN = struct.Struct("<I")
FORMAT = 1
MAX_HEADER = 1 << 20
_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)


class ImageError(errors.RemoteprocInvalid):
    """An image that cannot be used (corrupt, truncated, wrong format): EINVAL."""


def _sources(src: Path) -> list[Path]:
    if not (src / "firmware.py").is_file():
        raise errors.FileNotFound(f"{src} is not an operator source tree: it has no firmware.py")
    return sorted(p for p in src.rglob("*.py") if "__pycache__" not in p.parts)


def _zip(src: Path, files: list[Path]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            info = zipfile.ZipInfo(str(path.relative_to(src)), _ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    return buf.getvalue()


def _import_tree(root: Path, tag: str) -> ModuleType:
    """Import ``root/firmware.py`` as a package module (relative imports work)."""
    name = f"vdsp_firmware_{tag}"
    spec = importlib.util.spec_from_file_location(name, root / "firmware.py",
                                                  submodule_search_locations=[str(root)])
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


def build(src: Path, out: Path, name: str | None = None) -> dict:
    """Build an image of ``src`` into ``out``; returns its header. Raises FileNotFound, ImageError."""
    src = src.resolve()
    files = _sources(src)
    module = _import_tree(src, f"build_{abs(hash(str(src)))}_{time.monotonic_ns()}")
    version, registry = registry_of(module, str(src))
    payload = _zip(src, files)
    header = {"format": FORMAT, "name": name or src.name, "version": version,
              "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "operators": registry.table(), "payload_size": len(payload),
              "payload_sha256": hashlib.sha256(payload).hexdigest()}
    blob = json.dumps(header, sort_keys=True).encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(MAGIC + _LEN.pack(len(blob)) + blob + payload)
    tmp.replace(out)  # atomic: a core never sees a half-written image
    return header


def read(path: Path) -> tuple[dict, bytes]:
    """(header, payload) of a verified image. Raises FileNotFound or ImageError."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise errors.FileNotFound(f"firmware image {path} does not exist") from None
    except OSError as exc:
        raise ImageError(f"cannot read firmware image {path}: {exc}") from exc
    if data[:len(MAGIC)] != MAGIC:
        raise ImageError(f"{path} is not a vdsp firmware image (bad magic)")
    if len(data) < len(MAGIC) + _LEN.size:
        raise ImageError(f"{path} is truncated")
    (hlen,) = _LEN.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _LEN.size
    if hlen > MAX_HEADER or start + hlen > len(data):
        raise ImageError(f"{path} is truncated (header of {hlen} bytes)")
    try:
        header = json.loads(data[start:start + hlen])
    except ValueError as exc:
        raise ImageError(f"{path}: corrupt header: {exc}") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ImageError(f"{path}: unsupported image format {header.get('format') if isinstance(header, dict) else '?'}")
    payload = data[start + hlen:]
    if len(payload) != header.get("payload_size"):
        raise ImageError(f"{path} is truncated: payload {len(payload)} of {header.get('payload_size')} bytes")
    if hashlib.sha256(payload).hexdigest() != header.get("payload_sha256"):
        raise ImageError(f"{path}: checksum mismatch, the image is corrupt")
    return header, payload


def load(path: Path, workdir: Path) -> tuple[dict, Registry]:
    """Verify, unpack into ``workdir`` and import an image: (header, registry).

    Raises FileNotFound or ImageError (also when the code does not match the manifest).
    """
    header, payload = read(path)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True, mode=0o700)
    with zipfile.ZipFile(io.BytesIO(payload)) as zf:
        for member in zf.namelist():
            if member.startswith("/") or ".." in Path(member).parts:
                raise ImageError(f"{path}: unsafe path {member!r} in the image")
        zf.extractall(workdir)
    module = _import_tree(workdir, f"{header['name']}_{header['payload_sha256'][:12]}")
    version, registry = registry_of(module, str(path))
    manifest = [(o["id"], o["name"]) for o in header["operators"]]
    if version != header["version"] or [(o["id"], o["name"]) for o in registry.table()] != manifest:
        raise ImageError(f"{path}: code does not match the image manifest")
    return header, registry


def find(name: str, search: list[Path]) -> Path:
    """The first ``dir/name`` in ``search`` that exists. Raises FileNotFound listing the dirs."""
    for directory in search:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    raise errors.FileNotFound(f"firmware {name!r} not found in {', '.join(map(str, search)) or 'no directory'}")

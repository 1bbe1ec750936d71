"""The disk cache of compiled kernel libraries, per user: ``$XDG_CACHE_HOME/vdsp-sim/ckernels``
(else ``~/.cache/vdsp-sim/ckernels``), one file per build key (:func:`dsp_side.ckernel.build.compile_tree`
hashes every input of a build into it, so an entry is never stale). Every ``vdsp up`` builds the
stock image in a process of its own, which a per-process memo does not reach.

Invariants: the directory is used only when it is a real directory (not a symlink) owned by this
user with no group or world access (made so, 0700, when missing); otherwise there is no cache and
the build compiles. An entry is opened with ``O_NOFOLLOW`` and read only from a regular file of
this user's, at most ``MAX_BYTES``; it is written to a new file (``O_EXCL``, 0600) and renamed into
place, so a reader sees a whole library or none. At most ``MAX_ENTRIES`` are kept (the oldest go).
Errors never fail a build: the cache is skipped.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

MAX_BYTES = 64 << 20        # a kernel library larger than this is neither stored nor read
MAX_ENTRIES = 32
_KEY = re.compile(r"^[0-9a-f]{64}$")


def directory() -> Path | None:
    """The cache directory, made if missing; None when it is not a private directory of ours."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if base.startswith("/") else Path.home() / ".cache"
    where = root / "vdsp-sim" / "ckernels"
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(where)
    except (OSError, RuntimeError):           # RuntimeError: no home directory
        return None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return where


def load(key: str) -> bytes | None:
    """The library stored for ``key`` (a sha256 hex digest), or None."""
    where = directory()
    if where is None or not _KEY.match(key):
        return None
    try:
        fd = os.open(where / f"{key}.so", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022 or st.st_size > MAX_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_BYTES + 1)
        return data if 0 < len(data) <= MAX_BYTES else None
    except OSError:
        return None
    finally:
        os.close(fd)


def store(key: str, data: bytes) -> None:
    """Keep ``data`` as the library of ``key``; silently nothing when the cache is unusable."""
    where = directory()
    if where is None or not _KEY.match(key) or not 0 < len(data) <= MAX_BYTES:
        return
    tmp = where / f".{key}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, where / f"{key}.so")
        _prune(where)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _prune(where: Path) -> None:
    """Drop the oldest entries beyond MAX_ENTRIES."""
    entries = []
    for path in where.glob("*.so"):
        try:
            entries.append((os.lstat(path).st_mtime_ns, path))
        except OSError:
            continue
    for _, path in sorted(entries)[:max(0, len(entries) - MAX_ENTRIES)]:
        try:
            os.unlink(path)
        except OSError:
            pass

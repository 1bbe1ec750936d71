"""The disk cache of compiled kernel libraries, per user: ``$XDG_CACHE_HOME/vdsp-sim/ckernels``
(else ``~/.cache/vdsp-sim/ckernels``), one file per build key (:func:`dsp_side.ckernel.build.compile_tree`
hashes every input of a build into it, so an entry is never stale): ``KEY.so`` a tree's library,
``KEY.o`` the runtime's object file for a level and sanitizer (``SUFFIXES``). Every ``vdsp up`` builds the
stock image in a process of its own, which a per-process memo does not reach.

Invariants: the directory is used only when it is a real directory (not a symlink) owned by this
user with no group or world access (made so, 0700, when missing); otherwise there is no cache and
the build compiles. An entry is opened with ``O_NOFOLLOW`` and read only from a regular file of
this user's, at most ``MAX_BYTES``; it is written to a new file (``O_EXCL``, 0600) and renamed into
place, so a reader sees a whole library or none. At most ``MAX_ENTRIES`` entries and
``MAX_TOTAL_BYTES`` in all are kept: the least recently used go (a read marks its entry used), so
the stock image's libraries, which every SoC's start reads, outlive a session of many kernels built
once. The bounds hold the builds of a test run (about 60 keys: an image is a library and a
runtime object per x86-64 level) with room to spare: at 32 entries each run evicted the last
one's builds and compiled them again. Errors never fail a build: the cache is skipped.

One build of a key at a time (:func:`building`): processes of this user that miss the same key at
once (the SoCs of a test run starting side by side, two ``vdsp up``) do not each compile it; the
first compiles while the others wait on its lock (``flock`` on a ``.KEY.lock`` file of the
directory, opened as the entries are) and then read what it stored. The kernel releases the lock
of a process that dies; a waiter gives up after ``LOCK_WAIT_S`` and compiles for itself (a build
that slow is not one to wait for twice).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path

MAX_BYTES = 64 << 20        # a kernel library larger than this is neither stored nor read
MAX_ENTRIES = 256
MAX_TOTAL_BYTES = 256 << 20  # what the entries may take in all (a library is 40-200 KiB here)
LOCK_WAIT_S = 300.0         # how long a build waits for another process's build of the same key
_LOCK_POLL_S = 0.05
_KEY = re.compile(r"^[0-9a-f]{64}$")
SUFFIXES = (".so", ".o")    # a library, an object file


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


def load(key: str, suffix: str = ".so") -> bytes | None:
    """The library (``suffix`` ".o": object file) stored for ``key`` (a sha256 hex digest), or None."""
    where = directory()
    if where is None or not _KEY.match(key) or suffix not in SUFFIXES:
        return None
    try:
        fd = os.open(where / f"{key}{suffix}", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022 or st.st_size > MAX_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_BYTES + 1)
        if not 0 < len(data) <= MAX_BYTES:
            return None
        os.utime(fd)            # used now: the last entry to go (_prune)
        return data
    except OSError:
        return None
    finally:
        os.close(fd)


def store(key: str, data: bytes, suffix: str = ".so") -> None:
    """Keep ``data`` as the library (``suffix`` ".o": object file) of ``key``; silently nothing
    when the cache is unusable."""
    where = directory()
    if where is None or not _KEY.match(key) or suffix not in SUFFIXES or not 0 < len(data) <= MAX_BYTES:
        return
    tmp = where / f".{key}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, where / f"{key}{suffix}")
        _prune(where)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _prune(where: Path) -> None:
    """Drop the least recently used entries while more than MAX_ENTRIES or MAX_TOTAL_BYTES are kept."""
    entries = []
    for path in (p for suffix in SUFFIXES for p in where.glob(f"*{suffix}")):
        try:
            st = os.lstat(path)
        except OSError:
            continue
        entries.append((st.st_mtime_ns, st.st_size, path))
    entries.sort()
    count, total = len(entries), sum(size for _, size, _ in entries)
    for _, size, path in entries:
        if count <= MAX_ENTRIES and total <= MAX_TOTAL_BYTES:
            break
        try:
            os.unlink(path)
        except OSError:
            pass
        count, total = count - 1, total - size


@contextlib.contextmanager
def building(key: str, wait_s: float = LOCK_WAIT_S) -> Iterator[bool]:
    """Hold the build of ``key`` while the block runs: another process of this user that enters
    ``building(key)`` meanwhile waits (at most ``wait_s``) until this one leaves; the block reads
    the cache again (another process may have stored the key while this one waited) and builds
    only on a miss. Yields True while the lock is held, False when there is none to hold (no
    cache, a lock path that is not this user's regular file, ``wait_s`` passed): build anyway."""
    where = directory()
    path = where / f".{key}.lock" if where is not None and _KEY.match(key) else None
    fd = _lock(path, time.monotonic() + wait_s) if path is not None else None
    try:
        yield fd is not None
    finally:
        if fd is not None and path is not None:
            try:
                os.unlink(path)     # still the file locked (_lock checked): the next build makes a new one
            except OSError:
                pass
            os.close(fd)            # and lets the waiters go


def _lock(path: Path, deadline: float) -> int | None:
    """An fd of ``path`` with an exclusive flock, ``path`` still naming that file (a holder that
    left unlinks it: a waiter that had opened the old file opens the new one); None when ``path``
    cannot be this user's regular file or ``deadline`` passes."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return None
        kept = False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
                return None
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        return None
                    time.sleep(_LOCK_POLL_S)
            try:
                now: os.stat_result | None = os.lstat(path)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                kept = True
                return fd
            # the file locked was left and unlinked by its holder: open the one there now
        except OSError:
            return None
        finally:
            if not kept:
                os.close(fd)

"""The shared DDR: /dev/shm segments addressed by simulated physical addresses.

A physical address is ``(owner << 40) | offset``. Every process that allocates
DDR is an *owner*: it picks a random id in [1, 2**22), holds an exclusive
flock on ``vdsp-{owner:06x}.lock`` for its whole life, and names its segments
``vdsp-{owner:06x}-{offset:010x}``. Offsets grow monotonically from 0x1000 in
page steps and are never reused while the owner lives. Anyone may
:func:`reap` the files of owners whose lock is no longer held.

``VDSP_SHM_DIR`` (read at call time) replaces ``/dev/shm``, e.g. for tests.
"""
from __future__ import annotations

import atexit
import fcntl
import mmap
import os
import re
import secrets
import threading
import time

from protocol.errors import SysInvalidArgument, SysOutOfMemory

PAGE = 4096
MAX_ALLOC = 2**32 - 1               # hbSysAllocMem takes a uint32 size
OFFSET_BITS = 40
OFFSET_MASK = (1 << OFFSET_BITS) - 1
MAX_OWNER = 1 << 22                 # owner ids are in [1, MAX_OWNER)
FIRST_OFFSET = 0x1000               # offset 0 is never a valid address
ORPHAN_AGE = 2.0                    # seconds before a lock-less file may be reaped
PREFIX = "vdsp-"

_SEG_RE = re.compile(r"vdsp-([0-9a-f]{6})-([0-9a-f]{10})")
_LOCK_RE = re.compile(r"vdsp-([0-9a-f]{6})\.lock")
_TMP_RE = re.compile(r"vdsp-([0-9a-f]{6})\.lock\.tmp[0-9]+")


def shm_dir() -> str:
    """The directory holding the DDR files (``VDSP_SHM_DIR`` or ``/dev/shm``)."""
    return os.environ.get("VDSP_SHM_DIR") or "/dev/shm"


_default_dir = shm_dir   # for functions whose ``shm_dir`` parameter shadows the name


def parse_phys(phys: int) -> tuple[int, int]:
    """``phys`` -> ``(owner, offset)``."""
    return phys >> OFFSET_BITS, phys & OFFSET_MASK


def make_phys(owner: int, offset: int) -> int:
    return (owner << OFFSET_BITS) | offset


def segment_name(owner: int, offset: int) -> str:
    return f"vdsp-{owner:06x}-{offset:010x}"


def lock_name(owner: int) -> str:
    return f"vdsp-{owner:06x}.lock"


def round_up(size: int) -> int:
    return (size + PAGE - 1) // PAGE * PAGE


def check_size(size: object) -> int:
    """``size`` if it is an int in [1, MAX_ALLOC]; raises SysInvalidArgument otherwise."""
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_ALLOC:
        raise SysInvalidArgument(f"memory size {size!r} must be an integer in [1, {MAX_ALLOC}]")
    return size


def find_segment(owner: int, offset: int, directory: str | None = None) -> tuple[int, str] | None:
    """``(base, path)`` of ``owner``'s segment with the largest base <= ``offset``, or None.

    The segment may not contain ``offset``; callers check its size. Scans the directory.
    """
    directory = directory or shm_dir()
    prefix = f"vdsp-{owner:06x}-"
    best = -1
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return None
    for name in names:
        if name.startswith(prefix) and (m := _SEG_RE.fullmatch(name)):
            base = int(m[2], 16)
            if best < base <= offset:
                best = base
    return None if best < 0 else (best, os.path.join(directory, segment_name(owner, best)))


def _unlink_quiet(path: str) -> bool:
    """Unlink ``path``; False if it was already gone (others may reap concurrently)."""
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


class Owner:
    """This process's claim on an owner id in one DDR directory.

    Invariant: while open, ``lock_fd`` holds LOCK_EX on ``lock_path``, and every
    segment this owner created and did not unlink is in ``_live``.
    """

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.pid = os.getpid()
        self.closed = False
        self._mutex = threading.Lock()
        self._next = FIRST_OFFSET
        self._live: dict[int, str] = {}     # offset -> segment file name
        self.id, self.lock_fd = _claim_owner_id(directory)

    @property
    def lock_path(self) -> str:
        return os.path.join(self.dir, lock_name(self.id))

    def next_offset(self, size: int) -> int:
        """Reserve address space for ``size`` bytes. Raises SysOutOfMemory when exhausted."""
        with self._mutex:
            if self.closed:
                raise SysOutOfMemory(f"DDR owner 0x{self.id:06x} is closed")
            offset, self._next = self._next, self._next + round_up(size)
            if self._next > OFFSET_MASK + 1:
                raise SysOutOfMemory(f"address space of DDR owner 0x{self.id:06x} is exhausted")
            return offset

    def add(self, offset: int, name: str) -> None:
        with self._mutex:
            self._live[offset] = name

    def discard(self, offset: int) -> None:
        with self._mutex:
            self._live.pop(offset, None)

    def live_names(self) -> list[str]:
        with self._mutex:
            return list(self._live.values())

    def close(self) -> None:
        """Unlink every live segment and the lock; a no-op in a forked child or when closed."""
        if self.closed or self.pid != os.getpid():
            return
        with self._mutex:
            self.closed = True
            names, self._live = list(self._live.values()), {}
        for name in names:
            _unlink_quiet(os.path.join(self.dir, name))
        _unlink_quiet(self.lock_path)   # segments first: a lock-less segment looks orphaned
        os.close(self.lock_fd)

    def forget(self) -> None:
        """In a forked child: drop the inherited lock fd without touching the parent's files."""
        if not self.closed:
            self.closed = True
            try:
                os.close(self.lock_fd)
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"Owner(id=0x{self.id:06x}, dir={self.dir!r}, pid={self.pid}, closed={self.closed})"


def _claim_owner_id(directory: str) -> tuple[int, int]:
    """Pick a free random owner id; return ``(id, fd)`` with fd holding LOCK_EX on its lock.

    The lock is created locked under a temporary name and hard-linked into place,
    so the final name never exists unlocked. Raises SysOutOfMemory if impossible.
    """
    for _ in range(1000):
        owner = 1 + secrets.randbelow(MAX_OWNER - 1)
        final = os.path.join(directory, lock_name(owner))
        tmp = f"{final}.tmp{os.getpid()}"
        try:
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        except FileExistsError:     # left by a dead process that had our pid
            _unlink_quiet(tmp)
            continue
        except OSError as exc:
            raise SysOutOfMemory(f"cannot create DDR owner lock {tmp}: {exc}") from exc
        try:
            os.fchmod(fd, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.link(tmp, final)
        except (FileExistsError, FileNotFoundError):   # id taken, or tmp reaped meanwhile
            os.close(fd)
            _unlink_quiet(tmp)
            continue
        except OSError as exc:
            os.close(fd)
            _unlink_quiet(tmp)
            raise SysOutOfMemory(f"cannot create DDR owner lock {final}: {exc}") from exc
        _unlink_quiet(tmp)
        return owner, fd
    raise SysOutOfMemory(f"no free DDR owner id in {directory}")


_registry_mutex = threading.Lock()
_owners: dict[str, Owner] = {}          # directory -> this process's open owner there


def current_owner() -> Owner:
    """This process's owner for the current ``shm_dir()``, created on first use.

    Raises SysOutOfMemory if the lock cannot be created.
    """
    directory = shm_dir()
    with _registry_mutex:
        owner = _owners.get(directory)
        if owner is None or owner.closed or owner.pid != os.getpid():
            owner = _owners[directory] = Owner(directory)
        return owner


def close_owner(directory: str | None = None) -> None:
    """Close this process's owner in ``directory`` (default ``shm_dir()``), if any."""
    with _registry_mutex:
        owner = _owners.pop(directory or shm_dir(), None)
    if owner is not None:
        owner.close()


def _close_all() -> None:
    with _registry_mutex:
        owners = list(_owners.values())
        _owners.clear()
    for owner in owners:
        owner.close()


def _after_fork_in_child() -> None:
    global _registry_mutex
    _registry_mutex = threading.Lock()
    for owner in _owners.values():
        owner.forget()
    _owners.clear()


atexit.register(_close_all)
os.register_at_fork(after_in_child=_after_fork_in_child)


class Segment:
    """One DDR allocation: a file of exactly ``size`` bytes, mapped in ``buf``."""

    def __init__(self, owner: Owner, offset: int, size: int, buf: mmap.mmap) -> None:
        self.owner = owner
        self.offset = offset
        self.size = size
        self.buf = buf
        self.phys = make_phys(owner.id, offset)
        self.name = segment_name(owner.id, offset)
        self.path = os.path.join(owner.dir, self.name)
        self.unlinked = False

    @classmethod
    def create(cls, size: int, owner: Owner | None = None) -> "Segment":
        """Allocate ``size`` zeroed bytes of DDR.

        Raises SysInvalidArgument for a bad size, SysOutOfMemory if the file
        cannot be created, sized or mapped.
        """
        check_size(size)
        owner = owner or current_owner()
        for _ in range(64):
            offset = owner.next_offset(size)
            path = os.path.join(owner.dir, segment_name(owner.id, offset))
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
                break
            except FileExistsError:     # leftover of a dead owner that had our id
                continue
            except OSError as exc:
                raise SysOutOfMemory(f"cannot allocate {size} bytes of DDR at {path}: {exc}") from exc
        else:
            raise SysOutOfMemory(f"cannot allocate {size} bytes of DDR: stale files of owner 0x{owner.id:06x}")
        owner.add(offset, os.path.basename(path))
        try:
            os.fchmod(fd, 0o600)
            os.ftruncate(fd, size)
            os.posix_fallocate(fd, 0, size)   # reserve now: a full tmpfs must not SIGBUS later
            buf = mmap.mmap(fd, size)
        except OSError as exc:
            owner.discard(offset)
            _unlink_quiet(path)
            raise SysOutOfMemory(f"cannot allocate {size} bytes of DDR at {path}: {exc}") from exc
        finally:
            os.close(fd)
        return cls(owner, offset, size, buf)

    def unlink(self) -> None:
        """Remove the file (the DSP then sees the address as freed). Never the parent's after fork."""
        if self.unlinked:
            return
        self.unlinked = True
        if self.owner.pid == os.getpid():
            _unlink_quiet(self.path)
            self.owner.discard(self.offset)

    def close(self) -> None:
        """Unlink and unmap. Views still exported keep the mapping until they are gone."""
        self.unlink()
        try:
            self.buf.close()
        except BufferError:
            pass    # numpy arrays / memoryviews still use it; unmapped when they die

    def __repr__(self) -> str:
        return f"Segment(phys=0x{self.phys:x}, size={self.size}, unlinked={self.unlinked})"


def reap(shm_dir: str | None = None) -> list[str]:
    """Unlink the files of dead owners and old orphans; return the unlinked names.

    Safe to run concurrently from several processes. Never touches a file
    whose name does not match the vdsp patterns, nor a live owner's files
    (including the caller's own: its lock cannot be taken a second time).
    """
    directory = shm_dir or _default_dir()
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    removed: list[str] = []
    for name in names:
        if m := _LOCK_RE.fullmatch(name):
            removed += _reap_owner(directory, int(m[1], 16))
        elif _TMP_RE.fullmatch(name):
            removed += _reap_tmp(directory, name)
    removed += _reap_orphans(directory, names)
    return removed


def _lock_if_dead(path: str) -> int | None:
    """An fd holding LOCK_EX on ``path`` if nobody holds it and it is still that file, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:     # gone, or not ours to open
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        st, now = os.fstat(fd), os.stat(path)
        if (st.st_ino, st.st_dev) == (now.st_ino, now.st_dev):
            return fd   # still the file at that name: another reaper has not removed it
    except OSError:     # held (owner alive), or vanished meanwhile
        pass
    os.close(fd)
    return None


def _reap_owner(directory: str, owner: int) -> list[str]:
    lock_path = os.path.join(directory, lock_name(owner))
    fd = _lock_if_dead(lock_path)
    if fd is None:
        return []
    try:    # we hold the dead owner's lock: nobody can claim the id until we unlink it
        prefix = f"vdsp-{owner:06x}-"
        removed = [n for n in os.listdir(directory)
                   if n.startswith(prefix) and _SEG_RE.fullmatch(n)
                   and _unlink_quiet(os.path.join(directory, n))]
        if _unlink_quiet(lock_path):
            removed.append(lock_name(owner))
        return removed
    finally:
        os.close(fd)


def _reap_tmp(directory: str, name: str) -> list[str]:
    """A temporary lock left by a creator that died: unlink it alone (its owner id may be live)."""
    path = os.path.join(directory, name)
    fd = _lock_if_dead(path)
    if fd is None:
        return []
    try:
        if time.time() - os.fstat(fd).st_mtime >= ORPHAN_AGE and _unlink_quiet(path):
            return [name]
        return []
    finally:
        os.close(fd)


def _reap_orphans(directory: str, names: list[str]) -> list[str]:
    """Segments whose owner has no lock file at all, older than ORPHAN_AGE."""
    removed = []
    now = time.time()
    for name in names:
        m = _SEG_RE.fullmatch(name)
        if not m or os.path.exists(os.path.join(directory, lock_name(int(m[1], 16)))):
            continue
        path = os.path.join(directory, name)
        try:
            if now - os.stat(path).st_mtime < ORPHAN_AGE:
                continue    # maybe a creator that has just claimed the id
        except FileNotFoundError:
            continue
        if _unlink_quiet(path):
            removed.append(name)
    return removed

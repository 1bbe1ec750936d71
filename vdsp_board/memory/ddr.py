"""The shared DDR: /dev/shm segments addressed by simulated physical addresses.

A physical address is ``(owner << 40) | offset``. Every process that allocates
DDR is an *owner*: it picks a random id in [1, 2**22), holds an exclusive
flock on ``vdsp-{owner:06x}.lock`` for its whole life, and names its segments
``vdsp-{owner:06x}-{offset:010x}``. Offsets grow monotonically from 0x1000 in
page steps and are never reused while the owner lives. Anyone may
:func:`reap` the files of owners whose lock is no longer held.

Finding things without scanning: a handle is resolved by opening the exact name
``segment_name(owner, offset)`` (a handle usually starts at its buffer's base);
only an interior address needs a directory listing, and listings are reused
while the directory's mtime shows nothing was created or unlinked. :func:`reap`
checks the locks of the owners it knows every call, and lists the directory
again only when it changed, at most SCAN_BUDGET of the time. Mappings keep no
file descriptor (:func:`map_shared`), and segment files are opened without
following symlinks and only if they are regular files of this user
(:func:`open_segment`).

``VDSP_SHM_DIR`` (read at call time) replaces ``/dev/shm``, e.g. for tests.
"""
from __future__ import annotations

import atexit
import bisect
import contextlib
import ctypes
import errno
import fcntl
import functools
import logging
import mmap
import os
import random
import re
import stat
import sys
import threading
import time

from protocol.errors import SysInvalidArgument, SysOutOfMemory
from vdsp_board.config import settings
from vdsp_board.observability.log import RateLimited

# os.urandom, as the secrets module (which imports hmac and OpenSSL's hashlib: ~15 ms of CPU in each
# process that claims an owner) draws from
_URANDOM = random.SystemRandom()

PAGE = 4096
MAX_ALLOC = 2**32 - 1               # hbSysAllocMem takes a uint32 size
OFFSET_BITS = 40
OFFSET_MASK = (1 << OFFSET_BITS) - 1
MAX_OWNER = 1 << 22                 # owner ids are in [1, MAX_OWNER)
FIRST_OFFSET = 0x1000               # offset 0 is never a valid address
ADOPTED_FIRST_OFFSET = 1 << 39      # an adopted owner's allocations (adopt_owner): the upper half of its addresses
ORPHAN_AGE = 2.0                    # seconds before a lock-less file may be reaped
SIDECARS = (".acl", ".acl.tmp")     # files an owner keeps beside its lock (vdsp_board.memory.acl); they go before the lock
LISTING_MAX_AGE = 60.0              # seconds a directory listing is reused at most, whatever the mtime says
RACY_NS = 2_000_000_000             # a listing is reusable only if the directory's mtime was this much older
SCAN_BUDGET = 0.01                  # reap() lists a changed directory at most this fraction of the time
MAX_LISTED_DIRS = 8                 # directories whose listing / reap state is kept

_SEG_RE = re.compile(r"vdsp-([0-9a-f]{6})-([0-9a-f]{10})")
_LOCK_RE = re.compile(r"vdsp-([0-9a-f]{6})\.lock")
_TMP_RE = re.compile(r"vdsp-([0-9a-f]{6})\.lock\.tmp[0-9]+")


def shm_dir() -> str:
    """The directory holding the DDR files (``VDSP_SHM_DIR`` or ``/dev/shm``)."""
    return settings.current().shm_dir


_default_dir = shm_dir   # for functions whose ``shm_dir`` parameter shadows the name

QUOTA_ENV = "VDSP_DDR_QUOTA"
DEFAULT_QUOTA_SHARE = 25        # percent of the DDR file system one owner may hold by default
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_QUOTA_RE = re.compile(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*|\s*(\d+(?:\.\d+)?)\s*%\s*", re.I)


RESERVE_ENV = "VDSP_DDR_RESERVE"
DEFAULT_RESERVE_SHARE = 25      # percent of the DDR file system kept free for the next client


def quota(directory: str | None = None) -> int:
    """Bytes of DDR one owner may hold in ``directory``: ``VDSP_DDR_QUOTA`` (read at call time:
    bytes, with an optional K/M/G suffix, or a percentage of the directory's file system),
    by default DEFAULT_QUOTA_SHARE % of that file system, so one client cannot fill the DDR
    and starve the others. Raises SysInvalidArgument for a malformed value."""
    return _bytes_setting(QUOTA_ENV, DEFAULT_QUOTA_SHARE, directory)


def reserve(directory: str | None = None) -> int:
    """Bytes of the DDR file system kept free for the next client (``VDSP_DDR_RESERVE``, same
    forms as the quota; by default DEFAULT_RESERVE_SHARE %). See :func:`reserve_allows`."""
    return _bytes_setting(RESERVE_ENV, DEFAULT_RESERVE_SHARE, directory)


def _bytes_setting(env: str, default_share: int, directory: str | None) -> int:
    text = (settings.current().raw(env) or "").strip() or f"{default_share}%"
    m = _QUOTA_RE.fullmatch(text)
    if not m:
        raise SysInvalidArgument(f"{env}={text!r}: give bytes (e.g. 268435456, 256M, 2G) or a share "
                                 "of the DDR file system (e.g. 25%)")
    if m[1] is not None:
        return int(m[1]) * _UNITS[m[2].upper()]
    percent = float(m[3])
    if not 0 < percent <= 100:
        raise SysInvalidArgument(f"{env}={text!r}: a share must be in (0, 100] %")
    st = os.statvfs(directory or shm_dir())
    return int(st.f_blocks * st.f_frsize * percent / 100)


def reserve_allows(free: int, held: int, size: int, keep: int) -> bool:
    """May an owner holding ``held`` bytes take ``size`` more when the DDR has ``free`` bytes?

    Normally the allocation must leave ``keep`` bytes free (the reserve). Once less than that
    is free, an owner may still bring what it holds up to half of what it holds and what is
    free together, leaving the other half: so clients that allocate until refused always
    leave the next one a share (half of what is left), however many came before.
    """
    return free - size >= min(keep, (free + held) // 2)


LOCK_WAIT_S = 1.0       # seconds an allocation waits for its user's reserve lock, then checks without it
_LOCK_POLL_S = (0.0005, 0.01)   # first and longest pause between two tries of the lock
_log = logging.getLogger("vdsp.ddr")
_warn = RateLimited(_log, 60.0)


def reserve_lock_name(uid: int) -> str:
    """The name of user ``uid``'s reserve lock in a DDR directory (see :func:`_reserve_lock`)."""
    return f"vdsp-reserve-{uid}.lock"


def _open_reserve_lock(path: str) -> int | None:
    """An fd of the reserve lock file ``path``: a regular file of this user that nobody else may
    open (mode 0600), created if missing, never through a symlink. An entry of this user that is
    anything else (a symlink, a FIFO, mode 0644: someone else may hold it open) is removed and made
    again. None if the name is another user's (squatted: not ours to remove)."""
    uid = os.geteuid()
    for _ in range(8):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
        except OSError:     # a symlink (ELOOP), a directory, another user's file (EACCES)...
            fd = -1
        try:
            st = os.fstat(fd) if fd >= 0 else os.lstat(path)
        except FileNotFoundError:
            continue        # removed meanwhile by its holder: make it again
        except OSError:
            st = None
        if st is not None and st.st_uid == uid and stat.S_ISREG(st.st_mode) and not st.st_mode & 0o077:
            if fd >= 0:
                return fd
        if fd >= 0:
            os.close(fd)
        if st is None or st.st_uid != uid:
            return None
        try:
            os.unlink(path)     # ours, but not a lock we can trust: make a proper one
        except FileNotFoundError:
            pass
        except OSError:
            return None         # a directory of ours, say
    return None


@contextlib.contextmanager
def _reserve_lock(directory: str):
    """Hold this user's reserve lock in the DDR ``directory`` while in the block; yields True if
    held, False if the block runs without it.

    The lock is ``flock(LOCK_EX)`` on the file ``reserve_lock_name(euid)`` in the directory (the
    directory every peer of the SoC shares, also across containers), a regular file of this user
    with mode 0600: no other user can open it, so none can hold it. It exists only while held:
    the holder unlinks it before it lets go, and a taker checks that the file it locked is still
    the one at the name (else it tries again). Tries without blocking, for at most LOCK_WAIT_S
    (a process of this user stopped while it holds the lock delays others by that much, never
    more); past it, or when another user squats the name, the block runs without the lock (the
    reserve check is then not serialised with others', nothing else changes) and a warning is
    logged at most once a minute."""
    path = os.path.join(directory, reserve_lock_name(os.geteuid()))
    deadline = time.monotonic() + LOCK_WAIT_S
    pause = _LOCK_POLL_S[0]
    while True:
        fd = _open_reserve_lock(path)
        if fd is None:
            _warn.warn(("squatted", path), "DDR reserve lock %s is another user's: allocating without it", path)
            yield False
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)    # held by another process of this user
            if time.monotonic() >= deadline:
                _warn.warn(("held", path), "DDR reserve lock %s held for %.1f s by another process of this user: "
                           "allocating without it", path, LOCK_WAIT_S)
                yield False
                return
            time.sleep(pause)
            pause = min(2 * pause, _LOCK_POLL_S[1])
            continue
        try:
            st, now = os.fstat(fd), os.lstat(path)
            current = (st.st_ino, st.st_dev) == (now.st_ino, now.st_dev)
        except OSError:     # unlinked by the holder we waited for
            current = False
        if not current:
            os.close(fd)
            continue
        try:
            yield True
        finally:
            _unlink_quiet(path)     # before letting go: whoever waits on this file tries the name again
            os.close(fd)
        return


@contextlib.contextmanager
def _reserved(directory: str, held: int, size: int):
    """Hold this user's reserve lock in the DDR directory (:func:`_reserve_lock`) while a segment
    of ``size`` bytes is checked against the reserve and made, so that the next check of this
    user sees it. Raises SysOutOfMemory."""
    keep = reserve(directory)
    with _reserve_lock(directory):
        st = os.statvfs(directory)
        free = st.f_bavail * st.f_frsize
        if not reserve_allows(free, held, size, keep):
            raise SysOutOfMemory(
                f"DDR has {free} bytes free; {size} more for this owner (holding {held}) would leave less than the "
                f"next client's share (the reserve of {keep} bytes, {RESERVE_ENV}, or half of what is left): free "
                "buffers first")
        yield


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

    The segment may not contain ``offset``; callers check its size. A page-aligned
    ``offset`` is first tried as a base (one lstat: the common case of a handle at
    the start of its buffer); otherwise the base is looked up in a listing of the
    directory, reused while it is exact (see :class:`_Listing`).
    """
    if not 0 < owner < MAX_OWNER:
        return None
    directory = directory or shm_dir()
    name = segment_name(owner, offset)
    if offset % PAGE == 0 and os.path.lexists(os.path.join(directory, name)):
        return offset, os.path.join(directory, name)
    listing = _exact_listing(directory)
    if listing is None:
        return None
    names, prefix = listing.names, name[:12]
    i = bisect.bisect_right(names, name) - 1    # fixed-width lowercase hex: name order is address order
    while i >= 0 and names[i].startswith(prefix):
        if _SEG_RE.fullmatch(names[i]):
            return int(names[i][12:], 16), os.path.join(directory, names[i])
        i -= 1      # a stray name such as "vdsp-xxxxxx-0000001000.bak"
    return None


def open_segment(path: str) -> tuple[int, os.stat_result]:
    """``(fd, fstat)`` of the segment file ``path`` opened read-write, never through a symlink.

    Raises OSError unless it is a regular file of this process's user: a symlink
    (ELOOP), a FIFO, a directory or another user's file named like a segment is refused.
    """
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise OSError(errno.EPERM, "not a regular file of this user", path)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


_MAP_FIXED = 0x10       # Linux's value on every architecture the simulator runs on
_unusable: list[mmap.mmap] = []     # placeholders whose replacement failed: never unmapped


@functools.lru_cache(maxsize=None)
def _libc_mmap():
    fn = ctypes.CDLL(None, use_errno=True).mmap
    fn.restype = ctypes.c_void_p
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    return fn


def map_shared(fd: int, size: int, guard: bool = False) -> mmap.mmap:
    """A shared read-write mapping of the first ``size`` bytes of ``fd`` that keeps no fd.

    ``mmap.mmap(fd, ...)`` keeps a duplicate of ``fd`` as long as it lives (until
    Python 3.13's ``trackfd=False``), so 20,000 buffers would hold 20,000 open files.
    Here the mmap object is created anonymous (no fd), then its pages are replaced at
    the same address by the file's (``MAP_FIXED``). It then behaves as any mmap
    (slicing, buffer protocol, ``close`` refused while views exist, unmapped when
    closed or collected), except ``size()`` and ``resize()``. The caller may close
    ``fd`` at once. ``guard``: one more page after the file's pages (at ``round_up(size)``),
    PROT_NONE for good, part of the mmap object (its length counts it; never touch it): code
    that runs off the end of the mapping faults there instead of reaching the next mapping
    (the DSP side's, for C kernels). Raises OSError.
    """
    if sys.version_info >= (3, 13) and not guard:
        return mmap.mmap(fd, size, trackfd=False)
    length = round_up(size) + PAGE if guard else size
    mm = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | getattr(mmap, "MAP_NORESERVE", 0))
    probe = ctypes.c_char.from_buffer(mm)
    addr = ctypes.addressof(probe)
    del probe       # releases the export: mm can be closed again
    got = _libc_mmap()(addr, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | _MAP_FIXED, fd, 0)
    if got != addr:
        err = ctypes.get_errno()
        _unusable.append(mm)    # a failed MAP_FIXED may leave a hole someone else maps: never munmap it
        raise OSError(err, os.strerror(err))
    if guard and _libc_mprotect()(addr + round_up(size), PAGE, 0) != 0:    # 0: PROT_NONE
        err = ctypes.get_errno()
        mm.close()
        raise OSError(err, os.strerror(err))
    return mm


@functools.lru_cache(maxsize=None)
def _libc_mprotect():
    fn = ctypes.CDLL(None, use_errno=True).mprotect
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return fn


class _Listing:
    """The sorted names in a directory at one moment, and how to tell it is still exact.

    ``key`` is the directory's (dev, ino, mtime_ns) taken before listing. Any create,
    unlink or rename in the directory stamps a new mtime, so an unchanged key means
    an unchanged directory, provided the listed mtime was at least RACY_NS older than
    the listing (*trusted*): mtimes are coarse (tmpfs and ext4 tick with jiffies, some
    file systems by seconds), and a change made just after a listing could otherwise
    share its mtime. An untrusted listing is exact when taken but is not reused.
    """

    __slots__ = ("key", "names", "trusted", "taken", "cost")

    def __init__(self, directory: str) -> None:
        """Raises FileNotFoundError if ``directory`` does not exist."""
        cpu, now_ns = time.thread_time(), time.time_ns()
        self.taken = time.monotonic()
        st = os.stat(directory)
        self.key = (st.st_dev, st.st_ino, st.st_mtime_ns)
        self.names = sorted(os.listdir(directory))
        self.trusted = st.st_mtime_ns <= now_ns - RACY_NS
        self.cost = time.thread_time() - cpu     # CPU seconds: a busy machine does not inflate it

    def exact(self, key: tuple[int, int, int]) -> bool:
        """True if nothing was created or unlinked since, ``key`` being the directory's now."""
        return self.trusted and key == self.key and time.monotonic() - self.taken < LISTING_MAX_AGE

    def group(self, owner: int) -> list[str]:
        """The segment names of ``owner``."""
        prefix = f"vdsp-{owner:06x}-"
        lo = bisect.bisect_left(self.names, prefix)
        hi = bisect.bisect_left(self.names, prefix + "~", lo)     # "~" sorts after every hex digit
        return [n for n in self.names[lo:hi] if _SEG_RE.fullmatch(n)]


_listing_mutex = threading.Lock()
_listings: dict[str, _Listing] = {}     # directory -> its latest listing (exact or not)


def _dir_key(directory: str) -> tuple[int, int, int]:
    st = os.stat(directory)
    return st.st_dev, st.st_ino, st.st_mtime_ns


def _bounded_put(table: dict, key: str, value: object) -> None:
    table.pop(key, None)
    table[key] = value
    while len(table) > MAX_LISTED_DIRS:
        del table[next(iter(table))]


def _new_listing(directory: str) -> _Listing:
    """List ``directory`` now and remember it. Raises FileNotFoundError."""
    listing = _Listing(directory)
    with _listing_mutex:
        _bounded_put(_listings, directory, listing)
    return listing


def _cached_listing(directory: str) -> _Listing | None:
    with _listing_mutex:
        return _listings.get(directory)


def _exact_listing(directory: str) -> _Listing | None:
    """A listing of ``directory`` exact now: the cached one if still exact, else a new one.

    None if the directory does not exist.
    """
    try:
        key = _dir_key(directory)
        cached = _cached_listing(directory)
        if cached is not None and cached.exact(key):
            return cached
        return _new_listing(directory)
    except FileNotFoundError:
        return None


def _unlink_quiet(path: str) -> bool:
    """Unlink ``path``; False if it was already gone (others may reap concurrently) or is not ours."""
    try:
        os.unlink(path)
        return True
    except (FileNotFoundError, PermissionError):
        return False


class Owner:
    """This process's claim on an owner id in one DDR directory.

    Invariant: while open, ``lock_fd`` holds LOCK_EX on ``lock_path``, and every
    segment this owner created and did not unlink is in ``_live``.
    """

    def __init__(self, directory: str, claimed: tuple[int, int] | None = None) -> None:
        self.dir = directory
        self.pid = os.getpid()
        self.closed = False
        self.adopted = claimed is not None  # the lock is another part of this process's (adopt_owner)
        self._mutex = threading.Lock()
        self._next = ADOPTED_FIRST_OFFSET if self.adopted else FIRST_OFFSET
        self._live: dict[int, str] = {}     # offset -> segment file name
        self._sizes: dict[int, int] = {}    # offset -> bytes of a live segment
        self.held = 0                       # bytes of the live segments and those being made
        self.id, self.lock_fd = claimed if claimed is not None else _claim_owner_id(directory)

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

    def charge(self, size: int, quota: int) -> None:
        """Count ``size`` more bytes against ``quota``; refund with :meth:`discard` (after
        :meth:`add`) or :meth:`refund`. Raises SysOutOfMemory past the quota."""
        with self._mutex:
            if self.held + size > quota:
                raise SysOutOfMemory(
                    f"DDR owner 0x{self.id:06x} holds {self.held} bytes; {size} more would exceed its quota of "
                    f"{quota} bytes ({QUOTA_ENV}; free buffers first)")
            self.held += size

    def refund(self, size: int) -> None:
        with self._mutex:
            self.held -= size

    def add(self, offset: int, name: str) -> None:
        with self._mutex:
            self._live[offset] = name

    def settle(self, offset: int, size: int) -> None:
        """The segment at ``offset`` is made: its ``size`` bytes, charged already, are refunded
        when it is discarded."""
        with self._mutex:
            self._sizes[offset] = size

    def discard(self, offset: int) -> None:
        with self._mutex:
            self._live.pop(offset, None)
            self.held -= self._sizes.pop(offset, 0)

    def close(self) -> None:
        """Unlink every live segment and the lock (an adopted owner: its segments only, the lock
        and its fd are its claimant's); a no-op in a forked child or when closed."""
        if self.closed or self.pid != os.getpid():
            return
        with self._mutex:
            self.closed = True
            names, self._live = list(self._live.values()), {}
        for name in names:
            _unlink_quiet(os.path.join(self.dir, name))
        if self.adopted:
            return
        for suffix in SIDECARS:
            _unlink_quiet(os.path.join(self.dir, f"vdsp-{self.id:06x}{suffix}"))
        _unlink_quiet(self.lock_path)   # segments first: a lock-less segment looks orphaned
        os.close(self.lock_fd)

    def forget(self) -> None:
        """In a forked child: drop the inherited lock fd without touching the parent's files."""
        if not self.closed:
            self.closed = True
            if self.adopted:
                return
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
        owner = _URANDOM.randrange(1, MAX_OWNER)
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
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)     # a file of ours just made: nobody waits here
            os.link(tmp, final)
        except (FileExistsError, FileNotFoundError, BlockingIOError):   # id taken, tmp reaped or locked meanwhile
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


def adopt_owner(directory: str, owner_id: int, lock_fd: int) -> Owner:
    """Make this process's owner in ``directory`` one another part of the process claimed and
    holds (``owner_id``, its ``lock_fd``): the C library's, when a program's first hbDNN call
    starts the embedded SDK (arm_side.capi.bridge), so that both allocate under one owner and
    every buffer of the process is its own to the SoC. Its allocations take the offsets from
    ADOPTED_FIRST_OFFSET (the claimant's start at FIRST_OFFSET: no address is made twice), its
    quota is counted apart, and closing it unlinks only its segments."""
    if not 1 <= owner_id < MAX_OWNER or lock_fd < 0:
        raise SysInvalidArgument(f"owner 0x{owner_id:x} with lock fd {lock_fd} cannot be adopted")
    with _registry_mutex:
        owner = _owners[directory] = Owner(directory, (owner_id, lock_fd))
        return owner


def open_owner(directory: str | None = None) -> Owner | None:
    """This process's open owner in ``directory`` (default ``shm_dir()``), if it has one;
    unlike :func:`current_owner` it never creates one."""
    with _registry_mutex:
        owner = _owners.get(directory or shm_dir())
    return owner if owner is not None and not owner.closed and owner.pid == os.getpid() else None


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
    global _registry_mutex, _listing_mutex, _reap_mutex
    _registry_mutex = threading.Lock()
    _listing_mutex = threading.Lock()
    _reap_mutex = threading.Lock()
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
        owner.charge(size, quota(owner.dir))
        try:
            with _reserved(owner.dir, owner.held - size, size):
                return cls._create(size, owner)
        except BaseException:
            owner.refund(size)      # _create discarded (refunding nothing) or never added the segment
            raise

    @classmethod
    def _create(cls, size: int, owner: Owner) -> "Segment":
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
            buf = map_shared(fd, size)
        except OSError as exc:
            owner.discard(offset)
            _unlink_quiet(path)
            raise SysOutOfMemory(f"cannot allocate {size} bytes of DDR at {path}: {exc}") from exc
        finally:
            os.close(fd)
        owner.settle(offset, size)      # from now on, unlinking the segment refunds its charge
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


class _ReapState:
    """What reap() keeps between calls for one directory, all derived from ``listing``."""

    def __init__(self) -> None:
        self.listing: _Listing | None = None
        self.next_scan = 0.0                # monotonic time before which a changed directory is not relisted
        self.owners: list[int] = []         # owners with a lock file: checked on every call
        self.tmps: list[str] = []           # temporary lock files, until reaped or gone
        self.orphans: list[str] = []        # segments of owners without a lock file, until reaped or gone

    def use(self, listing: _Listing) -> None:
        if listing is not self.listing:
            self.listing = listing
            self.owners, self.tmps, self.orphans = _classify(listing.names)


_reap_mutex = threading.Lock()
_reap_states: dict[str, _ReapState] = {}


def reap(shm_dir: str | None = None) -> list[str]:
    """Unlink the files of dead owners and old orphans; return the unlinked names.

    Safe to run concurrently from several processes. Never touches a file
    whose name does not match the vdsp patterns, nor a live owner's files
    (including the caller's own: its lock cannot be taken a second time).

    Cost: a stat of the directory and one open+flock per known owner. The
    directory is listed again only when it changed, and then at most once per
    ``SCAN_BUDGET`` of the time (a listing taking 10 ms waits 1 s after the
    previous one); between listings the owners already known are still checked,
    so an owner that dies is reaped on the next call. An owner created since the
    last listing is discovered by the next one.
    """
    directory = shm_dir or _default_dir()
    try:
        key = _dir_key(directory)
    except FileNotFoundError:
        return []
    with _reap_mutex:
        state = _reap_states.get(directory)
        if state is None:
            state = _ReapState()
            _bounded_put(_reap_states, directory, state)
        listing, exact = _cached_listing(directory), True
        if listing is None or not listing.exact(key):
            if state.listing is None or time.monotonic() >= state.next_scan:
                try:
                    listing = _new_listing(directory)
                except FileNotFoundError:
                    return []
                state.next_scan = time.monotonic() + listing.cost / SCAN_BUDGET
            else:
                listing, exact = state.listing, False   # rate-limited: the owners known so far
        state.use(listing)
        return _reap_dead(directory, state.owners, listing if exact else None) \
            + _reap_tmps(directory, state) + _reap_orphans(directory, state)


def _classify(names: list[str]) -> tuple[list[int], list[str], list[str]]:
    """``(owners with a lock file, temporary lock names, segments of owners without a lock)``.

    ``names`` is sorted: vdsp names are one range and each owner's segments are a
    sub-range, skipped with a bisect, so the cost grows with owners, not segments.
    """
    lo, hi = bisect.bisect_left(names, "vdsp-"), bisect.bisect_left(names, "vdsp.")   # '.' sorts right after '-'
    owners, tmps, groups = [], [], []
    i = lo
    while i < hi:
        name = names[i]
        if name[11:12] == "-":      # "vdsp-xxxxxx-...": one owner's segments
            j = bisect.bisect_left(names, name[:12] + "~", i, hi)
            groups.append((name[5:11], i, j))
            i = j
            continue
        if m := _LOCK_RE.fullmatch(name):
            owners.append(int(m[1], 16))
        elif _TMP_RE.fullmatch(name):
            tmps.append(name)
        i += 1
    locked = {f"{owner:06x}" for owner in owners}
    orphans = [n for owner, i, j in groups if owner not in locked for n in names[i:j] if _SEG_RE.fullmatch(n)]
    return owners, tmps, orphans


def _open_lock(path: str) -> int | None:
    """A read-only fd of ``path`` if it is a regular file of this user, else None.

    Never follows a symlink nor blocks on a FIFO named like a lock.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:     # gone, a symlink, or not ours to open
        return None
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _lock_if_dead(path: str) -> int | None:
    """An fd holding LOCK_SH on ``path`` if nobody holds LOCK_EX on it (its owner is dead) and it
    is still that file, else None.

    Shared, not exclusive: readers judge an owner alive by LOCK_SH failing (``acl._alive``), so
    a reaper at work must not look like the owner (a dead owner's grants were honoured while
    a reaper removed its files). Its id stays unclaimable meanwhile: a claim links a new lock
    file to the name, which fails while the old one is there.
    """
    fd = _open_lock(path)
    if fd is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        st, now = os.fstat(fd), os.lstat(path)
        if (st.st_ino, st.st_dev) == (now.st_ino, now.st_dev):
            return fd   # still the file at that name: another reaper has not removed it
    except OSError:     # held (owner alive), or vanished meanwhile
        pass
    os.close(fd)
    return None


def _reap_dead(directory: str, owners: list[int], listing: _Listing | None) -> list[str]:
    """Unlink the segments and lock of each of ``owners`` whose lock nobody holds.

    ``listing`` must be exact (None: list again if any owner is dead). It may miss
    a segment created just after it by an owner that then died: that segment is
    reaped later as an orphan.
    """
    dead = []
    for owner in owners:
        fd = _lock_if_dead(os.path.join(directory, lock_name(owner)))
        if fd is not None:
            dead.append((owner, fd))
    if not dead:
        return []
    removed: list[str] = []
    try:    # we hold the dead owners' locks: nobody can claim their ids until we unlink them
        listing = listing or _exact_listing(directory)
        for owner, _ in dead:
            names = listing.group(owner) if listing is not None else []
            removed += [n for n in names if _unlink_quiet(os.path.join(directory, n))]
            removed += [f"vdsp-{owner:06x}{s}" for s in SIDECARS
                        if _unlink_quiet(os.path.join(directory, f"vdsp-{owner:06x}{s}"))]
            if _unlink_quiet(os.path.join(directory, lock_name(owner))):
                removed.append(lock_name(owner))
    finally:
        for _, fd in dead:
            os.close(fd)
    return removed


def _reap_tmps(directory: str, state: _ReapState) -> list[str]:
    """Temporary locks left by creators that died: unlink them alone (their owner ids may be live)."""
    removed, keep = [], []
    for name in state.tmps:
        path = os.path.join(directory, name)
        fd = _lock_if_dead(path)
        if fd is None:
            if os.path.lexists(path):
                keep.append(name)   # held: a creator is claiming an id right now
            continue
        try:
            if time.time() - os.fstat(fd).st_mtime < ORPHAN_AGE:
                keep.append(name)
            elif _unlink_quiet(path):
                removed.append(name)
        finally:
            os.close(fd)
    state.tmps = keep
    return removed


def _reap_orphans(directory: str, state: _ReapState) -> list[str]:
    """Segments whose owner has no lock file at all, older than ORPHAN_AGE."""
    removed, keep = [], []
    now, uid = time.time(), os.geteuid()
    locked: dict[str, bool] = {}
    for name in state.orphans:
        owner = name[5:11]
        if owner not in locked:
            locked[owner] = os.path.lexists(os.path.join(directory, f"vdsp-{owner}.lock"))
        if locked[owner]:
            continue    # an owner claimed the id since: its files are its own
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if st.st_uid != uid:
            continue    # another user's: not ours to unlink
        if now - st.st_mtime < ORPHAN_AGE:
            keep.append(name)   # maybe a creator that has just claimed the id
        elif _unlink_quiet(path):
            removed.append(name)
    state.orphans = keep
    return removed

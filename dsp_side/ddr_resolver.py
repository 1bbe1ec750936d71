"""DSP-side view of the shared DDR: turn a handle (phys, size) into a memoryview.

The resolver maps each segment once and keeps it in a per-owner sorted cache,
so a hit costs a dict lookup, a bisect and one fstat (to notice a free). The
returned memoryview is a slice of the mapping: nothing is copied.
"""
from __future__ import annotations

import bisect
import collections
import mmap
import os
import threading

from protocol.errors import FreedHandle, ForeignHandle, HandleOutOfBounds, UnknownHandle
from soc import ddr

MAX_FREED = 4096        # freed ranges remembered to tell "freed" from "unknown"
MAX_CACHED = 1024       # mapped segments kept (each costs two fds)


class _Entry:
    """A mapped segment. Invariant: ``fd`` and ``mm`` refer to the same file."""

    __slots__ = ("owner", "base", "size", "fd", "mm")

    def __init__(self, owner: int, base: int, size: int, fd: int, mm: mmap.mmap) -> None:
        self.owner, self.base, self.size, self.fd, self.mm = owner, base, size, fd, mm


def _hex(value: object) -> str:
    return hex(value) if isinstance(value, int) else repr(value)


def _where(phys: object, size: object) -> str:
    return f"handle {_hex(phys)} size {size!r}"


class Resolver:
    """Resolves buffer handles against the DDR directory (``shm_dir`` or ``VDSP_SHM_DIR``)."""

    def __init__(self, shm_dir: str | None = None, max_cached: int = MAX_CACHED) -> None:
        self._dir = shm_dir
        self._max_cached = max_cached
        self._mutex = threading.RLock()
        # Invariant: _bases[o] is the sorted list of bases b with (o, b) in _entries.
        self._bases: dict[int, list[int]] = {}
        self._entries: collections.OrderedDict[tuple[int, int], _Entry] = collections.OrderedDict()
        self._freed: collections.deque[tuple[int, int, int]] = collections.deque(maxlen=MAX_FREED)
        self._zombies: list[mmap.mmap] = []     # dropped mappings that still have views

    def resolve(self, phys: int, size: int, *, client_owner: int, registered: bool,
                writable: bool = True) -> memoryview:
        """A writable memoryview of exactly ``size`` bytes of DDR at ``phys``.

        Raises UnknownHandle (bad address or no such memory), FreedHandle (the
        memory was freed), HandleOutOfBounds (bad size, or the range exceeds its
        segment), ForeignHandle (another process's memory, not registered).
        ``writable`` is accepted for future use.
        """
        if not isinstance(phys, int) or isinstance(phys, bool) or phys < 0:
            raise UnknownHandle(f"{_where(phys, size)}: not a physical address")
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise HandleOutOfBounds(f"{_where(phys, size)}: size must be a positive integer")
        owner, offset = ddr.parse_phys(phys)
        with self._mutex:
            entry = self._lookup(owner, offset)
            if entry is not None and os.fstat(entry.fd).st_nlink == 0:
                self._drop(entry, freed=True)
                entry = self._scan(owner, offset)   # the id may have been reused since
                if entry is None:
                    raise FreedHandle(f"{_where(phys, size)}: memory was freed")
            if entry is None:
                entry = self._scan(owner, offset)
            if entry is None:
                if self._was_freed(owner, offset):
                    raise FreedHandle(f"{_where(phys, size)}: memory was freed")
                raise UnknownHandle(f"{_where(phys, size)}: no memory at this address")
            start = offset - entry.base
            if start + size > entry.size:
                raise HandleOutOfBounds(
                    f"{_where(phys, size)} exceeds segment 0x{ddr.make_phys(owner, entry.base):x} "
                    f"of {entry.size} bytes")
            if owner != client_owner and not registered:
                raise ForeignHandle(
                    f"{_where(phys, size)}: memory of owner {_hex(owner)} is not registered "
                    f"and the client is owner {_hex(client_owner)}")
            return memoryview(entry.mm)[start:start + size]

    def purge(self) -> int:
        """Drop cached segments that were unlinked; retry closing old mappings. Returns drops."""
        with self._mutex:
            dead = [e for e in self._entries.values() if os.fstat(e.fd).st_nlink == 0]
            for entry in dead:
                self._drop(entry, freed=True)
            self._zombies = [mm for mm in self._zombies if not _try_close(mm)]
            return len(dead)

    def close(self) -> None:
        """Drop every cached segment (mappings with live views are unmapped when those die)."""
        with self._mutex:
            for entry in list(self._entries.values()):
                self._drop(entry, freed=False)
            self._zombies = [mm for mm in self._zombies if not _try_close(mm)]

    def cached_count(self) -> int:
        return len(self._entries)

    # -- cache ---------------------------------------------------------------

    def _lookup(self, owner: int, offset: int) -> _Entry | None:
        """The cached entry containing ``offset``, or None."""
        bases = self._bases.get(owner)
        if not bases:
            return None
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0:
            return None
        key = (owner, bases[i])
        entry = self._entries[key]
        if offset >= entry.base + entry.size:
            return None
        self._entries.move_to_end(key)
        return entry

    def _scan(self, owner: int, offset: int) -> _Entry | None:
        """Find, map and cache the live segment containing ``offset``, or None."""
        found = ddr.find_segment(owner, offset, self._dir)
        if found is None:
            return None
        base, path = found
        old = self._entries.get((owner, base))
        if old is not None:
            if os.fstat(old.fd).st_nlink != 0:
                return None     # cached, live, and does not contain offset
            self._drop(old, freed=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if st.st_nlink == 0 or not base <= offset < base + st.st_size:
                os.close(fd)
                return None
            mm = mmap.mmap(fd, st.st_size)
        except (OSError, ValueError):
            os.close(fd)
            return None
        return self._add(_Entry(owner, base, st.st_size, fd, mm))

    def _add(self, entry: _Entry) -> _Entry:
        while len(self._entries) >= self._max_cached:
            self._drop(next(iter(self._entries.values())), freed=False)
        self._entries[(entry.owner, entry.base)] = entry
        bisect.insort(self._bases.setdefault(entry.owner, []), entry.base)
        return entry

    def _drop(self, entry: _Entry, *, freed: bool) -> None:
        del self._entries[(entry.owner, entry.base)]
        bases = self._bases[entry.owner]
        del bases[bisect.bisect_left(bases, entry.base)]
        if not bases:
            del self._bases[entry.owner]
        os.close(entry.fd)
        if not _try_close(entry.mm):
            self._zombies.append(entry.mm)
        if freed:
            self._freed.append((entry.owner, entry.base, entry.base + entry.size))

    def _was_freed(self, owner: int, offset: int) -> bool:
        return any(o == owner and lo <= offset < hi for o, lo, hi in self._freed)


def _try_close(mm: mmap.mmap) -> bool:
    """Close ``mm``; False while memoryviews of it are still alive."""
    try:
        mm.close()
        return True
    except BufferError:
        return False

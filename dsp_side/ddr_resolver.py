"""DSP-side view of the shared DDR: turn a handle (phys, size) into a memoryview.

The resolver maps each segment once and keeps it in a per-owner sorted cache,
so a hit costs a dict lookup, a bisect and one lstat of the segment's name: the
file must still be the one mapped (else it was freed) and still of the mapped
size (a client that truncates its file would otherwise kill the firmware with
SIGBUS; a truncation during a task's compute still does). A miss opens the
exact name first (see ``ddr.find_segment``). Mappings keep no file descriptor.
The returned memoryview is a slice of the mapping: nothing is copied.
Each mapping has a PROT_NONE page after the segment's pages (``ddr.map_shared(guard=True)``):
a C kernel that runs off the end of a buffer faults there (``dsp_side.ckernel``'s guard pages).
"""
from __future__ import annotations

import bisect
import collections
import mmap
import os
import stat
import threading
from typing import Callable

import numpy as np

from protocol.errors import FreedHandle, HandleOutOfBounds, UnknownHandle
from vdsp_board.memory import ddr

MAX_FREED = 4096        # freed ranges remembered to tell "freed" from "unknown"
MAX_CACHED = 1024       # mapped segments kept (each costs a mapping, no fd)
MAX_ARRAYS = 256        # task buffers kept as arrays (see Resolver.array)
#: called (no arguments) before any resolver of this process drops a mapping: whoever keeps
#: views of task buffers across tasks (``operators.cv.common.bind``) lets them go here, so
#: that the mapping closes at once
ON_DROP: list[Callable[[], None]] = []


class _Entry:
    """A mapped segment: ``mm`` maps ``size`` bytes of the file ``ident`` (st_dev, st_ino) at ``path``."""

    __slots__ = ("owner", "base", "size", "path", "ident", "mm")

    def __init__(self, owner: int, base: int, size: int, path: str, ident: tuple[int, int],
                 mm: mmap.mmap) -> None:
        self.owner, self.base, self.size, self.mm = owner, base, size, mm
        self.path, self.ident = path, ident

    def current(self) -> os.stat_result | None:
        """The file now at ``path`` if it is still the one mapped, else None (freed)."""
        try:
            st = os.lstat(self.path)
        except OSError:
            return None
        return st if (st.st_dev, st.st_ino) == self.ident and stat.S_ISREG(st.st_mode) else None


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
        # (phys, size, writable) -> (entry, uint8 array): a task's buffers as the last task had them
        self._arrays: collections.OrderedDict[tuple, tuple[_Entry, np.ndarray]] = collections.OrderedDict()

    def resolve(self, phys: int, size: int) -> memoryview:
        """A writable memoryview of exactly ``size`` bytes of DDR at ``phys``.

        Whether the task may use that memory at all is decided before, from the address
        alone (``protocol.acl``); this only maps it. Raises UnknownHandle (bad address or
        no such memory), FreedHandle (the memory was freed), HandleOutOfBounds (bad size,
        or the range exceeds its segment). The caller makes a read-only view of it if it must.
        """
        if not isinstance(phys, int) or isinstance(phys, bool) or phys < 0:
            raise UnknownHandle(f"{_where(phys, size)}: not a physical address")
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise HandleOutOfBounds(f"{_where(phys, size)}: size must be a positive integer")
        owner, offset = ddr.parse_phys(phys)
        where = _where(phys, size)
        with self._mutex:
            entry = self._cached(owner, offset)
            if entry is None:
                entry = self._map(owner, offset, size, where)
            start = offset - entry.base
            if start + size > entry.size:
                raise HandleOutOfBounds(_exceeds(where, owner, entry.base, entry.size))
            return memoryview(entry.mm)[start:start + size]

    def array(self, phys: int, size: int, writable: bool) -> np.ndarray:
        """:meth:`resolve` as a uint8 numpy array (read-only unless ``writable``), the same
        array object for the same handle while its segment is the one mapped: a hit costs
        the lstat :meth:`resolve` does, not the view and array construction. Raises as
        :meth:`resolve`."""
        key = (phys, size, writable)
        with self._mutex:
            hit = self._arrays.get(key)
            if hit is not None:
                cached, arr = hit
                if self._entries.get((cached.owner, cached.base)) is cached:
                    st = cached.current()
                    if st is not None and st.st_size == cached.size:
                        self._arrays.move_to_end(key)
                        return arr
                del self._arrays[key]
            view = self.resolve(phys, size)
            arr = np.frombuffer(view, dtype=np.uint8)
            if not writable:
                arr.flags.writeable = False
            owner, offset = ddr.parse_phys(phys)
            entry = self._lookup(owner, offset)
            if entry is not None:
                while len(self._arrays) >= MAX_ARRAYS:
                    self._arrays.popitem(last=False)
                self._arrays[key] = (entry, arr)
            return arr

    def purge(self) -> int:
        """Drop cached segments that were unlinked; retry closing old mappings. Returns drops."""
        with self._mutex:
            dead = [e for e in self._entries.values() if e.current() is None]
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

    def _cached(self, owner: int, offset: int) -> _Entry | None:
        """The cached entry containing ``offset`` if its file is unchanged, else None.

        One lstat. A freed file is dropped as freed (the name may hold a new file
        by now: the caller looks again); a resized one is dropped to be mapped afresh.
        """
        entry = self._lookup(owner, offset)
        if entry is None:
            return None
        st = entry.current()
        if st is None or st.st_size != entry.size:
            self._drop(entry, freed=st is None)
            return None
        return entry

    def _map(self, owner: int, offset: int, size: int, where: str) -> _Entry:
        """Find, check, map and cache the segment containing ``offset`` (a cache miss).

        Raises UnknownHandle, FreedHandle, or HandleOutOfBounds (before mapping:
        a file too small for the range is never mapped).
        """
        found = ddr.find_segment(owner, offset, self._dir)
        opened = None
        if found is not None:
            try:
                opened = ddr.open_segment(found[1])     # a symlink or another user's file: unknown
            except OSError:
                pass
        if opened is not None and found is not None:
            base, path = found
            fd, st = opened
            # a segment holds its base even when truncated to nothing: the handle names it
            if offset == base or offset < base + st.st_size:
                try:
                    if offset + size > base + st.st_size:
                        raise HandleOutOfBounds(_exceeds(where, owner, base, st.st_size))
                    mm = ddr.map_shared(fd, st.st_size, guard=True)     # a page after it: C kernels
                except OSError as exc:
                    raise UnknownHandle(f"{where}: cannot map its memory: {exc}") from None
                finally:
                    os.close(fd)
                old = self._entries.get((owner, base))
                if old is not None:     # cached but stale (resized, or replaced under the same name)
                    self._drop(old, freed=old.current() is None)
                return self._add(_Entry(owner, base, st.st_size, path, (st.st_dev, st.st_ino), mm))
            os.close(fd)
        if self._was_freed(owner, offset):
            raise FreedHandle(f"{where}: memory was freed")
        raise UnknownHandle(f"{where}: no memory at this address")

    def _add(self, entry: _Entry) -> _Entry:
        while len(self._entries) >= self._max_cached:
            self._drop(next(iter(self._entries.values())), freed=False)
        self._entries[(entry.owner, entry.base)] = entry
        bisect.insort(self._bases.setdefault(entry.owner, []), entry.base)
        return entry

    def _drop(self, entry: _Entry, *, freed: bool) -> None:
        for forget in ON_DROP:
            forget()
        del self._entries[(entry.owner, entry.base)]
        for key in [k for k, (e, _) in self._arrays.items() if e is entry]:
            del self._arrays[key]       # their views would keep the mapping open
        bases = self._bases[entry.owner]
        del bases[bisect.bisect_left(bases, entry.base)]
        if not bases:
            del self._bases[entry.owner]
        if not _try_close(entry.mm):
            self._zombies.append(entry.mm)
        if freed:
            self._freed.append((entry.owner, entry.base, entry.base + entry.size))

    def _was_freed(self, owner: int, offset: int) -> bool:
        return any(o == owner and lo <= offset < hi for o, lo, hi in self._freed)


def _exceeds(where: str, owner: int, base: int, seg_size: int) -> str:
    return f"{where} exceeds segment 0x{ddr.make_phys(owner, base):x} of {seg_size} bytes"


def _try_close(mm: mmap.mmap) -> bool:
    """Close ``mm``; False while memoryviews of it are still alive."""
    try:
        mm.close()
        return True
    except BufferError:
        return False

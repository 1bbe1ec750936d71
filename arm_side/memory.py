"""ARM-side memory API, mirroring hbSysAllocMem ... hbSysUnregisterMem.

Uncached memory is the DDR mapping itself. Cached memory has a process-private
"CPU cache" (a bytearray) that is deliberately incoherent with DDR: CPU writes
reach DDR (and the DSP) only on ``flush(CLEAN)``, DSP writes reach the CPU only
on ``flush(INVALIDATE)``. Strict mode (``VDSP_STRICT_CACHE=1``) turns forgotten
flushes into CacheCoherencyError through the hooks the RPC layer calls.

Sharing: a task may use only its own process's memory and memory another owner
granted it. ``mem.share(to=owner_id)`` (or ``to=ANY_OWNER``) grants a range of a
buffer; ``grant.revoke()`` ends it; freeing the buffer or exiting ends its grants.
``register(phys, size)`` maps another owner's memory only within such a grant.
Grants live in the owner's access list in the DDR directory (``vdsp_board.memory.acl``), where
the relay and every firmware read them.
"""
from __future__ import annotations

import math
import mmap
import os
import threading
from typing import TYPE_CHECKING, Callable, TypeGuard

if TYPE_CHECKING:    # numpy is imported when an array is asked for: a process that only talks to the
    import numpy as np  # SoC (`vdsp status`, each SoC's control commands) does not pay its ~0.2 s of CPU

from protocol import acl as aclrule
from protocol.constants import HANDLE_REGISTERED
from protocol.errors import CacheCoherencyError, SysInvalidArgument, SysRegisterMemFailed
from vdsp_board.config import settings
from vdsp_board.memory import acl, ddr

INVALIDATE = 1      # HB_SYS_MEM_CACHE_INVALIDATE: DDR -> cache
CLEAN = 2           # HB_SYS_MEM_CACHE_CLEAN: cache -> DDR
ANY_OWNER = aclrule.ANY     # share(to=ANY_OWNER): every owner that proves itself to the SoC
_grants_reader = acl.Reader()


def strict_default() -> bool:
    return settings.current().strict_cache


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _close_quietly(mm: mmap.mmap) -> None:
    """Unmap ``mm``; arrays still using it keep it mapped until they die."""
    try:
        mm.close()
    except BufferError:
        pass


class Mem:
    """One hbSysMem: ``size`` bytes of DDR at ``phys_addr``, cached or not.

    Invariant: ``_ddr`` is exactly ``size`` bytes of DDR; ``_cache`` is a
    bytearray of ``size`` bytes for cached memory, None otherwise.
    """

    def __init__(self, manager: "MemoryManager", phys: int, ddr_view: memoryview, *,
                 cache: bytearray | None, registered: bool, on_free: Callable[[], None]) -> None:
        self._manager = manager
        self._phys = phys
        self._size = len(ddr_view)
        self._ddr = ddr_view
        self._cache = cache
        self._cached = cache is not None
        self._registered = registered
        self._on_free = on_free     # unlinks (allocated) or unmaps (registered) the DDR
        self._freed = False
        self._device_written = False    # strict mode: DDR changed since the last INVALIDATE
        self._grants: list[Grant] = []  # grants of this memory in force

    phys_addr = property(lambda self: self._phys)
    size = property(lambda self: self._size)
    cached = property(lambda self: self._cached)
    registered = property(lambda self: self._registered)
    freed = property(lambda self: self._freed)

    def _check_live(self) -> None:
        if self._freed:
            raise SysInvalidArgument(f"memory 0x{self._phys:x} was freed")

    def _cpu_view(self) -> memoryview | bytearray:
        """What the CPU sees: the cache for cached memory, DDR otherwise. Raises if freed or stale."""
        self._check_live()
        if self._device_written:
            raise CacheCoherencyError(
                f"memory 0x{self._phys:x} ({self._size} bytes) was written by the DSP; "
                "call flush(INVALIDATE) before reading")
        return self._ddr if self._cache is None else self._cache

    def _span(self, offset: object, length: object) -> tuple[int, int]:
        if not (_is_int(offset) and _is_int(length) and offset >= 0 and length >= 0
                and offset + length <= self._size):
            raise SysInvalidArgument(
                f"range offset {offset!r} length {length!r} is outside memory "
                f"0x{self._phys:x} of {self._size} bytes")
        return offset, offset + length

    def array(self, dtype="uint8", shape=None, offset: int = 0) -> np.ndarray:
        """A numpy view (no copy) of the memory as the CPU sees it.

        Raises SysInvalidArgument if freed or if shape/offset do not fit;
        CacheCoherencyError in strict mode when the DSP wrote it since INVALIDATE.
        """
        import numpy as np
        view = self._cpu_view()
        dt = np.dtype(dtype)
        self._span(offset, 0)
        if shape is None:
            count = (self._size - offset) // dt.itemsize
            shape = (count,)
        else:
            shape = (shape,) if _is_int(shape) else tuple(shape)
            if not all(_is_int(n) and n >= 0 for n in shape):
                raise SysInvalidArgument(f"shape {shape!r} must be non-negative integers")
            count = math.prod(shape)
        self._span(offset, count * dt.itemsize)
        return np.frombuffer(view, dtype=dt, count=count, offset=offset).reshape(shape)

    def ddr_array(self) -> np.ndarray:
        """The DDR bytes themselves as a uint8 array (no copy): what a device in this process
        (the BPU of ``arm_side.dnn``) reads and writes, bypassing the CPU cache of cached
        memory. A device write should be followed by ``MemoryManager.mark_device_written``.
        Raises SysInvalidArgument if freed."""
        import numpy as np
        self._check_live()
        return np.frombuffer(self._ddr, dtype=np.uint8)

    def write(self, data, offset: int = 0) -> None:
        """Copy ``data`` (bytes-like) in, through the CPU (hbSysWriteMem). Raises SysInvalidArgument."""
        self._check_live()
        try:
            src = memoryview(data)
        except TypeError as exc:
            raise SysInvalidArgument(f"cannot write {type(data).__name__}: not bytes-like") from exc
        if not src.c_contiguous:
            src = memoryview(src.tobytes())
        if src.ndim != 1 or src.format != "B":
            src = src.cast("B")
        lo, hi = self._span(offset, src.nbytes)
        target = self._ddr if self._cache is None else self._cache
        target[lo:hi] = src

    def read(self, size: int | None = None, offset: int = 0) -> bytes:
        """Copy bytes out, through the CPU (hbSysReadMem).

        Raises SysInvalidArgument; CacheCoherencyError in strict mode (see array()).
        """
        view = self._cpu_view()
        self._span(offset, 0)
        lo, hi = self._span(offset, self._size - offset if size is None else size)
        return bytes(view[lo:hi])

    def flush(self, flag: int, offset: int = 0, size: int | None = None) -> None:
        """CLEAN: cache -> DDR; INVALIDATE: DDR -> cache (no-op for uncached memory); ``size``
        bytes at ``offset`` (default: all of it; the C face flushes the range an hbSysMem names).

        Raises SysInvalidArgument for another flag, a range outside the memory, or freed memory.
        """
        self._check_live()
        if not _is_int(flag) or flag not in (INVALIDATE, CLEAN):
            raise SysInvalidArgument(f"flush flag {flag!r} must be INVALIDATE (1) or CLEAN (2)")
        lo, hi = self._span(offset, self._size - offset if size is None and _is_int(offset) else size)
        if self._cache is None:
            return
        whole = lo == 0 and hi == self._size
        if flag == CLEAN:
            if whole:
                self._ddr[:] = self._cache
            else:
                self._ddr[lo:hi] = self._cache[lo:hi]
        elif whole:
            self._cache[:] = self._ddr
            self._device_written = False
        else:
            self._cache[lo:hi] = self._ddr[lo:hi]

    def share(self, to: int = ANY_OWNER, offset: int = 0, size: int | None = None) -> "Grant":
        """Grant owner ``to`` (an owner id, or ANY_OWNER) the use of ``size`` bytes at ``offset``
        (default: all of it) in tasks and ``register``. See :meth:`MemoryManager.grant`."""
        return self._manager.grant(self, to, offset, size)

    def handle(self) -> list[int]:
        """The wire form ``[phys, size, flags]``. Raises SysInvalidArgument if freed."""
        self._check_live()
        return [self._phys, self._size, HANDLE_REGISTERED if self._registered else 0]

    def free(self) -> None:
        """hbSysFreeMem (hbSysUnregisterMem for registered memory). Raises SysInvalidArgument if freed."""
        self._check_live()
        for grant in list(self._grants):
            try:
                self._manager.revoke(grant)
            except SysRegisterMemFailed:
                pass    # the list could not be rewritten: the grant names memory that is gone anyway
        self._freed = True
        self._cache = None
        try:
            self._ddr.release()
        except BufferError:
            pass    # numpy arrays still use it; the mapping lives until they die
        self._on_free()
        self._manager._forget(self)

    def __enter__(self) -> "Mem":
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._freed:
            self.free()

    def __repr__(self) -> str:
        extra = ", registered" if self._registered else ""
        extra += ", freed" if self._freed else ""
        return f"Mem(phys=0x{self._phys:x}, size={self._size}, cached={self.cached}{extra})"


class Grant:
    """``size`` bytes at ``phys_addr`` granted to owner ``to`` (ANY_OWNER: any); ``revoke()`` ends it."""

    def __init__(self, mem: Mem, phys: int, size: int, to: int, token: int, owner: ddr.Owner) -> None:
        self.mem, self.phys_addr, self.size, self.to = mem, phys, size, to
        self._token, self._owner = token, owner
        self.revoked = False

    def revoke(self) -> None:
        """End the grant: tasks checked from now on may not use the range. Raises SysInvalidArgument if ended."""
        self.mem._manager.revoke(self)

    def __repr__(self) -> str:
        to = "any owner" if self.to == ANY_OWNER else f"owner 0x{self.to:06x}"
        return f"Grant(phys=0x{self.phys_addr:x}, size={self.size}, to={to}{', revoked' if self.revoked else ''})"


class MemoryManager:
    """Allocates and tracks this process's Mems; also the strict-mode cache checker."""

    def __init__(self, strict: bool | None = None) -> None:
        self.strict = strict_default() if strict is None else bool(strict)
        self._mutex = threading.Lock()
        self._live: dict[int, Mem] = {}     # id(mem) -> mem, for every Mem not yet freed
        self._pool: BufferPool | None = None

    def alloc(self, size: int) -> Mem:
        """hbSysAllocMem: uncached DDR. Raises SysInvalidArgument, SysOutOfMemory."""
        return self._alloc(size, cached=False)

    def alloc_cached(self, size: int) -> Mem:
        """hbSysAllocCachedMem: cached DDR (cache == DDR == zeros). Raises like alloc()."""
        return self._alloc(size, cached=True)

    def _alloc(self, size: int, *, cached: bool) -> Mem:
        seg = ddr.Segment.create(size)
        cache = bytearray(size) if cached else None
        return self._track(Mem(self, seg.phys, memoryview(seg.buf), cache=cache,
                               registered=False, on_free=seg.close))

    @property
    def owner_id(self) -> int:
        """This process's DDR owner id: what another process passes as ``share(to=...)``."""
        return ddr.current_owner().id

    def grant(self, mem: Mem, to: int = ANY_OWNER, offset: int = 0, size: int | None = None) -> Grant:
        """Let owner ``to`` (ANY_OWNER: every owner) use ``size`` bytes of ``mem`` at ``offset``
        (default: the rest of it) in its tasks and ``register``, until revoked, freed or this
        process exits.

        Raises SysInvalidArgument (not this process's allocated memory, freed, bad range or
        owner, 64 grants in force already), SysRegisterMemFailed (cannot publish the grant).
        """
        self._own(mem)
        if mem.registered:
            raise SysInvalidArgument(f"memory 0x{mem.phys_addr:x} was registered, not allocated here: "
                                     "only its owner may grant it")
        if size is None and _is_int(offset):
            size = mem.size - offset
        lo, hi = mem._span(offset, size)
        if hi == lo:
            raise SysInvalidArgument(f"a grant of memory 0x{mem.phys_addr:x} needs at least one byte")
        owner = ddr.current_owner()
        holder, base = ddr.parse_phys(mem.phys_addr)
        if holder != owner.id:
            raise SysInvalidArgument(f"memory 0x{mem.phys_addr:x} belongs to owner 0x{holder:06x}, "
                                     f"not to this process's owner 0x{owner.id:06x}")
        token = acl.own_list(owner).grant(base + lo, hi - lo, to)
        grant = Grant(mem, mem.phys_addr + lo, hi - lo, to, token, owner)
        mem._grants.append(grant)
        return grant

    def revoke(self, grant: Grant) -> None:
        """End ``grant``. Raises SysInvalidArgument if it is not a grant of this manager in force."""
        if not isinstance(grant, Grant) or grant.mem._manager is not self:
            raise SysInvalidArgument(f"{grant!r} is not a grant of this manager")
        if grant.revoked:
            raise SysInvalidArgument(f"{grant!r} was already revoked")
        grant.revoked = True
        if grant in grant.mem._grants:
            grant.mem._grants.remove(grant)
        if not grant._owner.closed:
            acl.own_list(grant._owner).revoke(grant._token)

    def register(self, phys_addr: int, size: int) -> Mem:
        """hbSysRegisterMem: map ``size`` bytes of existing DDR as cached memory: this process's
        own, or another owner's within a grant it made to this process's owner or to any owner.

        The cache starts as a copy of DDR. Raises SysInvalidArgument for a bad
        size or address, SysRegisterMemFailed if the range is not granted or not live DDR.
        """
        ddr.check_size(size)
        if not _is_int(phys_addr) or phys_addr < 0:
            raise SysInvalidArgument(f"physical address {phys_addr!r} must be a non-negative integer")
        owner, offset = ddr.parse_phys(phys_addr)
        where = f"0x{phys_addr:x} size {size}"
        me = ddr.current_owner().id
        if owner != me and not any(g.covers(me, offset, size) for g in _grants_reader.grants(owner)):
            raise SysRegisterMemFailed(f"{where}: memory of owner 0x{owner:06x} is not granted to this "
                                       f"process's owner 0x{me:06x} (its owner must grant it first: mem.share())")
        found = ddr.find_segment(owner, offset)
        if found is None:
            raise SysRegisterMemFailed(f"no DDR at {where}")
        base, path = found
        try:
            fd, st = ddr.open_segment(path)     # never through a symlink; keeps no fd once mapped
        except OSError as exc:
            raise SysRegisterMemFailed(f"no DDR at {where}: {exc}") from exc
        try:
            seg_size = st.st_size
            if offset + size > base + seg_size:
                raise SysRegisterMemFailed(
                    f"{where} exceeds segment 0x{ddr.make_phys(owner, base):x} of {seg_size} bytes")
            mm = ddr.map_shared(fd, seg_size)
        except OSError as exc:
            raise SysRegisterMemFailed(f"cannot map DDR at {where}: {exc}") from exc
        finally:
            os.close(fd)
        view = memoryview(mm)[offset - base:offset - base + size]
        return self._track(Mem(self, phys_addr, view, cache=bytearray(view), registered=True,
                               on_free=lambda: _close_quietly(mm)))

    def unregister(self, mem: Mem) -> None:
        """hbSysUnregisterMem. Raises SysInvalidArgument unless ``mem`` is live registered memory."""
        self._own(mem)
        if not mem.registered:
            raise SysInvalidArgument(f"memory 0x{mem.phys_addr:x} was allocated, not registered: free it")
        mem.free()

    def free(self, mem: Mem) -> None:
        """hbSysFreeMem. Raises SysInvalidArgument if freed or not from this manager."""
        self._own(mem)
        mem.free()

    def flush(self, mem: Mem, flag: int) -> None:
        """hbSysFlushMem. Raises SysInvalidArgument."""
        self._own(mem)
        mem.flush(flag)

    def live(self) -> list[Mem]:
        with self._mutex:
            return list(self._live.values())

    @property
    def pool(self) -> "BufferPool":
        """Scratch buffers reused by size (the numpy-in/numpy-out helpers of ``arm_side.cv``);
        created on first use, emptied by :meth:`close`."""
        with self._mutex:
            if self._pool is None:
                self._pool = BufferPool(self)
            return self._pool

    def close(self) -> None:
        """Free (or unregister) every Mem still live, pooled ones included."""
        if self._pool is not None:
            self._pool.close()
        for mem in self.live():
            if not mem.freed:
                mem.free()

    def __enter__(self) -> "MemoryManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- strict-mode hooks, called by the RPC layer ------------------------------

    def check_before_submit(self, mem: Mem) -> None:
        """Strict mode: raise CacheCoherencyError if the CPU wrote ``mem`` without CLEAN.

        A buffer the DSP wrote since the last INVALIDATE is exempt: its DDR is
        authoritative and passing it on to the next task is legitimate.
        """
        if not self.strict:
            return
        mem._check_live()
        if mem._cache is None or mem._device_written:
            return
        if mem._cache != mem._ddr:
            raise CacheCoherencyError(
                f"memory 0x{mem.phys_addr:x} ({mem.size} bytes) was written by the CPU but not "
                "cleaned: call flush(CLEAN) before the task")

    def mark_device_written(self, mem: Mem) -> None:
        """Strict mode: record that the DSP wrote ``mem``'s DDR (reads then need INVALIDATE)."""
        if self.strict and mem._cache is not None:
            mem._device_written = True

    # -- bookkeeping ---------------------------------------------------------

    def _track(self, mem: Mem) -> Mem:
        with self._mutex:
            self._live[id(mem)] = mem
        return mem

    def _forget(self, mem: Mem) -> None:
        with self._mutex:
            self._live.pop(id(mem), None)

    def _own(self, mem: object) -> None:
        if not isinstance(mem, Mem) or mem._manager is not self:
            raise SysInvalidArgument(f"{mem!r} is not memory of this manager")
        mem._check_live()


class BufferPool:
    """Idle uncached buffers of a :class:`MemoryManager`, reused by size.

    ``acquire(n)`` returns a buffer of at least ``n`` bytes (sizes are rounded up to 4 KiB,
    so images of one shape share buffers); ``release(mem)`` gives it back. At most
    ``max_idle_per_size`` buffers of one size and ``max_idle_bytes`` in all stay idle; beyond
    that a released buffer is freed. Everything idle is freed by :meth:`clear` (and by the
    manager's ``close``); buffers freed elsewhere are dropped, never handed out.
    """

    GRANULE = 4096

    def __init__(self, manager: MemoryManager, max_idle_per_size: int = 4, max_idle_bytes: int = 64 << 20) -> None:
        self.manager = manager
        self.max_idle_per_size, self.max_idle_bytes = max_idle_per_size, max_idle_bytes
        self._lock = threading.Lock()
        self._idle: dict[int, list[Mem]] = {}
        self._idle_bytes = 0
        self.allocated = 0      # buffers allocated by the pool (a reuse allocates none)
        self.closed = False     # after the manager's close: released buffers are freed, not kept

    def size_for(self, nbytes: int) -> int:
        return max(self.GRANULE, -(-int(nbytes) // self.GRANULE) * self.GRANULE)

    def acquire(self, nbytes: int) -> Mem:
        """A live uncached buffer of at least ``nbytes``. Raises SysInvalidArgument, SysOutOfMemory."""
        size = self.size_for(nbytes)
        with self._lock:
            stack = self._idle.get(size, [])
            while stack:
                mem = stack.pop()
                self._idle_bytes -= size
                if not mem.freed:
                    return mem
        mem = self.manager.alloc(size)
        with self._lock:
            self.allocated += 1
        return mem

    def release(self, mem: Mem) -> None:
        """Give ``mem`` back (freed at once if the pool is full or ``mem`` is not pool-sized)."""
        if mem.freed:
            return
        with self._lock:
            stack = self._idle.setdefault(mem.size, [])
            if (not self.closed and mem.size == self.size_for(mem.size) and len(stack) < self.max_idle_per_size
                    and self._idle_bytes + mem.size <= self.max_idle_bytes):
                stack.append(mem)
                self._idle_bytes += mem.size
                return
        mem.free()

    def idle(self) -> int:
        """Buffers waiting for reuse."""
        with self._lock:
            return sum(len(stack) for stack in self._idle.values())

    def close(self) -> None:
        """Free every idle buffer; from now on a released buffer is freed at once."""
        self.closed = True
        self.clear()

    def clear(self) -> None:
        """Free every idle buffer."""
        with self._lock:
            mems = [m for stack in self._idle.values() for m in stack]
            self._idle.clear()
            self._idle_bytes = 0
        for mem in mems:
            if not mem.freed:
                mem.free()

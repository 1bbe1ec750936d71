"""Letting go of the library pages a process mapped while it imported, and does not run.

A process that imports numpy, cv2 and numba has code of theirs mapped that it never runs again:
LLVM's static constructors alone touch pages all over ``libllvmlite.so``, and a kernel that keeps
a file's page cache in large folios maps a whole folio on one fault (Linux 6.18 here: 98 MB of
``libllvmlite.so`` resident after ``import llvmlite.binding``, 111 MB after numba's kernels
loaded, 30 MB of ``cv2``). Those pages count in the process's PSS for as long as it lives, and
``vdsp up``'s supervisor, which imports everything once so that the SoC's template shares it
(``dsp_side.preload.preload``), runs none of that code after its fork.

:func:`drop` asks the kernel to unmap them from this process (``MADV_DONTNEED``), only where that
cannot change a byte the process sees: private file mappings that are not writable and hold no
page of their own (``Anonymous: 0 kB`` in ``/proc/self/smaps``, so nothing was copied on write,
as in a relocated ``.data.rel.ro``). The pages stay in the page cache; a page run again is mapped
again by a minor fault, the very thing the kernel's own reclaim of clean file pages would cause.
Shared mappings (DDR segments), anonymous memory, the heap and writable data are never touched.

The mappings are read from ``/proc/self/smaps`` first and let go of after, so nothing else in the
process may map or unmap meanwhile (an address range freed and reused by an anonymous mapping in
between would be zeroed): call it where the process has only its own thread running Python and
no sockets yet, as ``preload`` is (the supervisor before it forks its template, a core before its
ZeroMQ context; the idle OpenBLAS workers map nothing).
"""
from __future__ import annotations

import ctypes
import os
import re

MADV_DONTNEED = 4
_VMA = re.compile(rb"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ (\d+)\s*(.*)$")


def candidates(smaps: bytes) -> list[tuple[int, int, str]]:
    """``(start, end, path)`` of each mapping in ``smaps`` (``/proc/<pid>/smaps`` text) that
    :func:`drop` may let go of: a private, non-writable mapping of a file (inode not 0, a path)
    with no anonymous page."""
    out: list[tuple[int, int, str]] = []
    vma: tuple[int, int, str] | None = None
    for line in smaps.split(b"\n"):
        m = _VMA.match(line)
        if m is not None:
            start, end, perms, inode, path = m.groups()
            ok = perms[1:2] != b"w" and perms[3:4] == b"p" and int(inode) != 0 and path.startswith(b"/")
            vma = (int(start, 16), int(end, 16), path.decode(errors="replace")) if ok else None
        elif vma is not None and line.startswith(b"Anonymous:"):
            if line.split()[1] == b"0":
                out.append(vma)
            vma = None
    return out


def resident() -> int:
    """This process's resident bytes (``/proc/self/statm``); 0 where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def drop() -> int:
    """Unmap this process's clean, private, read-only file pages (see the module doc); returns
    the bytes of the mappings let go of (0 where /proc or madvise is not to be had)."""
    try:
        with open("/proc/self/smaps", "rb") as fh:
            text = fh.read()
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    total = 0
    for start, end, _path in candidates(text):
        if madvise(start, end - start, MADV_DONTNEED) == 0:
            total += end - start
    return total

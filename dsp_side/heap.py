"""The firmware's working memory stays mapped between tasks (glibc ``mallopt``).

By default glibc serves a large allocation (over 128 KiB, a threshold that then adapts) with
a fresh ``mmap`` and gives the top of the heap back to the kernel once 128 KiB of it is
free. Operators allocate such temporaries on every task (OpenCV's intermediate rows and
planes, numpy's quantisation arrays), so each task paid a page fault per 4 KiB page touched
again: about 0.8 ms of a 2.4 ms Canny on 1920x1080, and how much depended on which tasks
had run before. A DSP keeps its working memory: with the mmap threshold at its maximum
and trimming off, the firmware's temporaries come from a heap that stays mapped, and the
same task costs the same every time.

A no-op where the C library is not glibc (musl has no ``mallopt``).
"""
from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 << 20          # glibc's ceiling on 64-bit (HEAP_MAX_SIZE / 2)
TRIM_NEVER = (1 << 31) - 1             # an int: only this much free heap top is given back


def keep_heap() -> bool:
    """Keep allocations up to 32 MiB on a heap that is never trimmed. True when applied."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_NEVER))

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
import functools

@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library this process runs (its symbols, already loaded): no ``ctypes.util.find_library``,
    which runs ``ldconfig -p`` in a child process (5-20 ms of every firmware boot)."""
    return ctypes.CDLL(None)


M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 << 20          # glibc's ceiling on 64-bit (HEAP_MAX_SIZE / 2)
TRIM_NEVER = (1 << 31) - 1             # an int: only this much free heap top is given back


def keep_heap() -> bool:
    """Keep allocations up to 32 MiB on a heap that is never trimmed. True when applied."""
    try:
        mallopt = _libc().mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_NEVER))


#: working memory touched at firmware boot (``VDSP_FW_HEAP_MB`` overrides; 0 disables). Off by
#: default since firmwares are forked from the core's starter (dsp_side/preload.py): the 96 MiB
#: it used to touch were private to each firmware (half of an idle SoC's memory), and touching them
#: in the starter instead saves nothing (a forked firmware's first write to such a page copies it,
#: a fault as dear as the one it was to spare). A first large task pays its page faults once.
PREFAULT_MB = 0


def prefault(nbytes: int | None = None, chunk: int = 8 << 20) -> int:
    """Grow the heap by ``nbytes`` (default ``VDSP_FW_HEAP_MB`` or :data:`PREFAULT_MB` MiB),
    touch every page and free it again: after :func:`keep_heap` those pages stay mapped, so a
    first task's large temporaries do not page-fault (a 1920x1080 cornerHarris: ~75 MiB of
    them, 66 ms first vs 16 ms after on a 2-CPU VM), as a DSP's working memory is there when
    it boots. Returns the bytes touched (0 without glibc or when disabled)."""
    from vdsp_board.config import settings
    if nbytes is None:
        try:
            mb = settings.current().fw_heap_mb
            nbytes = int((PREFAULT_MB if mb is None else mb) * (1 << 20))
        except ValueError:
            nbytes = PREFAULT_MB << 20
    if nbytes <= 0:
        return 0
    try:
        libc = _libc()
        malloc, free = libc.malloc, libc.free
    except (OSError, AttributeError):
        return 0
    malloc.argtypes, malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    free.argtypes, free.restype = [ctypes.c_void_p], None
    blocks = []
    try:
        for _ in range(-(-nbytes // chunk)):
            ptr = malloc(chunk)
            if not ptr:
                break
            ctypes.memset(ptr, 0, chunk)
            blocks.append(ptr)
    finally:
        for ptr in reversed(blocks):
            free(ptr)
    return len(blocks) * chunk

"""The watchdog word shared by a core and its firmware process (a small mmap'd file).

The firmware writes ``(beat_ns, task_msg_id, task_start_ns)``: ``beat_ns`` from a
ticker thread every ``BEAT_S`` seconds, the task fields around each operator
call (start 0 = idle). The core reads it to catch a firmware that is frozen
or stuck in one task past the watchdog time.
"""
from __future__ import annotations

import mmap
import os
import struct
import threading
import time

_WORD = struct.Struct("<QQQ")
BEAT_S = 0.1


class WatchdogWord:
    """Three u64 words shared through a mapped file: beat, task msg_id, task start.

    Each word is stored and loaded whole through a ``memoryview`` cast to ``Q`` (one aligned
    8-byte access), never with ``struct.pack_into``, which zero-fills its target before
    writing: a reader in another process then saw a beat of 0 ("silent for <uptime> s") and
    killed a healthy firmware.
    """

    def __init__(self, path: str, create: bool = False) -> None:
        flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, _WORD.size)
            self._map = mmap.mmap(fd, _WORD.size)
        finally:
            os.close(fd)
        self._words = memoryview(self._map).cast("Q")      # mmap memory is page-aligned
        if create:
            self.write(time.monotonic_ns(), 0, 0)

    def write(self, beat_ns: int, msg_id: int, start_ns: int) -> None:
        self._words[1], self._words[2] = msg_id, start_ns
        self._words[0] = beat_ns

    def read(self) -> tuple[int, int, int]:
        return self._words[0], self._words[1], self._words[2]

    def beat(self) -> None:
        self._words[0] = time.monotonic_ns()

    def task_begin(self, msg_id: int) -> None:
        self._words[1] = msg_id
        self._words[2] = time.monotonic_ns()

    def task_end(self) -> None:
        self._words[2] = 0
        self._words[1] = 0

    def start_ticker(self) -> None:
        """Beat from a daemon thread (stops beating when the process is frozen)."""
        def tick() -> None:
            while True:  # only this thread writes the beat word
                self.beat()
                time.sleep(BEAT_S)
        threading.Thread(target=tick, name="watchdog-beat", daemon=True).start()

    def close(self) -> None:
        self._words.release()
        self._map.close()

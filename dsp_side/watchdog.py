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
_BEAT = struct.Struct("<Q")
_TASK = struct.Struct("<QQ")
BEAT_S = 0.1


class WatchdogWord:
    def __init__(self, path: str, create: bool = False) -> None:
        flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, _WORD.size)
            self._map = mmap.mmap(fd, _WORD.size)
        finally:
            os.close(fd)
        if create:
            self.write(time.monotonic_ns(), 0, 0)

    def write(self, beat_ns: int, msg_id: int, start_ns: int) -> None:
        _WORD.pack_into(self._map, 0, beat_ns, msg_id, start_ns)

    def read(self) -> tuple[int, int, int]:
        return _WORD.unpack_from(self._map, 0)

    def task_begin(self, msg_id: int) -> None:
        _TASK.pack_into(self._map, 8, msg_id, time.monotonic_ns())

    def task_end(self) -> None:
        _TASK.pack_into(self._map, 8, 0, 0)

    def start_ticker(self) -> None:
        """Beat from a daemon thread (stops beating when the process is frozen)."""
        def tick() -> None:
            while True:  # only this thread writes the beat field (offset 0)
                _BEAT.pack_into(self._map, 0, time.monotonic_ns())
                time.sleep(BEAT_S)
        threading.Thread(target=tick, name="watchdog-beat", daemon=True).start()

    def close(self) -> None:
        self._map.close()

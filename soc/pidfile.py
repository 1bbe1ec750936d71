"""Pid files in the runtime directory: who runs the relay, who supervises the SoC."""
from __future__ import annotations

import os
from pathlib import Path

from protocol import errors


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped, counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state not in (b"Z", b"X")


class PidFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> int | None:
        """The pid recorded, if that process still lives."""
        try:
            pid = int(self.path.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if alive(pid) else None

    def acquire(self) -> None:
        """Record this process. Raises ApiUseError if a live process holds the file."""
        other = self.read()
        if other is not None and other != os.getpid():
            raise errors.ApiUseError(f"{self.path} says process {other} is already running")
        self.path.write_text(f"{os.getpid()}\n")

    def release(self) -> None:
        if self.read() == os.getpid():
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass

"""Pid files in the runtime directory: who runs the relay, who supervises the SoC; and the
supervisor's state file (its processes, their restarts)."""
from __future__ import annotations

import json
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


class StateFile:
    """A small JSON document in the runtime directory (the supervisor's view of its processes).

    Written atomically (a private temporary file renamed over the old one), mode 0600, so a
    reader sees the previous version or the new one, never half of one.
    """

    MAX_BYTES = 1 << 16

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, doc: dict) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, json.dumps(doc, indent=1).encode())
        finally:
            os.close(fd)
        os.replace(tmp, self.path)

    def read(self) -> dict | None:
        """The document, or None if there is none (or it is not one we wrote)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            data = os.read(fd, self.MAX_BYTES)
        finally:
            os.close(fd)
        try:
            doc = json.loads(data)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def remove(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


SUPERVISOR_STATE = "soc.state.json"


def supervisor_state(rt: Path) -> dict | None:
    """The state file of the SoC supervisor (``vdsp up``) of runtime dir ``rt`` while it runs;
    None if no supervisor runs there (a file left by a dead one is ignored)."""
    pid = PidFile(rt / "soc.pid").read()
    if pid is None:
        return None
    doc = StateFile(rt / SUPERVISOR_STATE).read()
    return doc if doc is not None and doc.get("supervisor_pid") == pid else None

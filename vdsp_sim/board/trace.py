"""SoC-wide tracing: the switch every process watches, and each process's recorder.

**Switch.** Tracing is on while the flag file ``active`` exists in the trace directory
(``$VDSP_TRACE_DIR``, else ``<runtime dir>/trace``); it names the session, whose events go
to ``<trace dir>/<session>/``. :func:`start` writes the flag, :func:`stop` removes it, so a
running SoC is traced without any process's help (no SDK, no message). A process looks at
the flag with one ``os.stat`` at most every ``CHECK_EVERY_S`` from a loop it already runs
(:meth:`Recorder.poll`); off, that is all tracing costs.

**Recording.** On, a process appends events to a list (:meth:`Recorder.emit`, a tuple, no
formatting) and writes them to its own file ``<role>-<name>-<pid>.trace`` at each poll:
msgpack objects: a header map (role, name, pid, DDR owner, clock), then at each write one
array of events ``[ts_ns, kind, fields]`` (one C call: recording costs microseconds), and
``{"end": true}`` once the session ended for it. ``vdsp_sim.board.tracefmt``
merges the files into one Chrome/Perfetto trace.

**Clock.** Every stamp is ``time.time_ns()`` (CLOCK_REALTIME) read in the process where the
event happens. The SoC's processes share one host (ipc) or one host's kernel (containers of
a compose project or pod): they read the same clock, so their stamps compare directly, with
no offsets to exchange and none to drift. CLOCK_MONOTONIC would serve one host as well but
means nothing across hosts or time namespaces; over tcp between hosts, CLOCK_REALTIME is at
least NTP-disciplined (alignment to NTP's error, typically well under a millisecond on a LAN).
A clock step (settimeofday) during a session would show as a gap; NTP slews instead.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import stat
import time
from pathlib import Path
from typing import IO, Any

import msgpack

from vdsp_sim.board import settings

CHECK_EVERY_S = 0.25
FLAG = "active"
MAX_FILE_BYTES = 256 << 20      # one process's file in one session; beyond, it stops recording
_SESSION_RE = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,63}")
# The fields of the events recorded on the task path, as tuples (cheaper to build and pack
# than maps); read() turns them into maps. Other events are recorded as maps.
SCHEMAS = {
    "submit": ("id", "op", "core", "prio", "cust", "bytes"),
    "complete": ("id", "code", "core", "exec_us", "queue_us"),
    "enq": ("rid", "cid", "cpid", "owner", "op", "prio", "cust", "core", "bytes", "q", "fl"),
    "disp": ("rid", "core", "q", "fl"),
    "reply": ("rid", "core", "code", "q", "fl"),
    "task": ("t0", "id", "op", "bind", "code"),
}
SUFFIX = ".trace"
END = msgpack.packb({"end": True})
now_ns = time.time_ns      # the trace clock (see the module docstring)


def trace_dir(rt: Path | None = None) -> Path:
    """Where the flag and the sessions live (not created)."""
    env = settings.current().trace_dir
    if env:
        return env
    if rt is None:
        from vdsp_sim.board import runtime
        rt = runtime.runtime_dir(create=False)
    return Path(rt) / "trace"


def active(directory: Path) -> dict | None:
    """The active session ``{"session", "dir", "started_ns"}``, or None."""
    try:
        return json.loads((directory / FLAG).read_text())
    except (OSError, ValueError):
        return None


def start(directory: Path) -> dict:
    """Turn tracing on for every process watching ``directory``; returns the session. An
    active session is reused (two ``vdsp trace`` at once share it)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    current = active(directory)
    if current is not None and Path(current["dir"]).is_dir():
        return current
    name = time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
    session: dict[str, Any] = {"session": name, "dir": str(directory / name), "started_ns": now_ns()}
    Path(session["dir"]).mkdir(mode=0o700)
    tmp = directory / f".{FLAG}.{os.getpid()}"
    tmp.write_text(json.dumps(session))
    os.replace(tmp, directory / FLAG)
    return session


def stop(directory: Path) -> dict | None:
    """Turn tracing off; returns the session that was active (None: none was)."""
    session = active(directory)
    try:
        (directory / FLAG).unlink()
    except FileNotFoundError:
        pass
    return session


def wait_started(session_dir: Path, timeout_s: float = 2.0) -> list[str]:
    """Wait until the relay and every core with its firmware have opened their files in the
    session (or ``timeout_s`` passed); returns the roles of the files there."""
    deadline = time.monotonic() + timeout_s
    while True:
        roles = sorted(p.name.split("-")[0] for p in Path(session_dir).glob("*" + SUFFIX))
        cores = roles.count("core")
        if "relay" in roles and cores and roles.count("firmware") >= cores or time.monotonic() >= deadline:
            return roles
        time.sleep(0.05)


def wait_ended(session_dir: Path, timeout_s: float = 3.0, quiet_s: float = 0.0) -> list[Path]:
    """The session's files once each has its end line (or ``timeout_s`` passed: a process
    that died mid-session never writes one)."""
    deadline = time.monotonic() + timeout_s
    while True:
        files = sorted(Path(session_dir).glob("*" + SUFFIX))
        if all(_ended(f) for f in files) or time.monotonic() >= deadline:
            return files
        time.sleep(0.05)


def _ended(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - 64))
            return fh.read().endswith(END)
    except OSError:
        return True


class Recorder:
    """One process's trace recorder. ``on`` is true while a session is active; callers test
    it before building an event, so that tracing off costs an attribute read."""

    def __init__(self, role: str, name: str = "", *, rt: Path | None = None, directory: Path | None = None,
                 owner: int | None = None, check_every_s: float = CHECK_EVERY_S, meta: dict | None = None) -> None:
        self.role, self.name, self.owner, self.meta = role, name or role, owner, meta or {}
        self.pid = os.getpid()
        self.check_every_s = check_every_s
        try:
            self.directory: Path | None = directory if directory is not None else trace_dir(rt)
        except Exception:   # no runtime dir: never on
            self.directory = None
        self.flag = str(self.directory / FLAG) if self.directory is not None else ""
        self.on = False
        self.events: list[tuple] = []
        self.session: str | None = None
        self._stamp: tuple | None = None
        self._file: IO[bytes] | None = None
        self.written = 0
        self._next_check = 0.0

    def emit(self, kind: str, fields, ts: int | None = None) -> None:
        """One event now (or at ``ts``, ns of the trace clock): ``fields`` a map, or a tuple
        in the order of ``SCHEMAS[kind]``. Call only while ``on``."""
        self.events.append((ts or now_ns(), kind, fields))

    def poll(self, force: bool = False, flush: bool = False) -> bool:
        """Look at the switch (at most every ``check_every_s`` unless ``force``); write what
        was recorded then (or now, with ``flush``: a firmware going idle writes at once, so
        that a SIGKILL loses at most what it recorded in its last busy quarter second).
        Returns ``on``."""
        mono = time.monotonic()
        if not force and mono < self._next_check:
            if flush and self.events:
                self.flush()
            return self.on
        self._next_check = mono + self.check_every_s
        if not self.flag:
            return False
        try:
            st = os.stat(self.flag)
            stamp = (st.st_ino, st.st_mtime_ns)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._stamp = stamp
            session = active(self.directory) if stamp and self.directory is not None else None
            name = session["session"] if session else None
            if name != self.session:
                self._end()
                if session is not None:
                    self._begin(session)
        if self.on:
            self.flush()
        return self.on

    def _begin(self, session: dict) -> None:
        """Open this process's file in the session's directory: a plain directory of the trace
        directory, named by the session (the flag file cannot send our writes elsewhere)."""
        name = session.get("session")
        if not isinstance(name, str) or not _SESSION_RE.fullmatch(name) or self.directory is None:
            return
        folder = self.directory / name
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return
            fd = os.open(folder / f"{self.role}-{self.name}-{self.pid}{SUFFIX}",
                         os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        except OSError:
            return
        self._file = os.fdopen(fd, "ab")
        self.written = 0
        self.session, self.on = session["session"], True
        self.events.clear()
        self._file.write(msgpack.packb({"role": self.role, "name": self.name, "pid": self.pid, "owner": self.owner,
                                        "host": os.uname().nodename, "clock": "CLOCK_REALTIME ns",
                                        "session": self.session, **self.meta}))
        self._file.flush()

    def flush(self) -> None:
        if self._file is None or not self.events:
            return
        events, self.events = self.events, []
        try:
            try:
                data = msgpack.packb(events)
            except TypeError:
                data = msgpack.packb(events, default=str)
            if self.written + len(data) > MAX_FILE_BYTES:    # bounded: the rest of the session is not recorded
                self.on = False
                data = msgpack.packb({"truncated": True, "at_bytes": self.written})
            self.written += len(data)
            self._file.write(data)
            self._file.flush()
        except (OSError, ValueError):
            pass

    def _end(self) -> None:
        if self._file is not None:
            self.flush()
            try:
                self._file.write(END)
                self._file.close()
            except (OSError, ValueError):
                pass
        self._file, self.session, self.on = None, None, False
        self.events.clear()

    def close(self) -> None:
        """The process ends: write what is left and the end line."""
        self._end()


class NullRecorder:
    """Tracing never on (engines' default sink)."""

    on = False

    def emit(self, kind: str, fields, ts: int | None = None) -> None:
        pass

    def poll(self, force: bool = False, flush: bool = False) -> bool:
        return False

    def close(self) -> None:
        pass


class ListRecorder:
    """A recorder that is always on and keeps its events (tests)."""

    on = True

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.t = 0

    def emit(self, kind: str, fields, ts: int | None = None) -> None:
        self.t += 1
        if isinstance(fields, tuple):
            fields = dict(zip(SCHEMAS.get(kind, ()), fields))
        self.events.append((ts or self.t, kind, fields))

    def kinds(self) -> list[str]:
        return [e[1] for e in self.events]

    def poll(self, force: bool = False, flush: bool = False) -> bool:
        return True

    def close(self) -> None:
        pass


def read(path: Path) -> tuple[dict, list, bool]:
    """One process's file: its header, its events ``(ts_ns, kind, fields)``, and whether it
    ended cleanly. A file cut short (its process died) gives what was written whole."""
    header: dict = {}
    events: list = []
    ended = False
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 30)
    with open(path, "rb") as fh:
        unpacker.feed(fh.read())
    try:
        for obj in unpacker:
            if isinstance(obj, dict):
                if obj.get("end"):
                    ended = True
                elif obj.get("truncated"):
                    header["truncated"] = True
                elif not header:
                    header = obj
            elif isinstance(obj, list):
                for e in obj:
                    if isinstance(e, list) and len(e) == 3:
                        ts, kind, fields = e
                        if isinstance(fields, list):
                            fields = dict(zip(SCHEMAS.get(kind, ()), fields))
                        events.append((ts, kind, fields))
    except (ValueError, msgpack.UnpackException):
        pass
    return header, events, ended

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
``{"end": true}`` once the session ended for it. ``vdsp_board.observability.tracefmt``
merges the files into one Chrome/Perfetto trace.

**Clock.** Every stamp is ``time.time_ns()`` (CLOCK_REALTIME) read in the process where the
event happens. The SoC's processes share one host (ipc) or one host's kernel (containers of
a compose project or pod): they read the same clock, so their stamps compare directly, with
no offsets to exchange and none to drift. CLOCK_MONOTONIC would serve one host as well but
means nothing across hosts or time namespaces; over tcp between hosts, CLOCK_REALTIME is at
least NTP-disciplined (alignment to NTP's error, typically well under a millisecond on a LAN).
A clock step (settimeofday) during a session would show as a gap; NTP slews instead.

**Trust and bounds.** The trace directory is checked as the runtime directory is: a real
directory (no symlink) of the SoC's user with no group or world access. :func:`start`
refuses another one (InvalidArgument saying what is wrong), and a recorder never turns on
in one: another user could otherwise switch tracing on in every process of the SoC and read
what they record (client pids, owners, operators). The bytes of all sessions together are
bounded: :func:`start` removes the oldest sessions (never the active one) until the rest
hold at most ``MAX_TOTAL_BYTES`` and ``MAX_SESSIONS``; during a session each file stops at
``MAX_FILE_BYTES``, and every recorder looks at the total each ``TOTAL_CHECK_BYTES`` it
writes and stops when the directory holds more than ``MAX_TOTAL_BYTES``.
"""
from __future__ import annotations

import json
import logging
import math
import os
import shutil
import re
import stat
import time
from pathlib import Path
from typing import IO, Any

import msgpack

from protocol import errors
from vdsp_board.config import settings

log = logging.getLogger("vdsp.trace")
CHECK_EVERY_S = 0.25
FLAG = "active"
MAX_FILE_BYTES = 256 << 20      # one process's file in one session; beyond, it stops recording
MAX_TOTAL_BYTES = 1 << 30       # all sessions in the trace directory together
MAX_SESSIONS = 64               # sessions kept in the trace directory (the oldest go first)
TOTAL_CHECK_BYTES = 16 << 20    # a recorder looks at the directory's total each time it wrote this much
_SESSION_RE = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,63}")
# The fields of the events recorded on the task path, as tuples (cheaper to build and pack
# than maps); read() turns them into maps. Other events are recorded as maps.
SCHEMAS = {
    "submit": ("id", "op", "core", "prio", "cust", "bytes"),
    "complete": ("id", "code", "core", "exec_us", "queue_us"),
    "enq": ("rid", "cid", "cpid", "owner", "op", "prio", "cust", "core", "bytes", "q", "fl"),
    "disp": ("rid", "core", "q", "fl"),
    "reply": ("rid", "core", "code", "q", "fl"),
    "task": ("t0", "id", "op", "bind", "code", "board_us"),
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
        from vdsp_board.processes import rundir
        rt = rundir.runtime_dir(create=False)
    return Path(rt) / "trace"


def active(directory: Path) -> dict | None:
    """The active session ``{"session", "dir", "started_ns"}``, or None."""
    try:
        return json.loads((directory / FLAG).read_text())
    except (OSError, ValueError):
        return None


def problem(directory: Path) -> str | None:
    """What makes ``directory`` unfit to be a trace directory, or None: it must be a real
    directory of this user with no group or world access (as the runtime directory)."""
    try:
        st = os.lstat(directory)
    except OSError as exc:
        return f"trace directory {directory}: {exc.strerror}"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return f"trace directory {directory} is not a directory (a symlink or a file): remove it or set VDSP_TRACE_DIR"
    if st.st_uid != os.geteuid():
        return (f"trace directory {directory} is owned by uid {st.st_uid}, not by the SoC's user (uid {os.geteuid()}):"
                " remove it or set VDSP_TRACE_DIR")
    if st.st_mode & 0o077:
        return (f"bad permissions {stat.S_IMODE(st.st_mode):04o} on trace directory {directory}: it must be private "
                f"(chmod 700 {directory})")
    return None


def check_dir(directory: Path) -> None:
    """Raise InvalidArgument if ``directory`` is no fit trace directory (see :func:`problem`)."""
    why = problem(directory)
    if why is not None:
        raise errors.InvalidArgument(why)


def sessions(directory: Path) -> list[tuple[Path, int]]:
    """The session directories in ``directory``, oldest first, with the bytes each holds."""
    found = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    for entry in entries:
        if not _SESSION_RE.fullmatch(entry.name) or not entry.is_dir(follow_symlinks=False):
            continue
        size, mtime = 0, entry.stat(follow_symlinks=False).st_mtime_ns
        try:
            for f in os.scandir(entry.path):
                if f.is_file(follow_symlinks=False):
                    size += f.stat(follow_symlinks=False).st_size
        except OSError:
            continue
        found.append((mtime, entry.name, Path(entry.path), size))
    found.sort()
    return [(path, size) for _, _, path, size in found]


def prune(directory: Path, keep: str | None = None, room: int = 0) -> list[str]:
    """Remove the oldest sessions (never ``keep``) until the others hold at most
    ``MAX_TOTAL_BYTES - room`` bytes and ``MAX_SESSIONS - 1`` sessions; returns their names."""
    found = [(p, n) for p, n in sessions(directory) if p.name != keep]
    total = sum(n for _, n in found)
    removed: list[str] = []
    for path, size in found:
        if total <= MAX_TOTAL_BYTES - room and len(found) - len(removed) < MAX_SESSIONS:
            break
        shutil.rmtree(path, ignore_errors=True)
        total -= size
        removed.append(path.name)
    if removed:
        log.info("trace: removed %d old session(s) from %s to stay within %d bytes and %d sessions: %s",
                 len(removed), directory, MAX_TOTAL_BYTES, MAX_SESSIONS, ", ".join(removed))
    return removed


def start(directory: Path) -> dict:
    """Turn tracing on for every process watching ``directory``; returns the session. An
    active session is reused (two ``vdsp trace`` at once share it). The oldest sessions
    are removed first to keep the directory within its bounds. Raises InvalidArgument for a
    directory that is not the SoC user's private one."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_dir(directory)
    current = active(directory)
    if current is not None and Path(current["dir"]).is_dir():
        return current
    prune(directory, room=MAX_TOTAL_BYTES // 2)   # half the bound for the new session
    name = time.strftime("%Y%m%d-%H%M%S-") + os.urandom(3).hex()     # = secrets.token_hex(3), less hmac and OpenSSL
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


def wait_started(session_dir: Path, timeout_s: float = 2.0, expect: dict[str, int] | None = None) -> list[str]:
    """Wait until the relay, each of its cores (named in the relay's file) and each core's firmware
    have opened their files in the session, and at least ``expect``'s count of each role ({role:
    count}, e.g. ``{"core": 2, "firmware": 2}``); returns the roles of the files there.

    Gives up ``timeout_s`` after the last new file appeared (a loaded host where recorders start
    one by one, slowly, keeps the wait going: a slow process is not a dead one), and after
    10 x ``timeout_s`` in all. (A core that runs no firmware has no firmware file: the wait for it
    ends ``timeout_s`` after the last file.)"""
    start = last = time.monotonic()
    seen: list[str] = []
    cores: set[str] | None = None       # the relay's cores, once its file is there
    while True:
        names = sorted(p.name for p in Path(session_dir).glob("*" + SUFFIX))
        now = time.monotonic()
        if names != seen:
            seen, last = names, now
        parts = [(role, rest.rpartition("-")[0]) for role, _, rest in (n[:-len(SUFFIX)].partition("-") for n in names)]
        roles = sorted(role for role, _ in parts)
        if cores is None:
            relay = next((n for n in names if n.startswith("relay-")), None)
            cores = _relay_cores(Path(session_dir) / relay) if relay else None
        by_role = {want: {name for role, name in parts if role == want} for want in ("core", "firmware")}
        if ("relay" in roles and cores is not None and cores <= by_role["core"] and cores <= by_role["firmware"]
                and all(roles.count(role) >= n for role, n in (expect or {}).items())):
            return roles
        if now - last >= timeout_s or now - start >= 10 * timeout_s:
            return roles
        time.sleep(0.05)


def _relay_cores(path: Path) -> set[str] | None:
    """The core names in the header of the relay's file (None while it is not written yet)."""
    try:
        with open(path, "rb") as fh:
            unpacker = msgpack.Unpacker(raw=False, max_buffer_size=1 << 16)
            unpacker.feed(fh.read(1 << 16))
            header = next(unpacker, None)
    except (OSError, ValueError, msgpack.UnpackException):
        return None
    names = header.get("cores") if isinstance(header, dict) else None
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else None


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
        # (monotonic) before then poll() only answers ``on`` (and writes, with ``flush``): a
        # caller on a per-task path may skip the call until then (the firmware's compute path)
        self.due = 0.0

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
        if not force and mono < self.due:
            if flush and self.events:
                self.flush()
            return self.on
        self.due = mono + self.check_every_s
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
        why = problem(self.directory)
        if why is not None:     # another user's directory could switch us on and read what we record
            log.warning("%s %s: tracing stays off: %s", self.role, self.name, why)
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
            if self.written + len(data) > MAX_FILE_BYTES or self._over_total(len(data)):
                self.on = False     # bounded: the rest of the session is not recorded
                data = msgpack.packb({"truncated": True, "at_bytes": self.written})
            self.written += len(data)
            self._file.write(data)
            self._file.flush()
        except (OSError, ValueError):
            pass

    def _over_total(self, more: int) -> bool:
        """True when, each TOTAL_CHECK_BYTES written, the trace directory holds over MAX_TOTAL_BYTES."""
        if (self.written + more) // TOTAL_CHECK_BYTES == self.written // TOTAL_CHECK_BYTES or self.directory is None:
            return False
        return sum(n for _, n in sessions(self.directory)) + more > MAX_TOTAL_BYTES

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
    due = math.inf      # poll() never changes ``on``

    def emit(self, kind: str, fields, ts: int | None = None) -> None:
        pass

    def poll(self, force: bool = False, flush: bool = False) -> bool:
        return False

    def close(self) -> None:
        pass


class ListRecorder:
    """A recorder that is always on and keeps its events (tests)."""

    on = True
    due = math.inf      # poll() never changes ``on``

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

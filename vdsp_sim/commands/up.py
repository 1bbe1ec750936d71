"""``vdsp up [-d]``: start relay + vdsp0 + vdsp1 and restart any that dies."""
from __future__ import annotations

import argparse
import atexit
import gc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from protocol import errors
from protocol.constants import DEFAULT_WATCHDOG_MS
from vdsp_board.config import settings
from vdsp_board.processes import rundir
from vdsp_board.observability import log as soclog
from vdsp_board.processes.pidfile import PidFile
from vdsp_sim.soc.readiness import HARD_FACTOR, START_TIMEOUT_S, start_timeout_s

PRIVATE_FILES = True
MAX_FD = 1 << 16      # the descriptors a forked supervisor closes (all but its own)
BACKSTOP_S = 15.0     # 'up -d' stops a supervisor still undecided this long past its longest start


def add_parser(sub) -> argparse.ArgumentParser:
    up = sub.add_parser("up", help="start relay + vdsp0 + vdsp1 and restart any of them that dies",
                        description="Start relay + vdsp0 + vdsp1 and supervise them: a process that exits is "
                                    "restarted at once, then with a doubling backoff; after 5 exits within 30 s "
                                    "it is given up ('vdsp status' shows restarts and give-ups).")
    up.add_argument("-d", "--detach", action="store_true", help="run in the background; stop with 'vdsp down'")
    up.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                    help="the start fails (stopping what it started, exit status 1) when the SoC does not serve "
                         f"within this many seconds (default: $VDSP_START_TIMEOUT, else {START_TIMEOUT_S:g}); "
                         "time its processes spend waiting for a CPU on a busy host does not count, up to 3 x "
                         "SECONDS in all; 0: no limit. A reason no wait mends (a "
                         "firmware that cannot bind its endpoint or refuses the relay, a process given up) "
                         "fails it at once, naming the process and the reason")
    up.add_argument("--watchdog-ms", type=int, default=DEFAULT_WATCHDOG_MS, help="firmware watchdog of each core")
    up.add_argument("--log-files", action="store_true", help="write each process's log under $VDSP_RUNTIME_DIR/log")
    up.add_argument("--allow-unsigned", action="store_true",
                    help="DEVELOPMENT ONLY: the cores also boot unsigned firmware images (logged at every boot, "
                         "shown by 'vdsp status')")
    return up


def _pidfile(rt: Path) -> PidFile:
    return PidFile(rt / "soc.pid")


def run(args: argparse.Namespace) -> int:
    if args.timeout is None:        # not given: the environment's (VDSP_START_TIMEOUT), 0 for no limit
        args.timeout = start_timeout_s() or 0.0
    rt = rundir.runtime_dir()
    why = _ddr_dir_unusable()
    if why:
        print(f"vdsp up: {why}", file=sys.stderr)
        return 1
    pidfile = _pidfile(rt)
    if pidfile.read() is not None:
        print(f"vdsp up: a SoC is already up in {rt} (pid {pidfile.read()}); 'vdsp down' first", file=sys.stderr)
        return 1
    if args.detach:
        return _up_detached(rt, args)
    return _serve(rt, args)


def _ddr_dir_unusable() -> str | None:
    """Why the DDR files' directory cannot serve, or None: every process of the SoC creates its
    files there, so a wrong ``VDSP_SHM_DIR`` is said now, not after the whole start timeout."""
    from vdsp_board.memory import ddr
    path = ddr.shm_dir()
    named = "VDSP_SHM_DIR " if settings.current().raw("VDSP_SHM_DIR") else ""
    if not os.path.lexists(path):
        return (f"the DDR directory {named}{path} does not exist: create it (a tmpfs every process of the SoC "
                "sees, e.g. under /dev/shm)" + (" or unset VDSP_SHM_DIR" if named else ""))
    if not os.path.isdir(path):
        return f"the DDR directory {named}{path} is not a directory"
    return None


def _serve(rt: Path, args: argparse.Namespace, ready: int | None = None) -> int:
    """Start the SoC, supervise it until SIGINT or SIGTERM, stop it. ``ready``: a pipe written
    one line ("SoC up in ...", or nothing if start-up fails) and closed once every core runs."""
    from vdsp_sim.soc.supervisor import Supervisor
    from vdsp_board.processes import proc
    proc.title("supervisor")
    soclog.setup("dsp")
    config = settings.current()
    templates = config.fw_template and config.soc_template
    sup = Supervisor(rt, log_dir=rt / "log" if args.log_files else None,
                     core_args=["--watchdog-ms", str(args.watchdog_ms),
                                *(["--allow-unsigned"] if args.allow_unsigned else [])], restart=True,
                     templates=templates)
    if args.allow_unsigned:
        print("vdsp up: --allow-unsigned: the cores also boot UNSIGNED firmware images (development only)",
              file=sys.stderr, flush=True)
    pidfile = _pidfile(rt)
    pidfile.acquire()
    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        if templates:
            _preload()
        sup.start()
        status = sup.wait_ready(args.timeout or None)
        line = f"SoC up in {rt}: " + ", ".join(f"{c['name']} {c['state']} fw {c.get('firmware_version', '?')}"
                                               for c in status["cores"])
        print(line, flush=True)
        if ready is not None:
            _tell(ready, line)
            ready = None
        sup.supervise(lambda: stop["now"])   # a process that exits is restarted (or given up)
        return 0
    except errors.VdspError as exc:
        print(f"vdsp up: {exc}", file=sys.stderr)
        return 1
    finally:
        if ready is not None:
            _close_ready(ready)
        sup.stop()
        pidfile.release()
        print("SoC down", flush=True)


def _preload() -> None:
    """What every core, firmware and the relay import (``vdsp_sim.soc.entries.preload``), imported here
    before the supervisor makes the SoC's starter (while this process has one thread): the cores
    and the relay are forked from it, so those imports are in memory once for the whole SoC, this
    process included."""
    from vdsp_sim.soc import entries
    entries.preload()
    gc.freeze()


_READY: dict[int, bool] = {}    # the open "SoC up" pipe of a forked supervisor (closed in its forks)


def _tell(fd: int, line: str) -> None:
    try:
        os.write(fd, line.encode() + b"\n")
    except OSError:     # the 'vdsp up -d' that waits for it is gone: nobody to tell
        pass
    _close_ready(fd)


def _close_ready(fd: int) -> None:
    _READY.pop(fd, None)
    os.close(fd)


def _single_threaded() -> bool:
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _up_detached(rt: Path, args: argparse.Namespace) -> int:
    """Start the supervisor in the background (in a session of its own, its output appended to
    the log) and return once it says every core runs, or fails to start.

    The supervisor is this process, forked (no second interpreter to start and import all of it
    again), when it is single-threaded; else ``python -m vdsp_sim.cli up``. It says "SoC up"
    on a pipe (a forked one) or in the log. It decides (its start timeout, or a reason no wait
    mends), and we follow it; our own deadline is a backstop past its longest start (3 x the
    timeout, + BACKSTOP_S), at which we stop it."""
    from vdsp_sim.soc.supervisor import exit_text, stop_pid
    (rt / "log").mkdir(exist_ok=True)
    log_path = rt / "log" / "vdsp_board.log"
    start = log_path.stat().st_size if log_path.exists() else 0
    env = settings.child_env(VDSP_RUNTIME_DIR=str(rt))
    deadline = time.monotonic() + args.timeout * HARD_FACTOR + BACKSTOP_S if args.timeout else None
    proc: _Forked | subprocess.Popen
    if _single_threaded():
        forked = _fork_supervisor(rt, args, env, log_path)
        proc, said = forked, forked.said(deadline)
    else:
        cmd = [sys.executable, "-m", "vdsp_sim.cli", "up", "--log-files", "--timeout", str(args.timeout),
               "--watchdog-ms", str(args.watchdog_ms)] + (["--allow-unsigned"] if args.allow_unsigned else [])
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                                    env=env)
        said = _said_in_log(proc, log_path, start, deadline)
    if said:
        print(f"SoC up in {rt} (pid {proc.pid}){_sockets_note(rt)}; logs in {rt / 'log'}; stop with: vdsp down")
        return 0
    if proc.poll() is None:     # the backstop: the supervisor should have decided long ago
        stop_pid(proc.pid)
        proc.poll()
        print(f"vdsp up -d: the SoC did not run within --timeout {args.timeout:g} s (nor its supervisor, pid "
              f"{proc.pid}, say so: stopped it); see {rt / 'log'}", file=sys.stderr)
        return 1
    with open(log_path, "rb") as fh:
        fh.seek(start)
        text = fh.read().decode(errors="replace")
    why = [line for line in text.splitlines() if line.startswith("vdsp up:")]
    print(f"vdsp up -d: the SoC failed to start ({why[-1][9:] if why else exit_text(proc.returncode)}); "
          f"see {rt / 'log'}", file=sys.stderr)
    return 1


def _sockets_note(rt: Path) -> str:
    """Where the sockets are, when not in the runtime dir (its path is too long for them)."""
    try:
        where = rundir.socket_dir(rt)
    except errors.VdspError:
        return ""
    return "" if where == rt else f"; sockets in {where} (the runtime dir's path is too long for them)"


def _said_in_log(proc: subprocess.Popen, log_path: Path, start: int, deadline: float | None) -> bool:
    """True once the log says "SoC up in"; False when ``proc`` ends first or at the deadline."""
    while deadline is None or time.monotonic() < deadline:
        with open(log_path, "rb") as fh:
            fh.seek(start)
            if b"SoC up in" in fh.read():
                return True
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    return False


class _Forked:
    """The forked supervisor, seen from 'vdsp up -d': its pid, its "SoC up" line, its exit."""

    def __init__(self, pid: int, ready: int) -> None:
        self.pid, self.ready = pid, ready
        self.returncode: int | None = None
        self.ended = False      # the pipe ended without the line: the supervisor failed and exits

    def said(self, deadline: float | None) -> bool:
        """Wait for the line (True), the pipe's end without one or the deadline (False)."""
        from vdsp_board.processes import fdwait
        got = b""
        try:
            while True:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not fdwait.readable(self.ready, wait):
                    return False
                chunk = os.read(self.ready, 4096)
                if not chunk:
                    self.ended = True
                    return False
                got += chunk
                if got.endswith(b"\n"):
                    return True
        finally:
            os.close(self.ready)

    def poll(self) -> int | None:
        """Its exit status once it has exited (waited for once its pipe ended without the line)."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, 0 if self.ended else os.WNOHANG)
            except ChildProcessError:
                return 255
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _fork_supervisor(rt: Path, args: argparse.Namespace, env: dict, log_path: Path) -> _Forked:
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        os.close(w)
        return _Forked(pid, r)
    code = 1
    try:    # the supervisor: what 'python -m vdsp_sim.cli up --log-files' would be
        os.close(r)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.closerange(3, w)     # nothing of the caller's (its pipes) stays open here
        os.closerange(w + 1, MAX_FD)
        settings.become(env)
        # what the supervisor forks (the SoC's starter, and from it the cores and firmwares)
        # must not hold the pipe: only the supervisor says whether the SoC is up
        os.register_at_fork(after_in_child=lambda: _close_ready(w) if w in _READY else None)   # once: inherited
        _READY[w] = True
        args.log_files, args.detach = True, False
        code = _serve(rt, args, ready=w)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        try:    # what the exit of 'python -m vdsp_sim.cli up' runs (the DDR owner of its client, logs)
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)     # never back into the caller's frames: they are the parent's

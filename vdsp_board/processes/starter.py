"""The process starter: one fork server per owner, the parent of every process it starts.

Who starts what. ``vdsp up``'s supervisor owns the SoC's starter, which starts the cores, the
relay and the supervisor's one-shot jobs; each core owns a starter of its own, which starts the
core's firmwares. The owner names what its starter may start (:class:`Entry`, passed when the
starter is made: vdsp_sim's core, relay and job entry points, dsp_side's firmware one); no role
starts another role's process, and nothing is imported by name.

Why a fork server. A process forked from a starter begins with what its owner imported before it
made the starter (numpy, cv2 and the operators: ``dsp_side.preload``), shared
copy-on-write: a firmware boot is a fork plus its image's checks (~0.1 s, not 1-1.6 s of
imports), and an idle SoC holds those imports once (~155 MB PSS, not ~345). The owner makes its
starter while it has one thread and *before it reads any key*: nothing a starter forks can
inherit a secret its owner read later (a firmware runs image code; it must hold no key but its
own). Without templates (``VDSP_FW_TEMPLATE=0``, ``VDSP_SOC_TEMPLATE=0``), or when the owner has
threads (a test process), the starter executes each entry as a fresh interpreter instead
(``python *command *argv``); a starter made by a process with threads is itself a fresh
interpreter (``python -m vdsp_board.processes.starter``): a fork of a process with threads is not safe, nor
one of a process that did not prepare for it (it would hold all of its fds). Such an owner may
name a template starter instead (``template_command``: a module whose main is
:func:`serve_templates`, such as ``vdsp_sim.soc.entries``): a fresh interpreter that imports first and
then forks its entries, as a forked starter does (a private SoC's cores and relay).

Parentage and exits. The starter stays the parent of what it starts (no double fork, no
adoption): it reaps each child and reports its exit status over its socket, so an exit is the
kernel's word (``waitpid``), seen by the owner as ``{"exit": PID, "status": N}`` (N as
``subprocess`` gives it: negative for a signal). It hands the owner a pidfd of each child where
the kernel has them (Linux >= 5.3), through which the owner signals it (``pidfd_send_signal``:
never another process that reused the pid); without pidfds the owner asks the starter to signal
it, and the starter, the only one who reaps it, signals only a child it has not reaped. A
starter is a child subreaper (what its children orphan ends with it and is reaped). Each child
gets SIGKILL when the starter dies (``PR_SET_PDEATHSIG``), and the starter when its owner dies;
closing the owner's end of the socket ends the starter.

The conversation is one ``SOCK_SEQPACKET`` socket pair, one JSON object per message. A request
``{"seq", "entry", "argv", "env", "fds", "fresh"}`` carries the child's standard streams
(``SCM_RIGHTS``, in the order ``fds`` names them: 1, 2); the reply is ``{"seq", "pid"}`` (with the
child's pidfd attached, if any) or ``{"seq", "error"}``; ``"fresh": true`` (optional) asks for the
entry as a fresh interpreter even from a starter with templates (a firmware whose image needs
``LD_PRELOAD``: an AddressSanitizer build, ``dsp_side.fwproc``). ``{"signal": PID, "sig": N}`` asks the
starter to signal a child (no reply). A request names an entry, never a command: the starter runs
only the entries its owner registered when it made it (a fresh starter gets their commands on its
own command line, ``--entries``), so whoever gets to speak on its socket still starts only those.
"""
from __future__ import annotations

import argparse
import array
import ctypes
import dataclasses
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from typing import Callable

from vdsp_board.config import settings
from vdsp_board.processes import proc, procfacts

MAX_MESSAGE = 1 << 16
MAX_FDS = 3                 # fds a request may carry (the child's stdout and stderr)
REPLY_TIMEOUT_S = 60.0      # a starter answers a request in a fork's time; 60 s on a starved host
REPLY_MOST_S = 180.0        # ... and a starter still at work (using CPU) at most this long in all
CLOSE_WAIT_S = 1.0          # a starter whose owner closed its end exits at once; SIGKILL after this
_PR_SET_CHILD_SUBREAPER = 36


@dataclasses.dataclass(frozen=True)
class Entry:
    """What a starter can start under one name: ``run(argv)`` (its exit status) in a fork of the
    starter, or, without templates, ``python *command *argv`` as a fresh interpreter."""
    run: Callable[[list[str]], int]
    command: tuple[str, ...]


def pidfds_available() -> bool:
    """Whether this kernel gives pidfds (``pidfd_open``, Linux >= 5.3)."""
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


# --- the owner's side ---------------------------------------------------------------------------

class Started:
    """A process a starter started, with the part of ``subprocess.Popen``'s interface its owner
    uses: ``pid``, ``returncode``, ``stdout`` (a pipe, when asked for), ``poll``, ``wait``,
    ``send_signal``, ``terminate``, ``kill``; ``pidfd`` (None where the kernel has none)."""

    def __init__(self, starter: "Starter", pid: int, pidfd: int | None, stdout) -> None:
        self.starter, self.pid, self.pidfd, self.stdout = starter, pid, pidfd, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.starter.collect(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status, once the starter reports it. Raises subprocess.TimeoutExpired."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            self.starter.collect(left)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the process unless it has exited (never a process that reused its pid)."""
        if self.poll() is not None:
            return
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, sig)
            except ProcessLookupError:      # exited; its report is on its way
                pass
        else:
            self.starter.signal(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _exited(self, status: int) -> None:
        self.returncode = status
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class StarterGone(OSError):
    """The starter exited (it was killed): it starts nothing more."""


class Starter:
    """The owner's handle on its starter process (made now, while the owner has one thread:
    before any key is read). ``entries``: what it may start. ``templates``: run each entry in a
    fork of the starter (else as a fresh interpreter). ``prepare``: called in the starter before
    it serves (what every child should inherit: a heap setting). ``pidfds``: hand them out where
    the kernel has them (False: as on a kernel without). ``env``: the environment of a starter
    that is a fresh interpreter."""

    def __init__(self, name: str, entries: dict[str, Entry], *, templates: bool = True,
                 prepare: Callable[[], object] | None = None, pidfds: bool = True, env: dict | None = None,
                 template_command: tuple[str, ...] | None = None) -> None:
        self.name, self.entries = name, entries
        # a fork of a process whose Python threads may hold locks is not safe (the native pools
        # numpy and OpenCV start at import are: they prepare for fork); and a fork would hold
        # every fd of an owner that did not prepare for it (a test process): a fresh starter then.
        # ``template_command``: that fresh starter is ``python *template_command`` (a module whose
        # main is :func:`serve_templates`: it imports what its entries import, then forks them),
        # never a fork of the owner, however many threads the owner has
        self.forked = templates and template_command is None and threading.active_count() == 1
        self.templates = self.forked or (templates and template_command is not None)
        self.lock = threading.RLock()
        self.children: dict[int, Started] = {}
        self._replies: dict[int, dict] = {}     # seq -> the starter's reply
        self._passed: dict[int, list[int]] = {}  # seq -> the fds that came with it (a pidfd)
        self._early: dict[int, int] = {}        # pid -> exit status, for a child whose reply is not read yet
        self._seq = 0
        self._popen: subprocess.Popen | None = None
        self.gone = False
        use_pidfds = pidfds and pidfds_available()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        owner = os.getpid()
        if self.forked:
            pid = os.fork()     # the owner made no zmq context yet (its I/O threads would not follow)
            if pid == 0:
                code = 1
                try:
                    ours.close()
                    code = _serve(theirs, name, owner, entries, prepare, use_pidfds)
                finally:
                    os._exit(code)
            self.pid = pid
        else:
            theirs.set_inheritable(True)
            command = list(template_command) if self.templates and template_command else [
                "-m", "vdsp_board.processes.starter",
                "--entries", json.dumps({k: list(e.command) for k, e in entries.items()})]
            self._popen = subprocess.Popen(
                [sys.executable, *command, "--fd", str(theirs.fileno()), "--owner", str(owner), "--name", name,
                 *([] if use_pidfds else ["--no-pidfds"])],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=settings.child_env(env))
            self.pid = self._popen.pid
        theirs.close()
        self.sock = ours

    def fileno(self) -> int:
        """Readable when the starter has something to say (an exit): wake a loop on it, then :meth:`collect`."""
        return self.sock.fileno()

    def start(self, entry: str, argv: list[str], *, env: dict | None = None, stdout: int | None = None,
              stderr: int | None = None, pipe_stdout: bool = False, fresh: bool = False) -> Started:
        """Start ``entry`` with ``argv`` (and environment ``env``; None: the starter's own). The
        child's stdout and stderr are ``stdout``/``stderr`` (fds; None: the starter's), or its stdout
        a pipe to us (``pipe_stdout``: the returned process's ``stdout``). ``fresh``: as a fresh
        interpreter (``python *command *argv``, which ``env`` reaches from its first instruction),
        not a fork of the starter. Raises OSError (:class:`StarterGone` once the starter is gone)."""
        if entry not in self.entries:
            raise ValueError(f"the starter {self.name} has no entry {entry!r}")
        read_end = None
        fds: dict[int, int] = {}
        if pipe_stdout:
            read_end, fds[1] = os.pipe()
        elif stdout is not None:
            fds[1] = stdout
        if stderr is not None:
            fds[2] = stderr
        req = {"entry": entry, "argv": argv, "env": env, "fds": list(fds), **({"fresh": True} if fresh else {})}
        try:
            reply, passed = self._request(req, list(fds.values()))
        except OSError:
            if read_end is not None:
                os.close(read_end)
            raise
        finally:
            if pipe_stdout:
                os.close(fds[1])
        if "pid" not in reply:
            for fd in passed:
                os.close(fd)
            if read_end is not None:
                os.close(read_end)
            raise OSError(f"starter {self.name}: {reply.get('error', reply)}")
        child = Started(self, int(reply["pid"]), passed[0] if passed else None,
                        os.fdopen(read_end, "rb", buffering=0) if read_end is not None else None)
        with self.lock:
            self.children[child.pid] = child
            early = self._early.pop(child.pid, None)    # it exited before we read the reply
        if early is not None:
            child._exited(early)
        return child

    def signal(self, pid: int, sig: int) -> None:
        """Ask the starter to signal its child ``pid`` (the path without pidfds)."""
        with self.lock:
            if not self.gone:
                try:
                    self.sock.send(json.dumps({"signal": pid, "sig": int(sig)}).encode())
                except OSError:
                    pass

    def _request(self, req: dict, fds: list[int]) -> tuple[dict, list[int]]:
        with self.lock:
            if self.gone:
                raise StarterGone(f"the starter {self.name} is gone")
            self._seq += 1
            seq = req["seq"] = self._seq
            data = json.dumps(req).encode()
            if len(data) > MAX_MESSAGE:
                raise OSError(f"starter {self.name}: request too large ({len(data)} bytes)")
            try:
                self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else [])
            except OSError as exc:
                raise StarterGone(f"the starter {self.name} is gone ({exc})") from None
            deadline = time.monotonic() + REPLY_TIMEOUT_S
            most = time.monotonic() + REPLY_MOST_S
            cpu = self._cpu()
            while seq not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0:
                    # a starter still at work (a template starter importing on a starved host)
                    # is slow, not stuck: only REPLY_TIMEOUT_S without any CPU of its own fails,
                    # or REPLY_MOST_S in all (a starter that spins answers nothing)
                    now_cpu = self._cpu()
                    if now_cpu is None or now_cpu <= (cpu or 0):
                        raise OSError(f"starter {self.name}: no answer within {REPLY_TIMEOUT_S:.0f} s")
                    if time.monotonic() >= most:
                        raise OSError(f"starter {self.name}: busy but no answer within {REPLY_MOST_S:.0f} s")
                    cpu, deadline = now_cpu, time.monotonic() + REPLY_TIMEOUT_S
                    continue
                self._collect(left)
                if self.gone and seq not in self._replies:
                    raise StarterGone(f"the starter {self.name} is gone")
            return self._replies.pop(seq), self._passed.pop(seq, [])

    def _cpu(self) -> int | None:
        """The starter's CPU time so far (clock ticks), None once it is gone."""
        return None if procfacts.exited(self.pid) else (procfacts.stat(self.pid) or ("", 0))[1]

    def collect(self, timeout: float | None = 0) -> None:
        """Take in what the starter said (exits), waiting up to ``timeout`` seconds (None: no
        limit) for a first message."""
        with self.lock:
            self._collect(timeout)

    def _collect(self, timeout: float | None) -> None:
        if self.gone:
            return
        poll = select.poll()
        poll.register(self.sock, select.POLLIN)
        wait_ms = None if timeout is None else max(0, int(timeout * 1000 + 0.999))
        while poll.poll(wait_ms):
            wait_ms = 0
            try:
                data, fds = _recv(self.sock, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                data, fds = b"", []
            if not data:
                self._lost()
                return
            try:
                msg = json.loads(data)
            except ValueError:
                msg = {}
            if "exit" in msg:
                child = self.children.pop(msg["exit"], None)
                if child is not None:
                    child._exited(int(msg["status"]))
                else:       # its reply is not read yet (start() looks here)
                    self._early[int(msg["exit"])] = int(msg["status"])
            elif "seq" in msg:
                self._replies[msg["seq"]] = msg
                self._passed[msg["seq"]] = fds
            else:
                for fd in fds:
                    os.close(fd)

    def _lost(self) -> None:
        """The starter is gone (killed: its children got SIGKILL with it, PR_SET_PDEATHSIG)."""
        self.gone = True
        for child in self.children.values():
            child._exited(-signal.SIGKILL)
        self.children.clear()

    def alive(self) -> bool:
        self.collect(0)
        return not self.gone

    def close(self) -> None:
        """End the starter (closing our end ends it; SIGKILL if it lingers) and reap it. What it
        started and is still running gets SIGKILL with it."""
        with self.lock:
            self.gone = True
            self.sock.close()
        if self._popen is not None:
            try:
                self._popen.wait(CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait()
            return
        deadline = time.monotonic() + CLOSE_WAIT_S
        while True:
            try:
                done, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return
            if done:
                return
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                return
            time.sleep(0.005)


# --- the starter process ------------------------------------------------------------------------

def _prctl(option: int, arg: int) -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _recv(sock: socket.socket, flags: int = 0) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    data, anc, mflags, _ = sock.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(MAX_FDS * fds.itemsize), flags)
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    if mflags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        return b"{}", []
    return data, list(fds)


class _Server:
    """The starter's state: its owner's socket, the children it has not reaped, what waits to be said."""

    def __init__(self, sock: socket.socket, name: str, entries: dict[str, Entry], pidfds: bool,
                 fresh: bool = False) -> None:
        self.sock, self.name, self.entries, self.pidfds = sock, name, entries, pidfds
        self.fresh = fresh      # each entry runs as ``python *command *argv``, not in a fork of us
        self.live: set[int] = set()
        self.unsaid: list[bytes] = []       # reports the owner has not taken yet (its socket was full)

    def say(self, msg: dict, fds: list[int] | None = None) -> None:
        data = json.dumps(msg).encode()
        if fds:     # a reply: the owner waits for it
            self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        else:
            self.unsaid.append(data)
        self.flush()

    def flush(self) -> None:
        while self.unsaid:
            try:
                self.sock.send(self.unsaid[0], socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            self.unsaid.pop(0)

    def reap(self) -> None:
        """Reap every exited child (ours and orphans we adopted); report ours."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if not pid:
                return
            if pid in self.live:
                self.live.discard(pid)
                self.say({"exit": pid, "status": os.waitstatus_to_exitcode(status)})

    def handle(self, data: bytes, fds: list[int], wake: tuple[int, int]) -> None:
        try:
            req = json.loads(data)
            if "signal" in req:
                if req["signal"] in self.live:      # not reaped: the pid is still our child's
                    os.kill(int(req["signal"]), int(req["sig"]))
                return
            seq = req["seq"]
        except (ValueError, KeyError, TypeError, OSError):
            return
        try:
            argv, env, entry, targets = req["argv"], req.get("env"), req["entry"], req.get("fds", [])
            if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)
                    and (env is None or isinstance(env, dict)) and isinstance(targets, list)
                    and len(targets) == len(fds) and all(t in (1, 2) for t in targets)
                    and isinstance(entry, str)):
                raise ValueError("a request is {seq, entry, argv, env, fds} with its file descriptors")
            if entry not in self.entries:       # only what the owner registered when it made us runs
                raise ValueError(f"no entry {entry!r} (this starter runs {sorted(self.entries)})")
            pid = self.fork(entry, argv, env, dict(zip(targets, fds)), wake, req.get("fresh") is True)
            pidfd = self._pidfd(pid)
            try:
                self.say({"seq": seq, "pid": pid}, [pidfd] if pidfd is not None else None)
            finally:
                if pidfd is not None:
                    os.close(pidfd)
        except Exception as exc:
            self.say({"seq": seq, "error": f"{type(exc).__name__}: {exc}"})
        finally:
            for fd in fds:
                os.close(fd)

    def _pidfd(self, pid: int) -> int | None:
        if not self.pidfds:
            return None
        try:
            return os.pidfd_open(pid)       # not reaped yet: it is our child's, whatever it did
        except OSError:
            return None

    def fork(self, entry: str, argv: list[str], env: dict | None, streams: dict[int, int],
             wake: tuple[int, int], fresh: bool = False) -> int:
        env = settings.child_env(env, **{proc.PARENT_ENV: str(os.getpid())})    # it dies with us
        me = os.getpid()
        pid = os.fork()
        if pid:
            self.live.add(pid)
            return pid
        code = 1
        try:
            self.sock.close()
            for fd in wake:
                os.close(fd)
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGUSR1):
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            proc.die_with(me)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            for target, fd in streams.items():
                os.dup2(fd, target)
            if self.fresh or fresh:     # a fresh interpreter: the entry's registered command, never one sent to us
                os.execve(sys.executable, [sys.executable, *self.entries[entry].command, *argv], env)
            settings.become(env)
            # gc stays frozen: the starter's objects live as long as we do, and a collection
            # visiting them would write to (and so copy) every page they are on
            code = self.entries[entry].run(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 127 if self.fresh else 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(code)
        raise AssertionError("unreachable")   # pragma: no cover


def _serve(sock: socket.socket, name: str, owner: int, entries: dict[str, Entry],
           prepare: Callable[[], object] | None, pidfds: bool, fresh: bool = False) -> int:
    """The starter's loop: a fork per request, a report per exit, until the owner closes its end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # terminal signals are the owner's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    proc.die_with(owner)
    proc.title(f"{name} starter", f"{name}.starter")
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if prepare is not None:
        prepare()
    gc.collect()
    gc.freeze()     # the inherited objects stay out of the collector's way: their pages stay shared
    server = _Server(sock, name, entries, pidfds, fresh)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)     # only to wake the poll
    poll = select.poll()
    poll.register(wake_r, select.POLLIN)
    while True:
        server.reap()
        poll.register(sock, select.POLLIN | (select.POLLOUT if server.unsaid else 0))
        # no deadline: a starter waits for its owner, who ends it (its death: PR_SET_PDEATHSIG)
        for fd, _ in poll.poll():
            if fd == wake_r:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                continue
            server.flush()
            try:
                data, fds = _recv(sock, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except OSError:
                return 0
            if not data:                    # the owner closed its end, or is gone
                return 0
            server.handle(data, fds, (wake_r, wake_w))


def _arguments(prog: str) -> argparse.ArgumentParser:
    """The command line of a fresh starter (its owner's socket, pid and the starter's name)."""
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    ap.add_argument("--fd", type=int, required=True, help="the owner's socket (SOCK_SEQPACKET)")
    ap.add_argument("--owner", type=int, required=True, help="the owner's pid: the starter dies with it")
    ap.add_argument("--name", required=True)
    ap.add_argument("--no-pidfds", action="store_true", help="hand out no pidfds (as on a kernel without)")
    return ap


def serve_templates(prog: str, entries: dict[str, Entry], preload: Callable[[], object],
                    argv: list[str] | None = None) -> int:
    """The main of a fresh starter that forks its entries (``Starter(template_command=...)``): the
    module that calls it names ``entries`` (their code, imported by that module: nothing by a name
    sent to it), ``preload()`` imports what they import, once, here, while this process has one
    thread and has read no key; then each entry runs in a fork of it, as under ``vdsp up``."""
    args = _arguments(prog).parse_args(argv)
    sock = socket.socket(fileno=args.fd)
    proc.die_with(args.owner)       # also while it imports
    preload()
    return _serve(sock, args.name, args.owner, entries, None, not args.no_pidfds)


def main(argv: list[str] | None = None) -> int:
    """``python -m vdsp_board.processes.starter --fd N --owner PID --name NAME``: a starter made by a process
    with threads; it starts fresh interpreters only."""
    ap = _arguments("python -m vdsp_board.processes.starter")
    ap.add_argument("--entries", default="{}",
                    help="JSON {name: [args of python]}: the only entries it runs, as `python *args *argv`")
    args = ap.parse_args(argv)
    commands = json.loads(args.entries)
    if not (isinstance(commands, dict) and all(isinstance(c, list) and all(isinstance(a, str) for a in c)
                                               for c in commands.values())):
        ap.error("--entries is a JSON object of lists of strings")
    entries = {name: Entry(_fresh_only, tuple(command)) for name, command in commands.items()}
    sock = socket.socket(fileno=args.fd)
    return _serve(sock, args.name, args.owner, entries, None, not args.no_pidfds, fresh=True)


def _fresh_only(argv: list[str]) -> int:
    raise AssertionError("a fresh starter executes its entries' commands")     # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())

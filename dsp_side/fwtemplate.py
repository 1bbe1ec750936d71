"""Templates: processes that have imported what cores and firmwares run (numpy, cv2, numba, the
stock operators) and loaded the compiled point-cloud kernels once, and fork new processes on
request (fork servers).

Why: a firmware booted by ``python -m dsp_side.firmware`` imported all of it again and loaded
the numba kernels again: 1-1.6 s per boot, and every core recovery is a boot; and each firmware
held its own copy (an idle SoC was ~500 MB PSS). Forked from a template, a process starts with
all of that in place, shared copy-on-write (counted once in PSS). A firmware boot is a fork plus
the image's verification and load (``dsp_side.fw_image.load``: signature, header, payload digest,
then the image's code, then the manifest check): nothing of an image runs before its checks, and
nothing of any image runs in a template.

Two levels. Each core imports all of it at start, before it listens (so that no boot waits
for imports while the core is deaf to its peers), then forks its own firmware template
(``vdsp0.template``) while it is single-threaded (before its ZeroMQ context exists), and that one
forks the core's firmwares (``vdsp0.fw``): the imports are in memory once per core. ``vdsp up``
imports them itself (:func:`preload`), then forks a SoC-wide template (``soc.template``) while it
is single-threaded, and forks the cores and the relay from it: the imports are then in memory
once per SoC, the supervisor's included (an idle SoC ~155 MB PSS instead of ~345;
``VDSP_SOC_TEMPLATE=0`` starts each core and the relay as a fresh interpreter again). Whoever
preloads then lets go of the library pages importing mapped (``vdsp_board.filepages``): a fork
does not inherit a file mapping's pages, so they were the preloading process's alone (111 MB of
numba's LLVM in the supervisor on Linux 6.18; an idle SoC 273 -> 155 MB PSS). A core
started alone (``vdsp core``, tests, containers) is a fresh interpreter with a template of its own.

Parentage. Whoever forks a template makes itself a child subreaper, and a template forks twice:
the intermediate process exits before the reply, so the new process is reparented to the
requester and is its own child, as a ``subprocess.Popen`` one was: it waits for it, signals it,
reads its exit status. The new process waits to be adopted, then asks for SIGKILL when the
requester dies (``PR_SET_PDEATHSIG``); so does a template. A template is killed when its owner
stops (closing the socket ends it).

The conversation is one ``SOCK_SEQPACKET`` socket pair: a request is JSON ``{kind, argv, env}``
(kind ``firmware``, ``core`` or ``relay``) with the new process's stdout (and, for a core or the
relay, stderr) attached (``SCM_RIGHTS``); the reply is
``{"pid": N}`` or ``{"error": why}``. ``VDSP_FW_TEMPLATE=0`` turns templates off (each process is
then a fresh interpreter again).
"""
from __future__ import annotations

import array
import ctypes
import gc
import importlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time

from vdsp_board import settings

log = logging.getLogger("vdsp.core")

_PR_SET_PDEATHSIG, _PR_SET_NAME, _PR_SET_CHILD_SUBREAPER = 1, 15, 36
ADOPT_TIMEOUT_S = 5.0       # a forked firmware waits this long to become the core's child
REPLY_TIMEOUT_S = 60.0      # the template answers a request after its imports (a cold numba cache compiles)
MAX_REQUEST = 1 << 16


def enabled() -> bool:
    return settings.current().fw_template


def soc_enabled() -> bool:
    """The SoC-wide template of ``vdsp up`` (default on; ``VDSP_SOC_TEMPLATE=0`` turns it off)."""
    return enabled() and settings.current().soc_template


def _prctl(option: int, arg) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def set_name(name: str) -> None:
    """The process's name as ``ps``/``top`` show it (``comm``, 15 bytes)."""
    _prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]))


def _die_with(parent: int) -> None:
    """SIGKILL when ``parent`` (our parent now) dies; exit at once if it is already gone."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


# --- the template process --------------------------------------------------------------------

_preloaded = False


def preload(core: str) -> None:
    """What every firmware imports, and the compiled kernels loaded (their init hook's work).
    Once per process (and so not again in a process forked from one that did it: ``vdsp up``
    does it before it forks the SoC's template, so that the supervisor shares these pages too).
    The collector is off meanwhile (what is imported here lives as long as the process)."""
    global _preloaded
    if _preloaded:
        return
    _preloaded = True
    collecting = gc.isenabled()
    gc.disable()
    try:
        _imports(core)
    finally:
        if collecting:
            gc.enable()
    # what importing mapped and this process does not run again (LLVM's constructors touch
    # libllvmlite all over: 111 MB of it resident); a forked process maps only what it runs
    from vdsp_board import filepages
    before = filepages.resident()
    filepages.drop()
    log.info("%s: library pages the imports mapped let go: resident %.0f -> %.0f MB", core, before / 2**20,
             filepages.resident() / 2**20)


def _imports(core: str) -> None:
    t0 = time.perf_counter()
    import numpy  # noqa: F401
    import cv2  # noqa: F401
    import zmq  # noqa: F401
    from dsp_side import core_main, firmware, heap, fw_image  # noqa: F401
    from dsp_side.operators import cv, nn, pointcloud
    del cv, nn
    pointcloud.warm(None)   # numba's cached machine code: 0.5-0.8 s that no firmware boot pays again
    log.info("%s: firmware imports and kernels loaded in %.0f ms (pid %d)", core, (time.perf_counter() - t0) * 1e3,
             os.getpid())


def _serve(sock: socket.socket, core: str, core_pid: int, firmwares: bool = True) -> None:
    """The template's loop: one fork per request, until the core closes its end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # terminal signals are the core's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    set_name(f"{core}.template")
    _die_with(core_pid)
    try:
        preload(core)
    except Exception as exc:    # the firmware imports them again and reports what fails
        log.warning("%s: firmware template could not preload: %s: %s", core, type(exc).__name__, exc)
    if firmwares:
        from dsp_side import heap
        heap.keep_heap()    # the firmwares' working memory stays mapped (inherited by the firmwares)
    gc.collect()
    gc.freeze()     # the imported objects stay out of the collector's way: their pages stay shared
    while True:
        try:
            data, fds = _recv(sock)
        except OSError:
            os._exit(0)
        if not data:                # the core is gone or stopped us
            os._exit(0)
        try:
            req = json.loads(data)
            argv, env, kind = req["argv"], req.get("env"), req["kind"]
            if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv) and kind in _CHILDREN
                    and len(fds) == _CHILDREN[kind] and (env is None or isinstance(env, dict))):
                raise ValueError("a request is {kind, argv, env} and its file descriptors")
            _fork_child(sock, kind, argv, env, fds, core, core_pid)
        except Exception as exc:
            _reply(sock, {"error": f"{type(exc).__name__}: {exc}"})
        finally:
            for fd in fds:
                os.close(fd)


_CHILDREN = {"firmware": 1, "core": 2, "relay": 2}     # kind -> its file descriptors (stdout; stdout and stderr)


def _fork_child(sock: socket.socket, kind: str, argv: list[str], env: dict | None, fds: list[int], core: str,
                core_pid: int) -> None:
    """Fork twice; reply with the pid once the intermediate process is gone, so that the process
    is the requester's child (adopted) by the time the requester reads its pid."""
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:     # the intermediate process: fork the child, tell its pid, exit
        code = 0
        try:
            os.close(r)
            child = os.fork()
            if child == 0:
                os.close(w)
                _child(sock, kind, argv, env, fds, core, core_pid)
            os.write(w, str(child).encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    try:
        with os.fdopen(r, "rb") as fh:
            text = fh.read()
    finally:
        os.waitpid(middle, 0)
    if not text:
        raise OSError("fork failed")
    _reply(sock, {"pid": int(text)})


def _child(sock: socket.socket, kind: str, argv: list[str], env: dict | None, fds: list[int], core: str,
           core_pid: int) -> None:
    """The forked process, once adopted: a firmware (``python -m dsp_side.firmware *argv``) or a
    core (``vdsp *argv`` with environment ``env``, output to ``fds``)."""
    code = 1
    try:
        sock.close()
        deadline = time.monotonic() + ADOPT_TIMEOUT_S
        while os.getppid() != core_pid:     # until the intermediate process has exited
            if time.monotonic() > deadline:
                os._exit(1)
            time.sleep(0.0002)
        _die_with(core_pid)
        for target, fd in zip((1, 2), fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        # gc stays frozen: the template's objects live as long as we do, and a collection visiting
        # them would write to (and so copy) every page they are on
        if kind == "firmware":
            set_name(f"{core}.fw")
            from dsp_side import firmware
            firmware.main(argv, forked=True)    # exits
        elif kind == "relay":
            assert env is not None
            settings.become(env)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            set_name("relay")
            # by name: dsp_side imports no relay_server module (tests/test_layers.py)
            relay = importlib.import_module("relay_server.main")
            code = relay.main(argv)
        else:
            assert env is not None
            settings.become(env)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            set_name(argv[argv.index("--name") + 1] if "--name" in argv[:-1] else "core")
            from dsp_side import core_main
            from protocol import errors
            from vdsp_board import proc
            proc.private_umask()
            try:
                core_main.main(argv)
                code = 0
            except errors.VdspError as exc:
                print(f"vdsp core: {exc}", file=sys.stderr)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        logging.getLogger("vdsp.firmware").exception("%s: forked %s failed", core, kind)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _recv(sock: socket.socket) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    data, anc, flags, _ = sock.recvmsg(MAX_REQUEST, socket.CMSG_SPACE(4 * fds.itemsize))
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        raise ValueError("request too large")
    return data, list(fds)


def _reply(sock: socket.socket, what: dict) -> None:
    sock.send(json.dumps(what).encode())


# --- the core's side -------------------------------------------------------------------------

class Template:
    """The core's handle on its template process."""

    def __init__(self, core: str, *, firmwares: bool = True) -> None:
        """Fork the template now: call while the process is single-threaded. ``firmwares``:
        it forks firmwares (their heap is kept, ``dsp_side.heap``); the SoC's template forks
        cores and the relay, which keep glibc's default heap."""
        self.core = core
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)      # the firmwares it forks become our children
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        me = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                ours.close()
                _serve(theirs, core, me, firmwares)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        theirs.close()
        self.pid, self.sock = pid, ours
        self.sock.settimeout(REPLY_TIMEOUT_S)

    def alive(self) -> bool:
        if self.pid <= 0:
            return False
        try:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            done = self.pid
        if done:
            self.pid = 0
        return not done

    def spawn(self, argv: list[str]) -> ForkedChild:
        """A firmware process running ``python -m dsp_side.firmware *argv`` (forked), its stdout a
        pipe to us. Raises OSError."""
        r, w = os.pipe()
        try:
            pid = self._request({"kind": "firmware", "argv": argv}, [w])
        except OSError:
            os.close(r)
            raise
        finally:
            os.close(w)
        return ForkedChild(pid, os.fdopen(r, "rb", buffering=0))

    def spawn_core(self, argv: list[str], env: dict, out: int | None) -> ForkedChild:
        """A core running ``vdsp core *argv`` with environment ``env``, its
        stdout and stderr to ``out`` (None: ours). Raises OSError."""
        fd = out if out is not None else 2
        return ForkedChild(self._request({"kind": "core", "argv": argv, "env": env}, [1 if out is None else fd, fd]),
                           None)

    def spawn_relay(self, argv: list[str], env: dict, out: int | None) -> ForkedChild:
        """The relay, running ``python -m relay_server.main *argv`` with environment ``env``,
        its stdout and stderr to ``out`` (None: ours): what it imports is here already (ZeroMQ,
        msgpack, the protocol) and shared. Raises OSError."""
        fd = out if out is not None else 2
        return ForkedChild(self._request({"kind": "relay", "argv": argv, "env": env}, [1 if out is None else fd, fd]),
                           None)

    def _request(self, req: dict, fds: list[int]) -> int:
        self.sock.sendmsg([json.dumps(req).encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        try:
            data = self.sock.recv(MAX_REQUEST)
            reply = json.loads(data) if data else {"error": "the template exited"}
        except (OSError, ValueError) as exc:
            raise OSError(f"firmware template: {exc}") from None
        if "pid" not in reply:
            raise OSError(f"firmware template: {reply.get('error', reply)}")
        return int(reply["pid"])

    def close(self) -> None:
        """End the template (closing the socket ends it; SIGKILL if it lingers) and reap it."""
        self.sock.close()
        if self.pid > 0:
            child = ForkedChild(self.pid, None)
            try:
                child.wait(1.0)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            self.pid = 0


class ForkedChild:
    """A child of this process not started by ``subprocess``, with the part of ``Popen``'s
    interface the core uses (pid, stdout, send_signal, kill, poll, wait, returncode)."""

    def __init__(self, pid: int, stdout) -> None:
        self.pid, self.stdout = pid, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:       # reaped elsewhere: its status is lost
                pid, status = self.pid, 255 << 8
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.0005
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:     # never signal a pid this process has reaped (it may be reused)
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def reap_strays(keep: set[int]) -> int:
    """Reap exited children other than ``keep`` (what a firmware's own children leave when they
    are orphaned: a subreaper adopts them). The number reaped."""
    reaped = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as fh:
                pids = [int(p) for p in fh.read().split()]
        except (OSError, ValueError):
            continue
        for pid in pids:
            if pid in keep:
                continue
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            reaped += bool(done)
    return reaped

"""Process hygiene: children that die with their parent, SIGTERM as a clean exit, a title per role."""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import sys
import threading
from typing import Iterator, NoReturn

from vdsp_board.config import settings

PARENT_ENV = "VDSP_PARENT_PID"
_PR_SET_PDEATHSIG, _PR_SET_NAME = 1, 15
TITLE_PREFIX = "vdsp: "


def fast_exit(code: int) -> NoReturn:
    """End this interpreter as a normal exit would for us, without tearing it down.

    A normal exit joins the threads that are not daemons, runs the ``atexit`` handlers (the DDR
    owner's cleanup, logging's flush) and flushes stdout and stderr; then it collects every module
    and object. That last part cost a core that imported numpy, cv2 and numba ~0.3 s of CPU on
    every stop (two cores: 0.6 of the 0.85 s a SoC's stop cost; a test run stops a SoC about a
    hundred times). This does the first three, then ``os._exit``. Only for the entry point of a
    process of our own (a fresh ``vdsp core`` or relay interpreter), once its work is done: in a
    process forked from a template, the handlers are the template owner's, not ours."""
    try:
        me = threading.current_thread()
        for thread in threading.enumerate():
            if thread is not me and not thread.daemon:
                thread.join()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(code)


def die_with_parent() -> None:
    """If started with ``VDSP_PARENT_PID``, get SIGKILL when that parent dies (Linux prctl)."""
    expected = settings.current().parent_pid   # children get their own (child_env)
    if not expected:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if str(os.getppid()) != expected:  # the parent died before prctl took effect
        os._exit(1)


def die_with(parent: int) -> None:
    """SIGKILL when ``parent`` (our parent now) dies; exit at once if it is already gone."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def title(role: str, comm: str | None = None) -> None:
    """Show this process's role in ``ps`` (its command line becomes ``vdsp: ROLE``, as PostgreSQL's
    processes say theirs: ``setproctitle``) and, in ``comm`` (what ``top`` and ``pgrep`` read, 15
    bytes), ``comm`` (default: the role)."""
    import setproctitle
    settings.titles()   # the title in argv's area only: /proc/PID/environ stays readable
    setproctitle.setproctitle(TITLE_PREFIX + role)
    _prctl(_PR_SET_NAME, ctypes.c_char_p((comm or role).encode()[:15]))


def _prctl(option: int, arg) -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def private_umask() -> None:
    """Files and sockets a SoC process creates get no group or world access, whatever the
    umask it was started with (each call site also creates what matters with explicit modes)."""
    os.umask(0o077)


def child_env(env: dict | None = None) -> dict:
    """Environment for a child that must not outlive this process."""
    return settings.child_env(env, **{PARENT_ENV: str(os.getpid())})


_TERMINATED: list[int] = []     # the SIGTERMs exit_on_sigterm's handler took, if any came
_HELD = [0]                     # cleanups under way (``sigterm_held``): a SIGTERM waits for them


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so ``finally`` blocks (cleanup) run. CPython ignores an
    exception a handler raises inside a finalizer or a weakref callback (it prints "Exception
    ignored"), so the SystemExit can be lost and the program run on: ``terminated_status`` says
    what its exit status should then be. Inside ``sigterm_held`` the SystemExit comes at its end."""
    def handler(signum, frame):
        _TERMINATED.append(signum)
        if _HELD[0]:
            return          # raised when the cleanup ends (sigterm_held)
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)


@contextlib.contextmanager
def sigterm_held() -> Iterator[None]:
    """A cleanup that a SIGTERM must not cut short (the main thread's, under ``exit_on_sigterm``):
    its SystemExit raised in the middle would skip the rest, and inside ``subprocess.run`` kill
    the child that does the work (a 'vdsp down' half-way, the SoC left running). A SIGTERM that
    comes meanwhile (a second one: 'timeout' then 'kill') is raised as SystemExit once the
    cleanup ends, unless an exception already leaves it."""
    _HELD[0] += 1
    before = len(_TERMINATED)
    try:
        yield
    finally:
        _HELD[0] -= 1
    if len(_TERMINATED) > before and not _HELD[0]:
        raise SystemExit(128 + _TERMINATED[-1])


def terminated_status(status: int) -> int:
    """``status``, or 128 + SIGTERM where a SIGTERM came (``exit_on_sigterm``) and the program
    still ended normally (its SystemExit lost): a terminated program never says it succeeded."""
    return 128 + _TERMINATED[0] if _TERMINATED and status == 0 else status


def signal_wake_fd() -> int:
    """The read end of a pipe that each signal this process catches makes readable
    (``signal.set_wakeup_fd``; main thread only). A server loop polls it beside its sockets, so a
    SIGTERM whose handler only clears the loop's flag ends the loop at once: the flag alone was
    seen when the poll's timeout ran out (the relay's and a core's 100 ms tick), and a SoC's stop
    (``vdsp down``, each test's SoC) waited that long for each of its processes in turn. Read it
    empty with :func:`drain_wake_fd` when it wakes the poll."""
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    return r


def drain_wake_fd(fd: int) -> None:
    """Read what signals wrote to :func:`signal_wake_fd`'s pipe (their numbers), so it waits again."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass

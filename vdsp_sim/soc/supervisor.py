"""Bringing a local SoC up and down: relay + vdsp0 + vdsp1 as separate processes.

With ``restart=True`` (what ``vdsp up`` uses) the supervisor is a small service manager:
run :meth:`Supervisor.supervise` (or call :meth:`Supervisor.tick` often) and a process that
exits — killed, crashed, or ended by anyone but the supervisor — is started again. The
policy is systemd's ``Restart=always`` with a start limit and a backoff:

- the first exit is restarted at once; while exits keep coming, the next restart waits
  ``BACKOFF_FIRST_S`` (0.5 s), then twice as long each time, at most ``BACKOFF_CAP_S``;
- exits older than ``RESTART_WINDOW_S`` (30 s) are forgotten, so a process that fails
  now and then is always restarted at once;
- the ``RESTART_BURST``-th (5th) exit within the window gives the process up: it is not
  restarted again, the log says so, and so does ``vdsp status`` (state ``gave-up``).

Every process of the SoC is started by the SoC's starter (``vdsp_board.processes.starter``), made first,
before anything reads a key: the starter is their parent and reports each exit over its socket
(the kernel's ``waitpid``); the supervisor reads it there. The keys and stock images a SoC needs
are made by a job of the starter (``vdsp_sim.soc.prepare``), so that the supervisor holds no secret a
starter it makes again (after the first was killed) could pass on.

The supervisor keeps its view in ``<runtime dir>/soc.state.json`` (0600, rewritten
atomically on every change): per process its pid, state, restart count, last exit status
and whether it was given up. ``vdsp status`` shows it; the SDK reads it to wait for a relay
being restarted instead of starting one of its own.
"""
from __future__ import annotations

import collections
import json
import logging
import os
import re
import select
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

from protocol import errors
from protocol.constants import CORE_NAMES
from vdsp_board.config import settings
from vdsp_board.processes import fdwait, proc, rundir
from vdsp_board.processes.pidfile import SUPERVISOR_STATE, PidFile, StateFile, alive
from vdsp_board.processes import procfacts
from vdsp_board.processes.starter import Started, Starter, StarterGone
from vdsp_sim.soc import readiness
from vdsp_sim.soc.readiness import START_TIMEOUT_S

log = logging.getLogger("vdsp.launcher")
RESTART_BURST = 5          # exits within the window that make the supervisor give a process up
RESTART_WINDOW_S = 30.0
BACKOFF_FIRST_S = 0.5      # wait before the second restart in a row; doubles each time
BACKOFF_CAP_S = 10.0
TICK_S = 0.05              # how often a supervisor off the main thread looks at its processes
IDLE_TICK_S = 1.0          # `vdsp up` (woken by SIGCHLD at each exit): at least this often
STALL_S = 60.0             # start-up fails when no process of the SoC used CPU for this long
READY_POLL_S = 0.01        # how often the start-up asks the relay (or the cores) whether every core runs
MAX_PIDS = 256             # processes of the SoC followed during start-up (it has about 10)
CONNECT_S, QUERY_S = 10.0, 5.0     # the start-up client's connect and query timeouts, at most
LOG_TAIL = 64 << 10        # bytes read at the end of a process's log for its last error
PREPARE_TIMEOUT_S = 300.0  # the preparation job (keys, stock images: a build and a signature each)


def _env(rt: Path, base: dict | None = None) -> dict:
    env = settings.child_env(base, VDSP_RUNTIME_DIR=str(rt))
    root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([root, *paths])
    return env


def exit_text(code: int | None) -> str:
    """``exit 1``, ``killed by SIGKILL`` (a Popen returncode), or '' while it runs."""
    if code is None:
        return ""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


class Child:
    """One supervised process and its restart bookkeeping (times are time.monotonic())."""

    def __init__(self, name: str, entry: str, argv: list[str] | None = None) -> None:
        self.name, self.entry, self.argv = name, entry, argv or []
        self.proc: Started | None = None
        self.restarts = 0
        self.last_exit: int | None = None
        self.exits: collections.deque[float] = collections.deque()   # within RESTART_WINDOW_S
        self.restart_at: float | None = None                          # a restart is due then
        self.gave_up = False

    @property
    def state(self) -> str:
        if self.gave_up:
            return "gave-up"
        if self.proc is not None and self.proc.poll() is None:
            return "running"
        return "restarting" if self.restart_at is not None else "stopped"

    def backoff(self) -> float:
        """Seconds to wait before the next restart, given the exits in the window."""
        n = len(self.exits)
        return 0.0 if n <= 1 else min(BACKOFF_FIRST_S * 2 ** (n - 2), BACKOFF_CAP_S)

    def describe(self, now: float) -> dict:
        return {"pid": self.proc.pid if self.proc is not None else None, "state": self.state,
                "restarts": self.restarts, "last_exit": self.last_exit, "last_exit_text": exit_text(self.last_exit),
                "gave_up": self.gave_up, "recent_exits": len(self.exits),
                "restart_in_s": None if self.restart_at is None else round(max(0.0, self.restart_at - now), 2)}


def _ignore(signum, frame) -> None:
    """SIGCHLD's handler while supervising: the signal only has to wake the loop."""


class _Wakeups:
    """A pipe the signals write to (``signal.set_wakeup_fd``), with SIGCHLD caught (the starter's
    own exit), so that a wait on it and the starter's socket ends when a process exits or a signal
    comes in. Main thread only; the previous settings come back on exit."""

    def __enter__(self) -> "_Wakeups":
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)
        self.old_fd = signal.set_wakeup_fd(self.w, warn_on_full_buffer=False)
        self.old_chld = signal.signal(signal.SIGCHLD, _ignore)
        return self

    def wait(self, seconds: float, fds: tuple[int, ...] = ()) -> None:
        poll = select.poll()
        for fd in [self.r, *fds]:
            poll.register(fd, select.POLLIN)
        poll.poll(max(0.0, seconds) * 1000)
        try:
            while os.read(self.r, 512):
                pass
        except BlockingIOError:
            pass

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGCHLD, self.old_chld)
        signal.set_wakeup_fd(self.old_fd)
        os.close(self.r)
        os.close(self.w)


class Supervisor:
    """Starts the processes of one SoC in runtime dir ``rt``, restarts them (``restart=True``,
    driven by :meth:`tick`) and stops them all.

    ``log_dir`` None: children write to our stderr; else one log file each.
    """

    def __init__(self, rt: Path, *, cores: tuple[str, ...] = CORE_NAMES, relay: bool = True,
                 log_dir: Path | None = None, core_args: list[str] | None = None,
                 relay_args: list[str] | None = None, restart: bool = False, templates: bool = False,
                 template_starter: bool = False, shared_starter: Starter | None = None) -> None:
        """``templates`` (``vdsp up``, which imported what they import first): the cores and the
        relay are forked from the SoC's starter, a fork of this process, so what they and their
        firmwares import is in memory once. ``template_starter`` (a private SoC, whose supervisor
        runs in a process with threads that it cannot fork): they are forked from a SoC's starter
        that is a fresh interpreter which imported that first (``python -m vdsp_sim.soc.entries``).
        Neither: each is a fresh interpreter. ``shared_starter`` (with ``template_starter``): such
        a template starter that the caller made and keeps for several SoCs in turn
        (:func:`shared_template_starter`); used while it lives, never closed here."""
        self.rt, self.cores, self.relay, self.log_dir = rt, cores, relay, log_dir
        self.templates, self.template_starter = templates, template_starter
        self.shared_starter = shared_starter if template_starter and not templates else None
        self.starter: Starter | None = None
        self.read_key = False       # our start-up client read a CURVE key (a tcp SoC): see _starter
        self.core_args, self.relay_args = core_args or [], relay_args or []
        self.restart = restart
        self.children: dict[str, Child] = {}
        self.stopping = False
        self.failed: str | None = None      # why the start failed (wait_ready), once it did
        self.state_file = StateFile(rt / SUPERVISOR_STATE) if restart else None

    @property
    def procs(self) -> dict[str, Started]:
        """Name -> the process now running (or last run) under that name."""
        return {n: c.proc for n, c in self.children.items() if c.proc is not None}

    def _starter(self) -> Starter:
        """The SoC's starter; made again if it was killed (its processes died with it). Once our
        start-up client has read a key (the client key of a tcp SoC), a new starter starts fresh
        interpreters: a fork of ours would hand that key to every process of the SoC. (A template
        starter, a fresh interpreter, holds none of ours; it is not made again after a key all the same.)"""
        if self.starter is None or not self.starter.alive():
            if self.starter is not None:
                log.error("the SoC's starter (pid %d) is gone: starting a new one", self.starter.pid)
                if self.starter is not self.shared_starter:
                    self.starter.close()
            fresh_templates = self.template_starter and not self.templates and not self.read_key
            shared = self.shared_starter
            if fresh_templates and shared is not None and shared is not self.starter and shared.alive():
                self.starter = shared
                return shared
            from vdsp_sim.soc.entries import ENTRIES, TEMPLATE_COMMAND
            self.starter = Starter("soc", ENTRIES, templates=(self.templates or fresh_templates) and not self.read_key,
                                   env=_env(self.rt), template_command=TEMPLATE_COMMAND if fresh_templates else None)
        return self.starter

    def _spawn(self, child: Child) -> None:
        out = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{child.name}.log", "ab")
        fd = None if out is None else out.fileno()
        try:
            for attempt in (1, 2):
                try:
                    child.proc = self._starter().start(child.entry, child.argv, env=proc.child_env(_env(self.rt)),
                                                       stdout=fd, stderr=fd)
                    return
                except StarterGone:
                    if attempt == 2:
                        raise
        finally:
            if out is not None:
                out.close()

    def start(self) -> None:
        """Make the SoC's starter (first: nothing has read a key yet), have it prepare the SoC
        (keys, stock images: :mod:`vdsp_sim.soc.prepare`), then start the cores, then the relay.
        Raises ApiUseError if a relay already runs here; what the preparation raised (a VdspError)."""
        if self.relay and PidFile(self.rt / "relay.pid").read() is not None:
            raise errors.ApiUseError(f"a relay already runs for {self.rt} (vdsp down first)")
        self._starter()
        self._prepare()
        for name in self.cores:
            self.children[name] = Child(name, "core", ["--name", name, *self.core_args])
        if self.relay:
            self.children["relay"] = Child("relay", "relay", list(self.relay_args))
        for child in self.children.values():
            if child.proc is None:
                self._spawn(child)
        self._write_state()

    def _prepare(self) -> None:
        """Keys and stock images (``vdsp_sim.soc.prepare``): a job of the starter when its processes are
        forks of it (they must not inherit what the job reads); else here."""
        allow_unsigned = "--allow-unsigned" in self.core_args
        if self.templates:
            doc = self._prepare_job(allow_unsigned)
        else:
            from vdsp_sim.soc import prepare
            doc = prepare.prepare(self.rt, self.cores, self.relay, allow_unsigned)
        for path in doc.get("keys", []):
            log.info("made the CURVE key pair %s (tcp endpoints need keys; see 'vdsp keys')", path)
        for path, why in doc.get("installed", []):
            log.info("installed the stock firmware image as %s (%s)", path,
                     "none was there" if why == "missing" else f"replacing one the cores would refuse: {why}")

    def _prepare_job(self, allow_unsigned: bool) -> dict:
        """The preparation as a job of the starter: what it printed. Raises what it reported."""
        argv = [*(f"--core={c}" for c in self.cores), *([] if self.relay else ["--no-relay"]),
                *(["--allow-unsigned"] if allow_unsigned else [])]
        job = self._starter().start("prepare", argv, env=proc.child_env(_env(self.rt)), pipe_stdout=True)
        assert job.stdout is not None       # pipe_stdout
        deadline = time.monotonic() + PREPARE_TIMEOUT_S
        said = b""
        try:
            while fdwait.readable(job.stdout.fileno(), deadline - time.monotonic()):
                chunk = job.stdout.read(65536)
                if not chunk:
                    break
                said += chunk[:1 << 20]
            else:
                job.kill()
                raise errors.CoreOffline(f"preparing the SoC took over {PREPARE_TIMEOUT_S:.0f} s")
            code = job.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            job.kill()
            raise errors.CoreOffline(f"preparing the SoC took over {PREPARE_TIMEOUT_S:.0f} s") from None
        finally:
            job.stdout.close()
        try:
            doc = json.loads(said.splitlines()[-1]) if said.strip() else {}
        except ValueError:
            doc = {}
        if isinstance(doc.get("error"), dict):
            raise errors.from_wire(doc["error"])
        if code != 0:
            raise errors.CoreOffline(f"preparing the SoC failed ({exit_text(code)})")
        return doc

    # --- supervision ----------------------------------------------------------------------
    def tick(self, now: float | None = None) -> None:
        """Notice exits, restart what is due (``restart=True`` only); call it every TICK_S."""
        if self.starter is not None:     # what it reported: the exits
            self.starter.collect(0)
        if not self.restart or self.stopping:
            return
        now = time.monotonic() if now is None else now
        changed = False
        for child in self.children.values():
            if child.gave_up:
                continue
            if child.restart_at is None and child.proc is not None and child.proc.poll() is not None:
                self._exited(child, now)
                changed = True
            if child.restart_at is not None and now >= child.restart_at:
                child.restart_at = None
                child.restarts += 1
                self._spawn(child)
                assert child.proc is not None
                log.warning("%s restarted (pid %d, restart %d)", child.name, child.proc.pid, child.restarts)
                changed = True
        if changed:
            self._write_state()

    def next_tick_s(self, now: float | None = None) -> float:
        """Seconds until the next tick is due: the next restart's time, at most IDLE_TICK_S."""
        now = time.monotonic() if now is None else now
        due = [c.restart_at - now for c in self.children.values() if c.restart_at is not None]
        return max(0.0, min([IDLE_TICK_S, *due]))

    def supervise(self, stopped: Callable[[], bool]) -> None:
        """:meth:`tick` until ``stopped()``: at once when a child exits or a signal comes in (SIGCHLD,
        SIGTERM... through ``signal.set_wakeup_fd``), when a restart is due, and at least every
        IDLE_TICK_S. An idle SoC's supervisor then sleeps (it woke 20 times a second, 3.5 ms of CPU
        a second). Off the main thread, where Python takes no signals: every TICK_S."""
        if threading.current_thread() is not threading.main_thread():
            while not stopped():
                self.tick()
                time.sleep(TICK_S)
            return
        with _Wakeups() as wake:
            while not stopped():
                self.tick()
                if not stopped():
                    wake.wait(self.next_tick_s(), (self.starter.fileno(),) if self.starter is not None else ())

    def _exited(self, child: Child, now: float) -> None:
        assert child.proc is not None       # only a started child exits
        child.last_exit = child.proc.returncode
        child.exits.append(now)
        while child.exits and now - child.exits[0] > RESTART_WINDOW_S:
            child.exits.popleft()
        how = exit_text(child.last_exit)
        if len(child.exits) >= RESTART_BURST:
            child.gave_up = True
            log.error("%s (pid %d) exited (%s), its %s exit within %.0f s: giving up on %s; it stays down "
                      "(see %s; 'vdsp down' then 'vdsp up' to try again)", child.name, child.proc.pid, how,
                      _ordinal(len(child.exits)), RESTART_WINDOW_S, child.name,
                      self.log_dir / f"{child.name}.log" if self.log_dir else "its log")
            self._clean_endpoints(child)
            return
        delay = child.backoff()
        child.restart_at = now + delay
        log.warning("%s (pid %d) exited (%s); restarting it %s", child.name, child.proc.pid, how,
                    "now" if delay == 0 else f"in {delay:.1f} s ({len(child.exits)} exits within {RESTART_WINDOW_S:.0f} s)")

    def _clean_endpoints(self, child: Child) -> None:
        """Remove the socket files a dead process bound (after SIGKILL it cannot): a stale file
        would make clients believe someone serves there."""
        try:
            if child.name == "relay":
                endpoints = [rundir.relay_endpoint(self.rt)]
            else:
                control = rundir.core_endpoints(self.rt).get(child.name, "")
                endpoints = [control, rundir.fw_endpoint_for(control)] if control else []
        except errors.VdspError:    # no sockets' directory (never made, or gone): no file of ours to remove
            return
        for endpoint in endpoints:
            if not endpoint.startswith("ipc://"):
                continue
            try:
                if stat.S_ISSOCK(os.lstat(endpoint[6:]).st_mode):
                    os.unlink(endpoint[6:])
            except OSError:
                pass

    def _write_state(self) -> None:
        if self.state_file is None:
            return
        now = time.monotonic()
        doc = {"supervisor_pid": os.getpid(), "updated": time.time(),
               "state": "failed" if self.failed else "stopping" if self.stopping else "running",
               **({"reason": self.failed} if self.failed else {}),
               "restart_policy": {"burst": RESTART_BURST, "window_s": RESTART_WINDOW_S,
                                  "first_backoff_s": BACKOFF_FIRST_S, "backoff_cap_s": BACKOFF_CAP_S},
               "processes": {n: c.describe(now) for n, c in self.children.items()}}
        try:
            self.state_file.write(doc)
        except OSError as exc:
            log.warning("cannot write %s: %s", self.state_file.path, exc)

    def gave_up(self) -> list[str]:
        return [n for n, c in self.children.items() if c.gave_up]

    def wait_ready(self, timeout_s: float | None = START_TIMEOUT_S) -> dict:
        """Block until every core serves, as the relay (or each core) reports it
        (:func:`vdsp_sim.soc.readiness.verdict`: in relay mode, each firmware also accepted the relay).

        It ends at once, naming the process and the reason it gave, when waiting cannot help: a
        firmware failed to boot (it could not bind its endpoint, refused its image...) or refused
        the relay's HELLO, the start-up's own HELLO is refused, a process exits (``restart=False``)
        or is given up (``restart=True``), or none of the processes used any CPU for ``STALL_S``
        (hung). Otherwise at ``timeout_s`` (None or 0: no limit), counted as
        :class:`vdsp_sim.soc.readiness.StartClock` counts it: the time the processes spent waiting
        for a CPU on a busy host does not count, up to 3 x ``timeout_s`` in all.

        Raises CoreOffline with the reason (also kept in ``failed``).
        """
        try:
            return self._wait_ready(timeout_s)
        except errors.VdspError as exc:
            self.failed = exc.message
            raise

    def _wait_ready(self, timeout_s: float | None) -> dict:
        from arm_side.soc import Soc  # late: the SDK is a client of what we start
        clock = readiness.StartClock(timeout_s, time.monotonic())
        verdict = readiness.StartVerdict(False, missing="no answer yet")
        cpu, progressed = -1, time.monotonic()
        # relay mode: one connection, asking the relay every READY_POLL_S (made again after an
        # error). Direct mode: a connection each time, as a client's view of a core it could not
        # reach when it connected is not asked again
        soc = None
        try:
            while True:
                pids = self.pids()
                clock.sample(pids)
                now = time.monotonic()
                if clock.expired(now):
                    raise errors.CoreOffline(f"the SoC did not run within {clock.describe(now)}: {verdict.missing}")
                now_cpu = self.cpu_ticks(pids)
                if now_cpu != cpu:
                    cpu, progressed = now_cpu, now
                elif now - progressed > STALL_S:
                    raise errors.CoreOffline(f"SoC not running and none of its processes used CPU for {STALL_S:.0f} s "
                                             f"(hung): {verdict.missing}")
                self.tick()
                if self.restart and self.gave_up():
                    raise errors.CoreOffline(f"gave up on {', '.join(self.gave_up())} during start-up "
                                             f"({RESTART_BURST} exits within {RESTART_WINDOW_S:.0f} s)"
                                             f"{self._last_words(self.gave_up())}")
                dead = self.dead()
                if dead and not self.restart:
                    exited = [n for n, p in self.procs.items() if p.poll() is not None]
                    raise errors.CoreOffline(f"process(es) exited during start-up: {', '.join(dead)}"
                                             f"{self._last_words(exited)}")
                status = None
                try:
                    if soc is None:     # no wait of ours outlasts the start's deadline
                        self.read_key = self.read_key or self._tcp()
                        soc = Soc(mode="relay" if self.relay else "direct", autostart_relay=False,
                                  connect_timeout_s=clock.left(time.monotonic(), CONNECT_S))
                    status = soc.query("cores", timeout_ms=clock.left(time.monotonic(), QUERY_S) * 1000)
                except (errors.ClaimRefused, errors.KeyRefused) as exc:    # no retry makes it prove more
                    server = "the relay" if self.relay else "a core"
                    raise errors.CoreOffline(f"{server} refused the HELLO of the start-up's client: "
                                             f"{exc.message}") from None
                except errors.VdspError as exc:
                    verdict = readiness.StartVerdict(False, missing=f"no answer ({exc.message})")
                    if soc is not None:
                        soc.close()
                        soc = None
                if status is not None:
                    verdict = readiness.verdict(status, self.relay)
                    if verdict.ready:
                        return status
                    if verdict.fatal:
                        raise errors.CoreOffline(verdict.fatal)
                    if not self.relay and soc is not None:
                        soc.close()
                        soc = None
                time.sleep(READY_POLL_S if self.relay else 0.05)
        finally:
            if soc is not None:
                soc.close()

    def _tcp(self) -> bool:
        """Whether our start-up client connects over tcp (and so reads a CURVE key)."""
        try:
            endpoints = [rundir.relay_endpoint(self.rt)] if self.relay else list(rundir.core_endpoints(self.rt).values())
        except errors.VdspError:
            return True
        return any(e.startswith("tcp://") for e in endpoints)

    def _last_words(self, names: list[str]) -> str:
        """The last error each process named logged (``: vdsp0: ERROR LINE``), if it has a log file."""
        said = []
        for name in names:
            line = last_error(self.log_dir / f"{name}.log") if self.log_dir is not None else None
            if line:
                said.append(f"{name}: {line}")
        return ("; its log says " if len(said) == 1 else "; their logs say ") + "; ".join(said) if said else ""

    def pids(self) -> list[int]:
        """Our running processes and their children (cores' firmwares and templates)."""
        pids = [p.pid for p in self.procs.values() if p.poll() is None]
        for pid in pids:
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as fh:
                    pids.extend(int(c) for c in fh.read().split())
            except (OSError, ValueError):
                pass
            if len(pids) > MAX_PIDS:
                break
        return pids

    def cpu_ticks(self, pids: list[int] | None = None) -> int:
        """CPU time used so far by ``pids`` (default: our processes and their children), in clock ticks."""
        total = 0
        for pid in self.pids() if pids is None else pids:
            st = procfacts.stat(pid)
            total += st[1] if st is not None else 0
        return total

    def dead(self) -> list[str]:
        return [f"{n} (exit {p.returncode})" for n, p in self.procs.items() if p.poll() is not None]

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM the relay, then the cores; SIGKILL what is left after ``timeout_s``.
        Nothing is restarted from now on; stale socket files of our processes are removed."""
        self.stopping = True
        self._write_state()
        order = [c for n, c in self.children.items() if n == "relay"] + \
                [c for n, c in self.children.items() if n != "relay"]
        for child in order:
            p = child.proc
            if p is None:
                continue
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in %.0fs; killing it", child.name, timeout_s)
                p.kill()
                p.wait()
        for child in order:       # every one of them has exited: any socket file left is stale
            self._clean_endpoints(child)
        try:    # a long runtime dir's short sockets' directory, once empty (else it is left to 'vdsp down')
            rundir.release_socket_dir(self.rt)
        except (OSError, errors.VdspError) as exc:
            log.warning("cannot remove the sockets' directory of %s: %s", self.rt, exc)
        if self.state_file is not None:
            self.state_file.remove()
        self.children.clear()
        if self.starter is not None and self.starter is not self.shared_starter:
            self.starter.close()
        self.starter = None


# the variables that name one SoC to its processes (vdsp_sim.soc.private_soc's PrivateSoc.env): a child
# gets them with its request (``settings.become``), never from its starter, which reads settings
# when asked, never at import (vdsp_board/config/settings.py)
SOC_NAMING = ("VDSP_RUNTIME_DIR", "VDSP_SHM_DIR", "VDSP_RELAY_ENDPOINT", "VDSP_CORE_ENDPOINTS", "VDSP_RPC_MODE",
              "VDSP_STRICT_CACHE")


def template_starter_env(env: dict | None = None) -> dict:
    """The environment of a SoC's template starter that any SoC may share: that of a
    supervisor's children (``env``: this process's now) without the variables naming a SoC."""
    return {k: v for k, v in _env(Path("/"), env).items() if k not in SOC_NAMING}


def shared_template_starter(env: dict) -> Starter:
    """A template starter (``python -m vdsp_sim.soc.entries``) with environment ``env``
    (:func:`template_starter_env`), for the private SoCs of one process to share in turn
    (``Supervisor(shared_starter=...)``): the imports of the cores and the relay are made once for
    them all, not once per SoC. It holds no key and no SoC's names; its owner closes it."""
    from vdsp_sim.soc.entries import ENTRIES, TEMPLATE_COMMAND
    return Starter("soc", ENTRIES, templates=True, env=env, template_command=TEMPLATE_COMMAND)


_ERROR_LINE = re.compile(r"^(\[E\]|[A-Za-z_][\w.]*(Error|Exception): |vdsp \w+: |dsp_relay_server: )")


def last_error(path: Path) -> str | None:
    """The last error a process logged: its last ``[E]`` line, exception line (a traceback's
    last) or command error (``vdsp core: …``), from the end of its log; None if none."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - LOG_TAIL))
            lines = fh.read(LOG_TAIL).decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if _ERROR_LINE.match(line):
            return line.strip()[:500]
    return None


def _ordinal(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def stop_pid(pid: int, timeout_s: float = 15.0) -> bool:
    """SIGTERM ``pid`` and wait for it; SIGKILL after the timeout. True if it is gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    time.sleep(0.1)
    return not alive(pid)

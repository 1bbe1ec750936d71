"""One way to start a private SoC: relay + vdsp0 + vdsp1 as processes, with a runtime
directory and a DDR directory of their own, stopped and cleaned up at the end.

    from vdsp_sim.soc.private_soc import private_soc

    with private_soc(relay_args=("--credit", "1")) as private:  # fresh directories
        with Soc() as client:                                   # a client of that SoC
            ...

The configuration is explicit (:class:`PrivateSocConfig`). A directory it leaves out is made
fresh — the runtime dir under /tmp (short, for ipc paths), the DDR dir under /dev/shm
(a tmpfs, as the real DDR directory) — and removed at the end; one it names is used and
left in place. So two SoCs on one host never share sockets or DDR files unless asked to.

The SDK, the supervisor and the board layer read where the SoC is from the environment
at call time (``VDSP_RUNTIME_DIR``, ``VDSP_SHM_DIR``, the endpoint overrides): from
:meth:`PrivateSoc.start` to :meth:`PrivateSoc.close` this process's environment holds
:attr:`PrivateSoc.env` (the SoC's processes and any child started meanwhile inherit it),
and the previous values come back at the end. This module is the only place that does so.

:meth:`PrivateSoc.close` stops the relay (also one the SDK started by itself), the cores
and their firmware processes, removes socket files left in the runtime dir and DDR files
of dead owners, and returns what it had to clean up: a leak, for which tests fail
(``tests.live.LiveSoc``) and tools log a warning. DDR files in a DDR directory the
configuration names are only reaped, not reported: others may use that directory meanwhile.

The cores and the relay are forked from a template starter (``python -m vdsp_sim.soc.entries``) made
for the SoC, or, within ``with shared_starter():``, from one kept for the process's private SoCs
in turn (:class:`SharedStarter`: each pytest process of the suite keeps one).

Used by the tests' fixtures (``tests/live.py``, ``tests/conftest.py``), the benchmarks
(``vdsp_sim.benchmarks``) and the samples (``vdsp_sim.samples.common.local_soc``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import secrets
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path
from typing import Mapping

from protocol import errors
from protocol.constants import CORE_NAMES
from vdsp_board.config import settings
from vdsp_board.processes import proc, rundir
from vdsp_board.memory import ddr
from vdsp_board.processes.pidfile import PidFile, alive
from vdsp_sim.soc.readiness import start_timeout_s
from vdsp_sim.soc.supervisor import Supervisor, shared_template_starter, stop_pid, template_starter_env
from vdsp_board.processes.starter import Starter

log = logging.getLogger("vdsp.launcher")

DDR_PARENT = "/dev/shm"     # where fresh DDR directories go (when it exists; else the temp dir)
EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
PORT_FLOOR = 10000          # free_tcp_ports picks at or above (below it: well-known services' ports)
MIN_PORTS_OUTSIDE = 1000    # else it lets the kernel pick (inside its ephemeral range)
GONE_WAIT_S = 10.0          # how long close() waits for firmware processes and DDR files to go
RELAY_STOP_S = 5.0          # for a relay the SDK started by itself


def _outside_ephemeral() -> list[range]:
    """The ports the kernel never hands out by itself (to a connect() or a bind to port 0), above
    PORT_FLOOR: below and above its ephemeral range (``ip_local_port_range``; Linux's default if
    unreadable)."""
    try:
        low, high = (int(x) for x in Path(EPHEMERAL_RANGE).read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    spans = [range(PORT_FLOOR, low - 1), range(max(PORT_FLOOR, high + 1), 65535)]   # each with its next port
    return [span for span in spans if len(span) > 0]


def _candidate(spans: list[range]) -> int:
    """A random port of ``spans``, or 0 (the kernel picks one) where they hold too few."""
    total = sum(len(span) for span in spans)
    if total < MIN_PORTS_OUTSIDE:
        return 0
    pick = secrets.randbelow(total)     # not the random module's state, which a test may have seeded alike in each worker
    for span in spans:
        if pick < len(span):
            return span[pick]
        pick -= len(span)
    return 0


def free_tcp_ports(n: int, *, with_next: bool = False) -> list[int]:
    """``n`` distinct loopback tcp ports that were free a moment ago (for a tcp SoC of one's own).
    ``with_next``: each one's next port was free too, and is none of the others: a core's firmware
    binds there by default (``rundir.fw_endpoint_for``). They are picked outside the kernel's
    ephemeral range where it leaves room: a port of that range may be handed to any process's
    outgoing connection between this pick and the bind of the process it is for (a `vdsp up` of
    the suite failed so, beside tests connecting over tcp)."""
    spans = _outside_ephemeral()
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        for _ in range(1000 * n):
            if len(ports) == n:
                break
            sock = socket.socket()
            socks.append(sock)
            try:
                sock.bind(("127.0.0.1", _candidate(spans)))
            except OSError:     # in use
                continue
            port = sock.getsockname()[1]       # not one of ports, nor a next one: those are held
            if with_next:
                after = socket.socket()
                socks.append(after)
                try:
                    after.bind(("127.0.0.1", port + 1))     # held until we return: no other pick takes it
                except (OSError, OverflowError):      # in use; or the port was 65535
                    continue
            ports.append(port)
        if len(ports) < n:
            raise OSError(f"no {n} free loopback tcp ports{' with their next ones' if with_next else ''}")
        return ports
    finally:
        for sock in socks:
            sock.close()


@dataclasses.dataclass(frozen=True)
class PrivateSocConfig:
    """What a private SoC is. A directory left None is made fresh and removed at the end."""

    runtime_dir: Path | None = None
    ddr_dir: Path | None = None
    relay: bool = True                      # False: the cores only (as after a board boots)
    relay_args: tuple[str, ...] = ()        # more arguments of `vdsp relay`, e.g. ("--credit", "1")
    core_args: tuple[str, ...] = ()         # more arguments of each `vdsp core`
    cores: tuple[str, ...] = CORE_NAMES
    mode: str | None = None                 # VDSP_RPC_MODE of clients; None: the SDK's default (relay)
    relay_endpoint: str | None = None       # None: an ipc socket in the runtime dir
    core_endpoints: Mapping[str, str] | None = None   # core name -> control endpoint; None: ipc
    strict_cache: bool | None = False       # VDSP_STRICT_CACHE of clients; None: the environment's
    env: Mapping[str, str | None] = dataclasses.field(default_factory=dict)   # more variables (None: unset)
    log_dir: Path | None = None             # one log file per process; None: <runtime dir>/log
    # the cores and the relay forked from a SoC's starter that imported what they import once
    # (Supervisor template_starter), unless VDSP_SOC_TEMPLATE=0 or VDSP_FW_TEMPLATE=0 (in ``env``
    # or the environment) ask for fresh interpreters; False: fresh interpreters
    templates: bool = True
    # the start timeout (Supervisor.wait_ready), VDSP_START_TIMEOUT's by default; None: no limit
    ready_timeout_s: float | None = dataclasses.field(default_factory=start_timeout_s)


class SharedStarter:
    """One template starter kept for the private SoCs this process starts in turn (a test run's
    worker starts ~40): each SoC's cores and relay are forked from it, so its imports (~0.6 s of
    CPU) are made once, not once per SoC. It serves a SoC whose template starter would have this
    environment (the variables naming a SoC aside: each child gets those with its request);
    any other SoC makes a starter of its own, as without it. Made at the first such SoC, made
    again if it died; :meth:`close` ends it (and anything it still runs)."""

    # OpenCV's import adds its library directory to this process's LD_LIBRARY_PATH (os.environ
    # only: what is loaded stays), and the starter imports OpenCV too: that variable is no difference
    IMPORTS_SET = ("LD_LIBRARY_PATH",)

    def __init__(self, ignore: tuple[str, ...] = ()) -> None:
        """``ignore``: more variables that may differ (set by the caller's framework, read by no SoC)."""
        self.env = template_starter_env()       # this process's environment now, less a SoC's names
        self.ignore = self.IMPORTS_SET + tuple(ignore)
        self.starter: Starter | None = None
        self.pid = os.getpid()                  # a forked child makes its own

    def _key(self, env: dict) -> dict:
        return {k: v for k, v in env.items() if k not in self.ignore}

    def get(self) -> Starter | None:
        """The starter for a SoC about to start with this process's environment, or None."""
        if os.getpid() != self.pid or self._key(template_starter_env()) != self._key(self.env):
            return None
        if self.starter is None or not self.starter.alive():
            if self.starter is not None:
                self.starter.close()
            self.starter = shared_template_starter(self.env)
        return self.starter

    def close(self) -> None:
        if self.starter is not None and os.getpid() == self.pid:
            self.starter.close()
        self.starter = None


_shared: SharedStarter | None = None


@contextlib.contextmanager
def shared_starter(ignore: tuple[str, ...] = ()):
    """``with shared_starter():`` — the private SoCs started meanwhile in this process share one
    template starter (:class:`SharedStarter`; ``ignore`` as there), ended when the block ends.
    (The test suite's sessions do this: tests/conftest.py.)"""
    global _shared
    previous, _shared = _shared, SharedStarter(ignore)
    try:
        yield _shared
    finally:
        _shared.close()
        _shared = previous


def fresh_runtime_dir(prefix: str = "vt") -> Path:
    """A new private (0700) runtime directory under /tmp, short enough for ipc socket paths."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def fresh_ddr_dir(prefix: str = "vt-ddr-") -> Path:
    """A new private (0700) DDR directory under /dev/shm. Its name does not start with
    ``vdsp-``: it is no DDR file of /dev/shm itself."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=DDR_PARENT if os.path.isdir(DDR_PARENT) else None))


def ddr_names(directory: Path) -> set[str]:
    """The DDR files (owner locks, segments, access lists) in ``directory``."""
    try:
        return {n for n in os.listdir(directory) if n.startswith("vdsp-")}
    except FileNotFoundError:
        return set()


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux /proc; [] if it is gone)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


class PrivateSoc:
    """The processes of one SoC started from ``config``; a context manager (start, close).

    ``rt`` and ``ddr_dir`` are its directories, ``sup`` its :class:`Supervisor`, ``status``
    the cores' status once ready.
    """

    def __init__(self, config: PrivateSocConfig | None = None) -> None:
        self.config = config or PrivateSocConfig()
        self.rt: Path | None = self.config.runtime_dir
        self.ddr_dir: Path | None = self.config.ddr_dir
        self.sup: Supervisor | None = None
        self.status: dict = {}
        self._made: list[Path] = []                     # directories we made: removed by close()
        self._saved_env: dict[str, str | None] | None = None
        self._started = False                           # one start per PrivateSoc

    # --- the environment that names this SoC ---------------------------------------------
    @property
    def env(self) -> dict[str, str | None]:
        """The variables that name this SoC to its processes and clients (None: unset)."""
        c = self.config
        env = {"VDSP_RUNTIME_DIR": str(self.rt), "VDSP_SHM_DIR": str(self.ddr_dir),
               "VDSP_RELAY_ENDPOINT": c.relay_endpoint,
               "VDSP_CORE_ENDPOINTS": ",".join(f"{n}={e}" for n, e in c.core_endpoints.items())
               if c.core_endpoints else None,
               "VDSP_RPC_MODE": c.mode}
        if c.strict_cache is not None:
            env["VDSP_STRICT_CACHE"] = "1" if c.strict_cache else None
        env.update(c.env)
        return env

    def _export(self) -> None:
        env = self.env
        self._saved_env = settings.export(env)

    def _restore(self) -> None:
        if self._saved_env is not None:
            settings.export(self._saved_env)
            self._saved_env = None

    # --- start and stop ----------------------------------------------------------------------
    def start(self, wait: bool = True) -> dict:
        """Make the missing directories, start the processes and (``wait``) wait until every
        core runs. Returns the cores' status ({} without ``wait``). Raises CoreOffline if
        they do not run (within ``ready_timeout_s``, if set) or a process exits or hangs; ApiUseError if a
        relay already runs in the runtime dir or this SoC was started before. On an error
        everything started is stopped again."""
        if self._started:
            raise errors.ApiUseError("this private SoC was already started (make a new one)")
        self._started = True
        try:
            if self.rt is None:
                self.rt = fresh_runtime_dir()
                self._made.append(self.rt)
            if self.ddr_dir is None:
                self.ddr_dir = fresh_ddr_dir()
                self._made.append(self.ddr_dir)
            self._export()
            c = self.config
            now = settings.current()        # with this SoC's environment exported
            templates = c.templates and now.soc_template and now.fw_template
            self.sup = Supervisor(self.rt, cores=c.cores, relay=c.relay, log_dir=c.log_dir or self.rt / "log",
                                  core_args=list(c.core_args), relay_args=list(c.relay_args),
                                  template_starter=templates,
                                  shared_starter=_shared.get() if templates and _shared is not None else None)
            self.sup.start()
            if wait:
                self.status = self.sup.wait_ready(c.ready_timeout_s)
        except BaseException:
            self.close()
            raise
        return self.status

    def close(self) -> list[str]:
        """Stop every process of the SoC and clean up after it; restore the environment;
        remove the directories made for it. Returns the leaks it found and cleaned up
        (processes that outlived their core, socket files, DDR files): [] when clean."""
        problems: list[str] = []
        with proc.sigterm_held():       # a SIGTERM (a benchmark's exit_on_sigterm) comes after it, not in its middle
            try:
                if self.sup is not None:
                    problems += self._stop_processes()
                    problems += self._remove_sockets()
                    problems += self._reap_ddr()
            finally:
                if self.ddr_dir is not None and self.ddr_dir in self._made:
                    ddr.close_owner(str(self.ddr_dir))
                self._restore()
                for directory in self._made:
                    shutil.rmtree(directory, ignore_errors=True)
                self._made.clear()
        return problems

    def __enter__(self) -> "PrivateSoc":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        for problem in self.close():
            log.warning("private SoC in %s: %s", self.rt, problem)

    def _stop_processes(self) -> list[str]:
        sup = self.sup
        assert sup is not None      # called for a started SoC only
        firmware = [pid for name in self.config.cores if name in sup.procs
                    for pid in children(sup.procs[name].pid)]
        ours = {p.pid for p in sup.procs.values()}
        extra_relay = self.relay_pid()                  # a relay the SDK started during the run
        sup.stop()
        self.sup = None
        if extra_relay is not None and extra_relay not in ours:
            stop_pid(extra_relay, RELAY_STOP_S)
        problems = []
        deadline = time.monotonic() + GONE_WAIT_S
        for pid in firmware:
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if alive(pid):
                problems.append(f"firmware process {pid} still running")
                os.kill(pid, signal.SIGKILL)
        return problems

    def _remove_sockets(self) -> list[str]:
        """Socket files left in the runtime dir (or the short directory of a long one's sockets,
        removed then with its link)."""
        assert self.rt is not None
        places = [self.rt]
        try:
            where = rundir.socket_dir(self.rt)
            places += [where] if where != self.rt else []
        except errors.VdspError:        # none made, or already removed
            pass
        problems = []
        for place in places:
            sockets = sorted(place.glob("*.sock"))
            for path in sockets:
                path.unlink(missing_ok=True)
            problems += [f"socket files left in {place}: {[p.name for p in sockets]}"] if sockets else []
        try:
            if not rundir.release_socket_dir(self.rt):
                problems.append(f"the sockets' directory of {self.rt} is not empty")
        except (OSError, errors.VdspError) as exc:
            problems.append(f"cannot remove the sockets' directory of {self.rt}: {exc}")
        return problems

    def _reap_ddr(self) -> list[str]:
        """DDR files of anyone but this process that stay once their owners are gone (waits
        up to GONE_WAIT_S for them to go). In a DDR directory the configuration names, which
        others may use meanwhile, the files of dead owners are only reaped, never reported."""
        if self.ddr_dir not in self._made:
            ddr.reap(str(self.ddr_dir))
            return []
        own = ddr.open_owner(str(self.ddr_dir))
        mine = f"vdsp-{own.id:06x}" if own is not None else None
        deadline = time.monotonic() + GONE_WAIT_S
        while True:
            ddr.reap(str(self.ddr_dir))
            leaked = {n for n in ddr_names(self.ddr_dir) if not (mine and n.startswith(mine))}
            if not leaked or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        return [f"DDR files leaked in {self.ddr_dir}: {sorted(leaked)}"] if leaked else []

    # --- what tests and tools look at ---------------------------------------------------------
    def pid(self, name: str) -> int:
        """pid of relay / vdsp0 / vdsp1 (the process this SoC started)."""
        assert self.sup is not None, "the SoC is not started"
        return self.sup.procs[name].pid

    def relay_pid(self) -> int | None:
        """The relay now serving (it may have been started by the SDK)."""
        assert self.rt is not None, "the SoC is not started"
        return PidFile(self.rt / "relay.pid").read()

    def log(self, name: str) -> str:
        """The log of process ``name`` so far ('' if it has none)."""
        assert self.rt is not None, "the SoC is not started"
        path = (self.config.log_dir or self.rt / "log") / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def private_soc(config: PrivateSocConfig | None = None, **fields) -> PrivateSoc:
    """``with private_soc(...) as private:`` — a SoC of its own for the block. ``fields`` are
    :class:`PrivateSocConfig` fields (replacing those of ``config``)."""
    config = config or PrivateSocConfig()
    return PrivateSoc(dataclasses.replace(config, **fields) if fields else config)


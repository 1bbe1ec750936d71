"""Every ``VDSP_*`` environment variable, declared once: name, type, default, meaning and the
processes that read it.

This is the one module that reads them (``tests/board/test_settings.py`` greps the others). Values
are read when a process asks, not frozen at import: tests set variables per test and spawn
children with their own environments. ::

    from vdsp_board.config import settings
    rt = settings.current().runtime_dir        # Path | None, read now

Each attribute of :class:`Settings` parses its variable when it is read, so a malformed value
of one variable fails only the code that uses it. An empty value counts as unset.

Children get their environment as an explicit ``env=`` dict (:func:`child_env`); nothing here
or elsewhere assigns ``os.environ``, except :func:`export`, the one writer, which a
:class:`vdsp_sim.soc.private_soc.PrivateSoc` uses to name its SoC to the clients of its own process.
The table of variables in docs/commands.md is :func:`markdown_table` (``python -m vdsp_board.config.settings``
prints it; a test compares the two).
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")

# who reads a variable: the processes of a SoC and of its users
CLIENT = "client"               # a process using the SDK (arm_side), the samples, benchmarks and tools
RELAY = "relay"
CORE = "core"                   # a core process (remoteproc device) and the firmware process it runs
CLI = "vdsp"                    # the vdsp command line and its supervisor
ALL = (CLIENT, RELAY, CORE, CLI)


def _flag(text: str) -> bool:
    return text.strip().lower() not in ("", "0", "false", "no", "off")


def _yes(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes")


@dataclasses.dataclass(frozen=True)
class Variable(Generic[T]):
    """One variable: ``parse`` turns a set, non-empty value into ``T``; ``unset`` is the value
    when it is unset or empty (the default that applies may depend on other settings: ``default``
    says it in words)."""
    name: str
    kind: str                   # what a user writes, in words: "path", "integer", "relay or direct" ...
    default: str                # in words, as docs/commands.md shows it
    doc: str
    readers: tuple[str, ...]
    parse: Callable[[str], T]
    unset: T
    internal: bool = False      # set by the SoC's own processes, not by users

    @overload
    def __get__(self, obj: None, owner: type) -> "Variable[T]": ...
    @overload
    def __get__(self, obj: "Settings", owner: type) -> T: ...

    def __get__(self, obj: "Settings | None", owner: type) -> "T | Variable[T]":
        if obj is None:
            return self
        text = obj.raw(self.name)
        return self.unset if text is None else self.parse(text)


def _str(text: str) -> str:
    return text


def _ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        from protocol import errors
        raise errors.InvalidArgument(f"VDSP_TASK_WAIT_MS={text!r}: expected milliseconds, 0 or more")
    return value


PROOFS = ("peer-pidfd", "pidfd", "start-time")     # VDSP_IDENTITY_PROOF's values, strongest first


def _proof(text: str) -> str:
    value = text.strip().lower()
    if value not in PROOFS:
        from protocol import errors
        raise errors.InvalidArgument(f"VDSP_IDENTITY_PROOF={text!r}: expected one of {', '.join(PROOFS)}")
    return value


class Settings:
    """The ``VDSP_*`` variables of one environment (``os.environ`` by default), each read when
    its attribute is."""

    runtime_dir = Variable[Path | None](
        "VDSP_RUNTIME_DIR", "path", "`$XDG_RUNTIME_DIR/vdsp`, else `/tmp/vdsp-$UID`",
        "sockets, pid files, logs, dmesg of one SoC (any length: one longer than 90 characters keeps its sockets "
        "in a short private directory, `/tmp/vdsp-sock-XXXXXXXX`, that its `sockets` link names)", ALL, Path, None)
    shm_dir = Variable[str](
        "VDSP_SHM_DIR", "path", "`/dev/shm`", "the directory of the DDR files (a tmpfs every process of the SoC sees)",
        ALL, _str, "/dev/shm")
    rpc_mode = Variable[str](
        "VDSP_RPC_MODE", "`relay` or `direct`", "`relay`", "how a client reaches the cores", (CLIENT,), _str, "relay")
    relay_endpoint = Variable[str | None](
        "VDSP_RELAY_ENDPOINT", "ZeroMQ endpoint", "`ipc://$VDSP_RUNTIME_DIR/relay.sock`",
        "e.g. `tcp://relay:6000` instead of the ipc socket", (CLIENT, RELAY, CLI), _str, None)
    core_endpoints = Variable[str | None](
        "VDSP_CORE_ENDPOINTS", "`name=endpoint,...`", "`ipc://$VDSP_RUNTIME_DIR/vdsp0.sock`, `vdsp1.sock`",
        "e.g. `vdsp0=tcp://vdsp0:6100,vdsp1=tcp://vdsp1:6100`", (CLIENT, RELAY, CORE, CLI), _str, None)
    strict_cache = Variable[bool](
        "VDSP_STRICT_CACHE", "`1`, `true` or `yes`", "off", "report missing cache flushes by name", (CLIENT,),
        _yes, False)
    strict_dma = Variable[bool](
        "VDSP_STRICT_DMA", "`1`, `true` or `yes`", "off", "a C kernel that touches the TCM destination of an IDMA "
        "transfer before its wait fails the task with `HB_DSP_DMA_NOT_WAITED` (-6000273) naming the buffer "
        "(off: it reads the stale bytes, as on the board); one that writes to an input fails it with "
        "`HB_DSP_KERNEL_MEMORY_FAULT` (-6000274)", (CORE,), _yes, False)
    kernel_level = Variable[str | None](
        "VDSP_KERNEL_LEVEL", "`x86-64`, `x86-64-v3` or `x86-64-v4`", "the widest the CPU runs",
        "which x86-64 level's build of the C kernels a core loads (an image carries one per level, the same bytes "
        "and board time from each: only the host's speed differs; docs/dsp_kernels.md)", (CORE, CLIENT), _str, None)
    kernel_guard = Variable[bool](
        "VDSP_KERNEL_GUARD", "`0`, `false` or `no` to turn off", "on", "guard pages: a C kernel that touches TCM "
        "outside its allocations or the page past a buffer fails the task with `HB_DSP_KERNEL_MEMORY_FAULT` "
        "(-6000274) naming the buffer (docs/dsp_kernels.md)", (CORE,), _yes, True)
    ddr_quota = Variable[str | None](
        "VDSP_DDR_QUOTA", "bytes (`256M`, `2G`) or a share (`50%`)", "`25%`",
        "DDR one process (owner) may hold, in bytes or as a share of the DDR file system. Past it, `alloc` "
        "raises `SysOutOfMemory` (-6000130) and other clients keep allocating", (CLIENT, RELAY, CORE), _str, None)
    ddr_reserve = Variable[str | None](
        "VDSP_DDR_RESERVE", "bytes (`256M`, `2G`) or a share (`50%`)", "`25%`",
        "DDR kept free for the next client. An allocation must leave it free or, once less is free, may bring "
        "its owner to at most half of what it holds plus what is free (checked under a lock of the user's own in "
        "the DDR directory, waited for at most 1 s): clients allocating until refused always leave the next "
        "one a share. `SysOutOfMemory` past it", (CLIENT,), _str, None)
    firmware_dir = Variable[Path | None](
        "VDSP_FIRMWARE_DIR", "path", "`$VDSP_RUNTIME_DIR/firmware`", "the default firmware directory",
        (CORE, CLI), Path, None)
    start_timeout = Variable[float | None](
        "VDSP_START_TIMEOUT", "seconds", "60",
        "how long `vdsp up` (its `--timeout`) and a private SoC wait for the SoC to serve before they stop it and "
        "fail; time spent waiting for a CPU does not count, up to 3 times this in all. Raise it on a slow host "
        "(an emulated CPU, a starved CI runner); 0: no limit", (CLI, CLIENT), float, None)
    task_wait_ms = Variable[float | None](
        "VDSP_TASK_WAIT_MS", "milliseconds", "10000",
        "how long `Soc.call`, `Soc.batch` (and their `AsyncSoc` forms) and the cv functions (so the CV sample) wait "
        "for a task when the caller names no timeout, before `HB_DNN_TIMEOUT` (the task stays in flight). Raise "
        "it on a slow host (an emulated CPU runs an operator 100 times slower); 0: no limit", (CLIENT,), _ms, None)
    fw_heap_mb = Variable[float | None](
        "VDSP_FW_HEAP_MB", "MiB", "0",
        "working memory each firmware touches at boot so that first tasks do not page-fault (off by default: "
        "the memory would be private to each firmware; a large first task pays its page faults once, ~30 ms "
        "for a 1920x1080 cornerHarris)", (CORE,), float, None)
    fw_template = Variable[bool](
        "VDSP_FW_TEMPLATE", "`0` to turn off", "on",
        "a firmware is forked from its core's starter that has imported numpy, cv2 and the operators "
        "once (a boot or recovery is a fork plus the image's checks, ~0.1 s; `vdsp_board/processes/starter.py`); `0` "
        "starts each firmware as a fresh interpreter", (CORE,), _flag, True)
    soc_template = Variable[bool](
        "VDSP_SOC_TEMPLATE", "`0` to turn off", "on",
        "`vdsp up` (and a private SoC's starter: tests, benchmarks, samples) imports numpy, cv2 and the "
        "operators once, then forks the cores and the relay from the SoC's starter (`vdsp: soc starter`), so they "
        "are in memory once per SoC (an idle SoC ~155 MB PSS instead of ~345); `0` starts each core and the relay "
        "as a fresh interpreter", (CLI, CORE), _flag, True)
    native = Variable[bool](
        "VDSP_NATIVE", "`0` to turn off", "on",
        "the compiled build of the hot modules (mypyc, `vdsp_board/sockets/zio.c` and `arm_side/taskpath.c` with "
        "`arm_side/capi/native/vdsp_wire.c`; "
        "`scripts/venv.sh` builds and installs it into the venv where a C compiler is found) runs while their "
        "sources are the ones compiled; `0` runs the pure Python modules. Read by the build's import hook "
        "(`vdsp_sim/native_finder.py`), which runs before any package loads", ALL, _flag, True)
    busy_poll_us = Variable[int](
        "VDSP_BUSY_POLL_US", "µs", "0",
        "accepted and ignored (it made a waiting thread spin before it slept): a waiting thread sleeps on "
        "the links and reads its own reply, and a thread spinning would hold the GIL another thread needs",
        (CLIENT,), int, 0)
    log_level = Variable[str](
        "VDSP_LOG_LEVEL", "name or number", "`info`",
        "`debug`, `info`, `warning`, `error`, or the DSP logger's number (its `Init logger, level:3`): "
        "0 always-lines only, 1 error, 2 warning, 3 info, 4 debug; not a Python level", ALL, _str, "")
    model_dir = Variable[Path | None](
        "VDSP_MODEL_DIR", "path", "`vdsp_sim/models/`", "where the seeded sample models are built", (CLIENT,),
        Path, None)
    keys_dir = Variable[Path | None](
        "VDSP_KEYS_DIR", "path", "`$VDSP_RUNTIME_DIR/keys`",
        "the CURVE key directory (server pair, allowed client and admin keys) and the firmware signing keys",
        ALL, Path, None)
    server_key = Variable[Path | None](
        "VDSP_SERVER_KEY", "path", "`server.key` of the key directory", "the SoC's public CURVE key, for clients",
        (CLIENT, CLI), Path, None)
    client_key = Variable[Path | None](
        "VDSP_CLIENT_KEY", "path", "`client.key_secret` of the key directory",
        "this client's CURVE key pair (a `.key_secret` file)", (CLIENT, CLI), Path, None)
    trace_dir = Variable[Path | None](
        "VDSP_TRACE_DIR", "path", "`$VDSP_RUNTIME_DIR/trace`", "the tracing flag and the trace sessions", ALL,
        Path, None)
    no_numba = Variable[bool](
        "VDSP_NO_NUMBA", "`1`", "off", "run the plain numpy code instead of numba's compiled kernels",
        (CLIENT, CORE), _flag, False)
    metrics_port = Variable[int](
        "VDSP_METRICS_PORT", "port", "0 (off)", "the relay's Prometheus endpoint (`--metrics-port`)", (RELAY,),
        int, 0)
    metrics_addr = Variable[str](
        "VDSP_METRICS_ADDR", "address", "`127.0.0.1`", "the address of the relay's metrics endpoint", (RELAY,),
        _str, "127.0.0.1")
    profile_relay = Variable[str | None](
        "VDSP_PROFILE_RELAY", "path", "unset", "developer aid: the relay writes cProfile stats of its loop there",
        (RELAY,), _str, None)
    identity_proof = Variable[str | None](
        "VDSP_IDENTITY_PROOF", "`peer-pidfd`, `pidfd` or `start-time`", "the strongest this kernel offers",
        "how a server proves which process opened an ipc connection (PROTOCOL.md §5.2), at most this one: "
        "`pidfd` behaves as on Linux 5.3-6.4 (no `SO_PEERPIDFD`), `start-time` as before 5.3 (no pidfd at all). "
        "For tests and for hosts whose kernel misreports; `vdsp status` says which proof the SoC uses",
        (RELAY, CORE, CLI), _proof, None)
    parent_pid = Variable[str | None](
        "VDSP_PARENT_PID", "pid", "unset", "set by a SoC process for a child that must die with it", (RELAY, CORE),
        _str, None, internal=True)

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._env = os.environ if environ is None else environ    # read per attribute: one lookup each

    def raw(self, name: str) -> str | None:
        """The text of ``name`` (a declared variable), or None when unset or empty."""
        if name not in VARIABLES:
            raise KeyError(f"{name} is not a declared setting (vdsp_board/config/settings.py)")
        return self._env.get(name) or None


VARIABLES: dict[str, Variable[Any]] = {v.name: v for v in vars(Settings).values() if isinstance(v, Variable)}


def current() -> Settings:
    """The variables as they are now."""
    return Settings()


def child_env(base: Mapping[str, str] | None = None, **changes: str | None) -> dict[str, str]:
    """An environment for a child process: ``base`` (this process's by default) with ``changes``
    (None removes a variable). ``VDSP_PARENT_PID`` is not passed on unless given: it names this
    process's parent. Nothing is written to ``os.environ``."""
    env = dict(os.environ if base is None else base)
    env.pop(Settings.parent_pid.name, None)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def without_vdsp(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (this process's environment by default) without any declared ``VDSP_*`` variable."""
    return {k: v for k, v in (os.environ if base is None else base).items() if k not in VARIABLES}


def export(values: Mapping[str, str | None]) -> dict[str, str | None]:
    """Set (None: unset) variables in this process's environment and return their
    previous values, for :func:`export` to restore. The one writer of ``os.environ``: a private
    SoC names itself to the clients of its own process and the children they start this way."""
    previous: dict[str, str | None] = {}
    for name, value in values.items():
        previous[name] = os.environ.get(name)
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return previous


def titles() -> None:
    """Set up ``setproctitle`` (once per process) so that a process title leaves
    ``/proc/PID/environ`` as it was: its ``SPT_NOENV`` gives the title the argv area only, where
    by default it would also take (and blank) the environment's, and whoever finds a SoC's
    processes by their environment (``VDSP_RUNTIME_DIR``) would find none. Called before the
    first title (``vdsp_board.processes.proc.title``) and by :func:`become`."""
    try:
        import setproctitle
    except ImportError:
        return
    os.environ.setdefault("SPT_NOENV", "1")     # read by setproctitle's set-up, which runs now
    setproctitle.setproctitle(setproctitle.getproctitle())


def become(env: Mapping[str, str]) -> None:
    """Replace this process's whole environment with ``env``: a process forked to stand in for an
    exec'd child (a core forked from the SoC's starter, ``vdsp_board.processes.starter``) takes the
    environment the exec would have given it. The other writer of ``os.environ``, with :func:`export`."""
    titles()    # setproctitle finds argv through environ: it must start before environ is replaced
    os.environ.clear()
    os.environ.update(env)


def markdown_table(variables: Iterable[Variable[Any]] | None = None) -> str:
    """The table of variables of docs/commands.md."""
    rows = ["| variable | read by | default | meaning |", "|---|---|---|---|"]
    for v in variables if variables is not None else VARIABLES.values():
        doc = v.doc + (" (internal: not for users)" if v.internal else "")
        readers = "all" if set(v.readers) == set(ALL) else ", ".join(v.readers)
        rows.append(f"| `{v.name}` ({v.kind}) | {readers} | {v.default} | {doc} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")

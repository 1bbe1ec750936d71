"""Shared fixtures. Live fixtures start a real SoC (relay + vdsp0 + vdsp1 processes) with
private runtime and DDR directories (vdsp_sim.soc.private_soc) and, on teardown, fail the test
if any of its processes, socket files or DDR files are left behind.

The suite runs in parallel (``./test.sh``: pytest-xdist, ``--dist loadfile``). What keeps
the workers apart:

- every pytest process (each worker, or a serial run) gets a runtime and a DDR directory of
  its own as the default ``VDSP_RUNTIME_DIR`` / ``VDSP_SHM_DIR`` for the whole session, so a
  test or a tool that names none never touches ``/tmp/vdsp-<uid>`` or ``/dev/shm`` itself;
  SoC fixtures make fresh ones on top of that;
- the tests of a module go to one worker together (``--dist loadfile``), so a module-scoped
  SoC (``shared_soc`` and the like) starts once, not once per worker. (``--dist loadgroup``
  with ``xdist_group`` marks would allow finer groups, but pytest-xdist 3.8 ignores those
  marks on pytest >= 9.2: pytest-dev/pytest-xdist#1386);
- a test marked ``exclusive`` (it loads the whole host, or measures time) runs with no other
  test of the run beside it: each test holds a run-wide lock shared, an exclusive test holds
  it alone (:class:`RunLock`), and the modules with such tests go first, before the other
  workers have SoCs of their own idling;
- then the longest modules go first (``tests/durations.json``, made by
  ``scripts/test_durations.py``; ``./test.sh`` passes ``--no-loadscope-reorder``, without which
  xdist orders modules by their number of tests): a long module handed out last kept one worker
  busy for half a minute after the others had finished.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.live import LiveSoc  # noqa: E402
from vdsp_sim.soc.private_soc import fresh_ddr_dir, fresh_runtime_dir, shared_starter  # noqa: E402

LOCK_DIR_VAR = "VDSP_TEST_LOCK_DIR"     # the run-wide lock directory, set by the xdist controller


def worker_id() -> str:
    """This pytest process's xdist worker ("gw0", "gw1", ...), or "main" in a serial run."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


class RunLock:
    """A readers-writer lock across the processes of one test run, writers first.

    Every test holds it shared, an ``exclusive`` test alone. A writer declares itself (holds the
    ``intent`` file shared), takes the gate, then the lock itself, and then withdraws its
    declaration. A reader takes the gate and, unless a writer is declared, the lock shared, and
    lets the gate go; if one is declared, it lets the gate go, waits for the declarations to end and
    tries again. So a reader that comes while a writer waits queues behind it, even when both were
    waiting for the gate and the kernel woke the reader first (which took the gate before: the
    writer then waited out the whole test the reader began). A writer whose next test is
    exclusive too keeps the lock for it (:meth:`release` with ``keep``): the moment between its
    two tests let every waiting reader in before, and the second test waited out their longest.

    POSIX record locks (``lockf``) belong to the process that took them: a child forked during a
    test (a daemon, a multiprocessing worker) does not inherit them and cannot keep a finished
    test's lock held. Closing any descriptor of a file drops all of the process's locks on it:
    each file is opened once per RunLock and closed only by :meth:`close`.
    """

    def __init__(self, directory: Path) -> None:
        self.paths = {name: directory / name for name in ("intent", "gate", "lock")}
        self.fds: dict[str, int] = {}
        self.held: bool | None = None       # None: not held; else whether exclusively

    def _fd(self, name: str) -> int:
        if name not in self.fds:
            self.fds[name] = os.open(self.paths[name], os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return self.fds[name]

    def acquire(self, exclusive: bool) -> None:
        """Hold it, alone if ``exclusive`` (a no-op for a writer that kept it)."""
        if self.held is not None:
            if self.held and exclusive:
                return
            raise RuntimeError("RunLock held already")
        intent, gate, lock = self._fd("intent"), self._fd("gate"), self._fd("lock")
        if exclusive:
            fcntl.lockf(intent, fcntl.LOCK_SH)
            try:
                fcntl.lockf(gate, fcntl.LOCK_EX)
                try:
                    fcntl.lockf(lock, fcntl.LOCK_EX)
                except BaseException:
                    fcntl.lockf(gate, fcntl.LOCK_UN)
                    raise
            finally:
                fcntl.lockf(intent, fcntl.LOCK_UN)
        else:
            while True:
                fcntl.lockf(gate, fcntl.LOCK_EX)
                try:
                    try:
                        fcntl.lockf(intent, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:         # a writer is declared: after it
                        declared = True
                    else:
                        fcntl.lockf(intent, fcntl.LOCK_UN)
                        declared = False
                        fcntl.lockf(lock, fcntl.LOCK_SH)
                finally:
                    fcntl.lockf(gate, fcntl.LOCK_UN)
                if not declared:
                    break
                fcntl.lockf(intent, fcntl.LOCK_EX)      # until no writer is declared
                fcntl.lockf(intent, fcntl.LOCK_UN)
        self.held = exclusive

    def release(self, keep: bool = False) -> None:
        """Let it go; with ``keep``, a writer keeps it (for its next test, also exclusive)."""
        if self.held is None or (keep and self.held):
            return
        fcntl.lockf(self.fds["lock"], fcntl.LOCK_UN)
        if self.held:
            fcntl.lockf(self.fds["gate"], fcntl.LOCK_UN)
        self.held = None

    @contextlib.contextmanager
    def hold(self, exclusive: bool):
        self.acquire(exclusive)
        try:
            yield
        finally:
            self.release()

    def close(self) -> None:
        self.release()
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def _xdist_controller(config) -> bool:
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))


def pytest_configure(config):
    """The ``exclusive`` mark; the xdist controller makes the run-wide lock directory (its
    workers inherit the name)."""
    config.addinivalue_line("markers", "exclusive: runs with no other test of a parallel run beside it "
                                       "(it loads the whole host, or measures time); see tests/conftest.py")
    if _xdist_controller(config):
        os.environ[LOCK_DIR_VAR] = tempfile.mkdtemp(prefix="vdsp-run-", dir="/tmp")


def pytest_unconfigure(config):
    if _xdist_controller(config) and os.environ.get(LOCK_DIR_VAR):
        shutil.rmtree(os.environ.pop(LOCK_DIR_VAR), ignore_errors=True)


DURATIONS = Path(__file__).with_name("durations.json")     # seconds per module (scripts/test_durations.py)


def module_seconds() -> dict[str, float]:
    """Seconds per test module (``tests/x.py``) as last measured; {} without a readable file."""
    try:
        data = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(k, str) and isinstance(v, (int, float))}


def pytest_collection_modifyitems(config, items):
    """The modules with an ``exclusive`` test go first: they run while the other workers have no
    SoC of their own idling beside them. Then the longest first (a module not measured yet counts
    as the median), so that the last ones handed out are short. In its module an exclusive test
    comes first, the others keep their order: the first tests of every worker are then exclusive,
    and they run one after another while no other test runs, instead of each waiting for the
    workers' tests in progress to end and stalling the tests queued behind it (writers first):
    on the 2-CPU VM the last exclusive test ended 82 s into the run before, 42 s now (and the
    whole run took 250 s instead of 292). Tests of other modules still came in between them (a
    reader that won the gate, a moment between two exclusive tests of one worker: RunLock), each
    waited out by the next exclusive test: on a slower day the last one ended 56-71 s into the
    run, and 46 s once they ran back to back (the run 363-397 s, then 345 s)."""
    exclusive = {item.path for item in items if item.get_closest_marker("exclusive")}
    seconds = module_seconds()
    default = statistics.median(seconds.values()) if seconds else 0.0
    root = Path(__file__).resolve().parent.parent

    names: dict[Path, str] = {}     # a module's name, resolved once (not once per test: 0.4 s a worker)

    def name_of(path: Path) -> str:
        if path not in names:
            try:
                names[path] = path.resolve().relative_to(root).as_posix()
            except ValueError:
                names[path] = str(path)
        return names[path]

    def key(item) -> tuple:
        name = name_of(item.path)
        return (item.path not in exclusive, -seconds.get(name, default), name,
                item.get_closest_marker("exclusive") is None)
    items.sort(key=key)


_run_lock: RunLock | None = None      # this process's (its files stay open: see RunLock)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup, call and teardown of each test under the run-wide lock (parallel runs only)."""
    directory = os.environ.get(LOCK_DIR_VAR)
    if not directory or not os.path.isdir(directory):
        return (yield)
    global _run_lock
    if _run_lock is None or _run_lock.paths["lock"].parent != Path(directory):
        if _run_lock is not None:       # another run's directory: let that one's lock and files go
            _run_lock.close()
        _run_lock = RunLock(Path(directory))
    exclusive = item.get_closest_marker("exclusive") is not None
    _run_lock.acquire(exclusive)
    try:
        return (yield)
    finally:       # a writer keeps it for its next test when that is exclusive too
        _run_lock.release(keep=exclusive and nextitem is not None and nextitem.get_closest_marker("exclusive") is not None)


@pytest.fixture(scope="session", autouse=True)
def _private_defaults():
    """A runtime and a DDR directory of this pytest process's own, named by the environment for
    the whole session: whatever names none uses these, never the host's defaults, which other
    workers (and other users' SoCs) share. The private SoCs of the session share one template
    starter (``vdsp_sim.soc.private_soc.shared_starter``): what their cores and relays import is
    imported once per pytest process, not once per SoC."""
    from vdsp_board.memory import ddr
    tag = f"v{worker_id()}-"
    rt, shm = fresh_runtime_dir(tag), fresh_ddr_dir(f"vt-ddr-{tag}")
    saved = {k: os.environ.get(k) for k in ("VDSP_RUNTIME_DIR", "VDSP_SHM_DIR")}
    os.environ.update(VDSP_RUNTIME_DIR=str(rt), VDSP_SHM_DIR=str(shm))
    try:
        with shared_starter(ignore=("PYTEST_CURRENT_TEST",)):     # pytest's, naming the test running
            yield
    finally:
        ddr.close_owner(str(shm))
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(rt, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


@pytest.fixture
def shm(tmp_path, monkeypatch):
    """A private DDR directory (not /dev/shm); this process's owner there is closed afterwards."""
    from vdsp_board.memory import ddr
    directory = tmp_path / "shm"
    directory.mkdir()
    monkeypatch.setenv("VDSP_SHM_DIR", str(directory))
    monkeypatch.delenv("VDSP_STRICT_CACHE", raising=False)
    yield directory
    ddr.close_owner(str(directory))


@pytest.fixture
def short_dir():
    """A private directory under /tmp for ipc sockets (pytest's tmp_path under a long TMPDIR is
    past the 107 characters of a unix socket path), removed afterwards."""
    path = fresh_runtime_dir("vts")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["relay", "direct"])
def mode_soc(request, shared_soc):
    """A client of the shared SoC, once in relay mode and once in direct mode."""
    from arm_side import Soc
    with Soc(mode=request.param) as soc:
        yield soc


@pytest.fixture
def runtime_env(monkeypatch):
    """A fresh, short runtime directory (ipc paths are limited to 107 characters) and a
    private DDR directory, named by the environment (for SoCs the test starts itself)."""
    from vdsp_board.memory import ddr
    rt, shm = fresh_runtime_dir(), fresh_ddr_dir()
    monkeypatch.setenv("VDSP_RUNTIME_DIR", str(rt))
    monkeypatch.setenv("VDSP_SHM_DIR", str(shm))
    for var in ("VDSP_RELAY_ENDPOINT", "VDSP_CORE_ENDPOINTS", "VDSP_RPC_MODE", "VDSP_STRICT_CACHE"):
        monkeypatch.delenv(var, raising=False)
    yield rt
    ddr.close_owner(str(shm))
    shutil.rmtree(rt, ignore_errors=True)
    shutil.rmtree(shm, ignore_errors=True)


@pytest.fixture
def up_soc(runtime_env):
    """``vdsp up -d`` in a private runtime dir; ``vdsp down`` and the leak checks afterwards
    (the supervisor's tests, tests/supervised.py)."""
    from tests.live import shm_entries
    from tests.supervised import VDSP, down_and_check, run
    before = shm_entries()
    res = run(VDSP + ["up", "-d"], runtime_env)
    try:
        assert res.returncode == 0, res.stdout + res.stderr
        yield runtime_env
    finally:
        down_and_check(runtime_env, before)


@pytest.fixture
def live_soc(runtime_env):
    """A SoC of its own for one test (tests that kill or freeze parts use this)."""
    soc = LiveSoc(runtime_env)
    soc.start()
    try:
        yield soc
    finally:
        soc.stop_and_check()


HUNG_MS = 3000      # soc_hung_3s's hung deadline (the default: 20 s)


@pytest.fixture
def soc_hung_3s(runtime_env):
    """A SoC of its own whose cores and relay judge a silent peer hung after HUNG_MS (tests that
    freeze a core and wait for that verdict)."""
    live = LiveSoc(runtime_env, core_args=["--hung-ms", str(HUNG_MS)], relay_args=["--hung-ms", str(HUNG_MS)])
    live.start()
    try:
        yield live
    finally:
        live.stop_and_check()


@pytest.fixture(scope="module")
def shared_soc():
    """One SoC for a module of tests that leave it healthy (fresh runtime and DDR directories)."""
    soc = LiveSoc()
    soc.start()
    try:
        yield soc
    finally:
        soc.stop_and_check()


def wait_until(predicate, timeout_s: float = 10.0, interval_s: float = 0.05):
    """Poll ``predicate`` until it returns a truthy value; that value, or None on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    return None


@pytest.fixture
def refusing_server(tmp_path, monkeypatch):
    """A CURVE ROUTER on loopback tcp whose ZAP handler allows no client key; our key pair in
    ``tmp_path/keys`` (``VDSP_CLIENT_KEY``). Yields (endpoint, the server's public key)."""
    import zmq
    import zmq.auth
    from zmq.auth.thread import ThreadAuthenticator
    from vdsp_board.identity import curve
    keys = tmp_path / "keys"
    _, secret = curve.create(keys, "client", role=None)
    monkeypatch.setenv("VDSP_CLIENT_KEY", str(secret))
    allowed = tmp_path / "allowed"          # no key in it: every handshake is denied
    allowed.mkdir()
    ctx = zmq.Context()
    auth = ThreadAuthenticator(ctx)
    auth.start()
    auth.configure_curve(domain="*", location=str(allowed))
    public, secret_key = zmq.curve_keypair()
    server = ctx.socket(zmq.ROUTER)
    server.linger = 0
    server.curve_server, server.curve_publickey, server.curve_secretkey = True, public, secret_key
    port = server.bind_to_random_port("tcp://127.0.0.1")
    try:
        yield f"tcp://127.0.0.1:{port}", public.decode("ascii")
    finally:
        server.close(0)
        auth.stop()
        ctx.term()

"""A SoC serves whatever the length of its runtime directory's path (issue 35, point 7).

A unix socket path has at most 107 characters. Under a runtime dir of 94 characters
``vdsp0.sock`` (105) fitted but ``vdsp0.fw.sock`` (108) did not: both firmwares failed to
bind and ``vdsp up -d`` waited for good. Where the runtime dir is too long for the SoC's
socket names, the sockets go to a short private directory (``/tmp/vdsp-sock-XXXXXXXX``) that
the runtime dir's ``sockets`` symlink names; ``vdsp down`` removes both.

Every length from 80 to 150 is checked the cheap way (the endpoints every process of the SoC
computes, binds and connects to, made as a server makes them); the lengths where the
behaviour changes, and the issue's 94, are started for real.
"""
from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from arm_side import CORE_0, CORE_1, Soc
from protocol import errors
from vdsp_board.processes import rundir
from tests.conftest import wait_until
from tests.live import shm_entries
from tests.supervised import VDSP, down_and_check, ping, rt_processes, run

LENGTHS = range(80, 151)


def runtime_dir_of(base: Path, length: int) -> Path:
    """A runtime dir path of exactly ``length`` characters under ``base`` (not created)."""
    rt = base / ("r" * (length - len(str(base)) - 1))
    assert len(str(rt)) == length
    return rt


@pytest.fixture
def base(monkeypatch):
    """A private directory under /tmp to put runtime dirs of chosen lengths in, and a private
    DDR directory (named by the environment)."""
    from vdsp_board.memory import ddr
    from vdsp_sim.soc.private_soc import fresh_ddr_dir
    top = Path(tempfile.mkdtemp(prefix="vl", dir="/tmp"))
    shm = fresh_ddr_dir()
    monkeypatch.setenv("VDSP_SHM_DIR", str(shm))
    for var in ("VDSP_RELAY_ENDPOINT", "VDSP_CORE_ENDPOINTS", "VDSP_RPC_MODE", "VDSP_STRICT_CACHE"):
        monkeypatch.delenv(var, raising=False)
    yield top
    ddr.close_owner(str(shm))
    shutil.rmtree(top, ignore_errors=True)
    shutil.rmtree(shm, ignore_errors=True)


def endpoints(rt: Path) -> list[str]:
    """Every ipc endpoint a SoC of ``rt`` binds by default: the relay's, each core's control
    endpoint and each core's firmware endpoint (what ``vdsp core`` derives from it)."""
    cores = rundir.core_endpoints(rt)
    return [rundir.relay_endpoint(rt), *cores.values(), *(rundir.fw_endpoint_for(e) for e in cores.values())]


def sockets_under(directory: Path) -> list[Path]:
    found = []
    for root, _dirs, files in os.walk(directory):
        found += [Path(root) / f for f in files if stat.S_ISSOCK(os.lstat(Path(root) / f).st_mode)]
    return found


@pytest.mark.parametrize("length", LENGTHS)
def test_every_endpoint_of_a_soc_fits_whatever_the_runtime_dir_length(base, monkeypatch, length):
    """What a server of the SoC does before it binds (``rundir.socket_dir(rt, create=True)``),
    then what every process computes: each endpoint is a path of at most 107 characters, a
    client that only reads finds the same ones, and the release leaves nothing."""
    rt = runtime_dir_of(base, length)
    monkeypatch.setenv("VDSP_RUNTIME_DIR", str(rt))
    rundir.runtime_dir()
    made = rundir.socket_dir(rt, create=True)
    served = endpoints(rt)
    for endpoint in served:
        assert endpoint.startswith("ipc://") and len(endpoint) - 6 <= rundir.IPC_PATH_MAX, endpoint
        assert Path(endpoint[6:]).parent == made
    assert endpoints(rt) == served                  # a client (no create) computes the same
    if made != rt:
        assert os.readlink(rt / "sockets") == str(made)
        st = os.lstat(made)
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
    for endpoint in served:     # each binds, and a client connects to it, as the kernel sees them
        with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
            server.bind(endpoint[6:])
            server.listen()
            client.connect(endpoint[6:])
        os.unlink(endpoint[6:])
    rundir.release_socket_dir(rt)
    assert not os.path.lexists(rt / "sockets") and (made == rt or not made.exists())


def test_a_long_runtime_dir_needs_its_sockets_dir_before_a_client_can_name_an_endpoint(base, monkeypatch):
    """No SoC was started there: a client is told so, not sent to a path that cannot exist."""
    rt = runtime_dir_of(base, 120)
    monkeypatch.setenv("VDSP_RUNTIME_DIR", str(rt))
    rundir.runtime_dir()
    with pytest.raises(errors.RelayUnavailable, match="no SoC is up in"):
        rundir.relay_endpoint(rt)
    with pytest.raises(errors.CoreOffline, match="no SoC is up in"):
        rundir.core_endpoints(rt)


def test_a_sockets_link_to_a_directory_not_private_is_refused_and_replaced(base, monkeypatch):
    """Another user may create a name in /tmp once ours is gone (a reboot, tmpfiles): a link to
    a directory that is not ours and private, or to a symlink, is never used."""
    rt = runtime_dir_of(base, 120)
    monkeypatch.setenv("VDSP_RUNTIME_DIR", str(rt))
    rundir.runtime_dir()
    open_dir = base / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    hop = base / "hop"
    hop.symlink_to(open_dir)
    for target in (open_dir, hop, base / "gone"):
        (rt / "sockets").unlink(missing_ok=True)
        (rt / "sockets").symlink_to(target)
        with pytest.raises(errors.VdspError) as exc:
            rundir.relay_endpoint(rt)
        assert str(target) in exc.value.message
        made = rundir.socket_dir(rt, create=True)      # a server makes a new one
        assert made != target and os.readlink(rt / "sockets") == str(made)
        assert stat.S_IMODE(os.lstat(made).st_mode) == 0o700
        rundir.release_socket_dir(rt)
        assert not made.exists()


def test_a_sockets_entry_that_is_no_symlink_is_refused(base, monkeypatch):
    rt = runtime_dir_of(base, 120)
    monkeypatch.setenv("VDSP_RUNTIME_DIR", str(rt))
    rundir.runtime_dir()
    (rt / "sockets").mkdir()
    with pytest.raises(errors.InvalidArgument, match="not a symlink"):
        rundir.socket_dir(rt, create=True)


def test_a_core_given_an_endpoint_too_long_refuses_at_once_naming_the_limit(base):
    """An explicit ``--fw-bind`` (or ``--bind``) past the limit: the core exits at once."""
    rt = base / "rt"
    long_fw = "ipc://" + str(base / ("f" * 100)) + ".sock"
    res = subprocess.run(VDSP + ["core", "--name", "vdsp0", "--fw-bind", long_fw],
                         env=dict(os.environ, VDSP_RUNTIME_DIR=str(rt)), capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert "limit is 107" in res.stderr and "shorter" in res.stderr, res.stderr[-2000:]


@pytest.mark.live
@pytest.mark.parametrize("length", [80, 90, 91, 94, 107, 150])
def test_up_d_serves_under_a_runtime_dir_of_any_length_and_down_leaves_nothing(base, monkeypatch, length):
    """The lengths where the behaviour changes (90: the sockets fit in the runtime dir; 91: they
    go to the short directory), the issue's 94, and the ends. Today's 94 hung for good: the
    command is bounded here so that it fails instead."""
    rt = runtime_dir_of(base, length)
    monkeypatch.setenv("VDSP_RUNTIME_DIR", str(rt))
    before = shm_entries()
    try:
        try:
            res = run(VDSP + ["up", "-d"], rt, timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail(f"'vdsp up -d' under a runtime dir of {length} characters did not return in 90 s")
        assert res.returncode == 0, res.stdout + res.stderr
        with Soc(autostart_relay=False, connect_timeout_s=10) as soc:
            assert ping(soc, CORE_0) and ping(soc, CORE_1)
        where = rundir.socket_dir(rt)
        bound = sockets_under(where)
        assert sorted(p.name for p in bound) == ["relay.sock", "vdsp0.fw.sock", "vdsp0.sock", "vdsp1.fw.sock",
                                                 "vdsp1.sock"]
        assert all(len(str(p)) <= rundir.IPC_PATH_MAX for p in bound)
        assert (where == rt) == (length <= 90)
    finally:
        down_and_check(rt, before)
    assert not os.path.lexists(rt / "sockets")
    assert where == rt or not os.path.lexists(where), f"{where} left behind"
    assert not sockets_under(rt)
    assert wait_until(lambda: not rt_processes(rt), 10)

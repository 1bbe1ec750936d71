"""A squatted short sockets directory receives nothing of a live client (issue 40, point 2).

Under a runtime dir longer than 90 characters a SoC's sockets live in ``/tmp/vdsp-sock-XXXXXXXX``
(``vdsp_board.processes.rundir``). Once the SoC is down and that directory removed, another user may make
the same name at once and bind ``relay.sock`` there. libzmq connected an ipc DEALER again by
itself, every 50 ms, to the old path: a TASK a client had queued when the relay went away
(owner id, physical addresses, parameters) reached the other user's socket. Every client ipc
link now connects once, through its directory checked (``vdsp_board.sockets.ipclink``), and a new link
checks again.

The client here is one live ``Soc`` across every round: its relay is stopped with tasks queued
behind it (more than the kernel's socket buffer holds, so that libzmq keeps the rest), killed,
its directory removed as ``vdsp down`` removes it, and squatted within a moment by another user
(uid 65534 under root) who counts every connection and byte that reaches its socket. The next
round's relay is found again by the same client.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from arm_side import Soc
from protocol import errors
from vdsp_board.processes import rundir
from vdsp_board.memory import ddr
from tests.conftest import wait_until
from tests.privilege import other_user_process

ROUNDS = int(os.environ.get("SQUAT_ROUNDS", "20"))
TASKS = 48                      # queued behind the stopped relay, each with PARAM_BYTES of parameters:
PARAM_BYTES = 64 * 1024         # 3 MB, more than a unix socket's buffer takes in
MARKER = "SQUAT-MARKER-7f3a"
WINDOW_S = 0.5                  # the squatter listens this long after it bound (libzmq retried every 50 ms)

# The other user: for each "directory socket-name" line read on stdin, make that directory as soon
# as its owner removed it, bind the socket there and speak ZMTP as a ROUTER would (a NULL greeting and READY: a client
# then sends what it queued), count every connection and byte until "done", report, and remove
# what it made.
SQUATTER = r"""
import json, os, select, socket, sys, time
GREETING = b"\xff" + bytes(8) + b"\x7f\x03\x00" + b"NULL".ljust(20, b"\0") + bytes(32)
READY = b"\x05READY\x0bSocket-Type" + (6).to_bytes(4, "big") + b"ROUTER"
while True:
    line = sys.stdin.readline().split()
    if not line:
        break
    where, name = line
    deadline = time.monotonic() + 60
    while True:
        try:
            os.mkdir(where, 0o755)
            break
        except FileExistsError:
            if time.monotonic() > deadline:
                raise SystemExit(f"{where} was never removed")
    path = os.path.join(where, name)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o777)
    srv.listen(64)
    print(json.dumps({"squatted": where}), flush=True)
    conns, connections, received, marker, tail = [], 0, 0, False, b""
    while True:
        ready, _, _ = select.select([srv, sys.stdin, *conns], [], [], 1.0)
        if sys.stdin in ready:
            sys.stdin.readline()
            break
        for sock in ready:
            if sock is srv:
                conn = srv.accept()[0]
                conn.sendall(GREETING + bytes([4, len(READY)]) + READY)
                conns.append(conn)
                connections += 1
            elif sock is not sys.stdin:
                try:
                    chunk = sock.recv(1 << 20)
                except OSError:
                    chunk = b""
                received += len(chunk)
                marker = marker or b"SQUAT-MARKER" in tail + chunk
                tail = chunk[-16:]
                if not chunk:
                    conns.remove(sock)
                    sock.close()
    print(json.dumps({"connections": connections, "bytes": received, "marker": marker}), flush=True)
    for sock in conns:
        sock.close()
    srv.close()
    os.unlink(path)
    os.rmdir(where)
"""


@pytest.fixture
def long_rt(monkeypatch):
    """A runtime dir of 120 characters (its sockets go to a short directory in /tmp) and a private
    DDR directory, named by the environment."""
    from vdsp_sim.soc.private_soc import fresh_ddr_dir
    top = Path(tempfile.mkdtemp(prefix="vsq", dir="/tmp"))
    rt = top / ("r" * (120 - len(str(top)) - 1))
    shm = fresh_ddr_dir()
    monkeypatch.setenv("VDSP_RUNTIME_DIR", str(rt))
    monkeypatch.setenv("VDSP_SHM_DIR", str(shm))
    for var in ("VDSP_RELAY_ENDPOINT", "VDSP_CORE_ENDPOINTS", "VDSP_RPC_MODE", "VDSP_STRICT_CACHE"):
        monkeypatch.delenv(var, raising=False)
    rundir.runtime_dir()
    yield rt
    ddr.close_owner(str(shm))
    shutil.rmtree(top, ignore_errors=True)
    shutil.rmtree(shm, ignore_errors=True)


def start_relay(rt: Path) -> subprocess.Popen:
    """A relay of this runtime dir (no cores: it answers HELLO and QUERY, and queues tasks). Its
    READY waits three heartbeats for the cores that never come: at 100 ms, 0.3 s a round instead of
    1.5 s (the clients' hung deadline, which judges a stopped relay, is the relay's default all the same)."""
    log = open(rt / "relay.log", "a")
    proc = subprocess.Popen([sys.executable, "-m", "relay_server.main", "--heartbeat-ms", "100"], stdout=log,
                            stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])))
    log.close()
    return proc


def answered(soc: Soc) -> bool:
    """The client reached a relay (connected again if its last one died)."""
    try:
        return "cores" in soc.query("cores", timeout_ms=2000)
    except errors.VdspError:
        return False


@pytest.mark.live
def test_a_squatted_sockets_dir_receives_nothing_of_a_live_client(long_rt):
    squatter = other_user_process(SQUATTER)
    relay = start_relay(long_rt)
    reports = []
    try:
        assert wait_until(lambda: os.path.lexists(long_rt / "sockets") and
                          os.path.exists(rundir.socket_dir(long_rt) / "relay.sock"), 60)
        with Soc(autostart_relay=False, connect_timeout_s=30) as soc:
            for n in range(ROUNDS):
                if n:
                    relay = start_relay(long_rt)
                assert wait_until(lambda: answered(soc), 60), f"round {n}: the new relay was not found again"
                where = rundir.socket_dir(long_rt)
                assert where != long_rt and where.name.startswith(rundir.SHORT_PREFIX)
                os.kill(relay.pid, signal.SIGSTOP)
                tasks = [soc.rpc(0x0001, params={"m": f"{MARKER}-{n}-{i}", "pad": "x" * PARAM_BYTES})
                         for i in range(TASKS)]
                squatter.stdin.write(f"{where} relay.sock\n")
                squatter.stdin.flush()
                relay.kill()
                relay.wait(timeout=30)
                assert rundir.release_socket_dir(long_rt, stale=True)      # as `vdsp down` does
                line = squatter.stdout.readline()
                assert json.loads(line) == {"squatted": str(where)}, line
                time.sleep(WINDOW_S)
                for task in tasks:      # each ends with the relay's death, none is lost
                    with pytest.raises(errors.RelayUnavailable):
                        task.wait(timeout_ms=30000)
                with pytest.raises(errors.RelayUnavailable):   # no SoC is up: the name is not used
                    soc.query("cores", timeout_ms=2000)
                squatter.stdin.write("done\n")
                squatter.stdin.flush()
                reports.append(json.loads(squatter.stdout.readline()))
                assert reports[-1] == {"connections": 0, "bytes": 0, "marker": False}, \
                    f"round {n}: the squatted {where} received {reports[-1]} (rounds so far: {reports})"
    finally:
        if relay.poll() is None:
            relay.kill()
            relay.wait(timeout=30)
        squatter.stdin.close()
        squatter.wait(timeout=30)
        rundir.release_socket_dir(long_rt, stale=True)
    assert len(reports) == ROUNDS


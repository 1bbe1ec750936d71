"""Over tcp only peers with an allowed CURVE key reach the SoC, and only admins write attributes.

Before, anyone who reached a tcp port (the compose layout binds 0.0.0.0) could submit tasks,
talk to a firmware directly, and stop, start or re-point cores through CONTROL.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from arm_side import CORE_0, CORE_1, Soc, errors, opids
from tests.conftest import wait_until
from tests.privilege import require
from vdsp_board.memory import ddr
from vdsp_sim import otheruser
from vdsp_sim.soc.private_soc import fresh_ddr_dir
from vdsp_sim.soc.private_soc import free_tcp_ports as free_ports

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]


class TcpSoc:
    """relay + vdsp0 + vdsp1 on loopback tcp, with keys made by ``vdsp keys init``."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="vk", dir="/tmp"))
        self.keys = self.base / "keys"
        self.shm = fresh_ddr_dir()      # its DDR directory: its own, not /dev/shm (other tests' SoCs use that)
        relay, c0, f0, c1, f1 = free_ports(5)
        self.relay = f"tcp://127.0.0.1:{relay}"
        self.ctl = {"vdsp0": f"tcp://127.0.0.1:{c0}", "vdsp1": f"tcp://127.0.0.1:{c1}"}
        self.fw = {"vdsp0": f"tcp://127.0.0.1:{f0}", "vdsp1": f"tcp://127.0.0.1:{f1}"}
        self.procs: dict[str, subprocess.Popen] = {}

    def env(self, name: str) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VDSP_")}
        rt = self.base / name
        rt.mkdir(mode=0o700, exist_ok=True)
        env.update(VDSP_RUNTIME_DIR=str(rt), VDSP_KEYS_DIR=str(self.keys), PYTHONPATH=str(ROOT),
                   VDSP_SHM_DIR=str(self.shm), VDSP_FIRMWARE_DIR=str(self.base / "firmware"))
        return env

    def start(self) -> None:
        vdsp = [sys.executable, "-m", "vdsp_sim.cli"]
        subprocess.run(vdsp + ["keys", "init"], env=self.env("keys"), check=True, capture_output=True, timeout=60)
        subprocess.run(vdsp + ["firmware", "install-stock"], env=self.env("build"), check=True,
                       capture_output=True, timeout=120)
        for name in ("vdsp0", "vdsp1"):
            self._spawn(name, vdsp + ["core", "--name", name, "--bind", self.ctl[name], "--fw-bind", self.fw[name]])
        self._spawn("relay", [sys.executable, "-m", "relay_server.main", "--bind", self.relay,
                              "--core", f"vdsp0={self.ctl['vdsp0']}", "--core", f"vdsp1={self.ctl['vdsp1']}"])
        os.environ.update(VDSP_KEYS_DIR=str(self.keys), VDSP_RELAY_ENDPOINT=self.relay,
                          VDSP_RUNTIME_DIR=str(self.base / "client"), VDSP_SHM_DIR=str(self.shm))
        (self.base / "client").mkdir(mode=0o700, exist_ok=True)

        def up():
            try:
                with Soc(autostart_relay=False, connect_timeout_s=2) as soc:
                    return [c["state"] for c in soc.query("cores")["cores"]] == ["running"] * 2
            except errors.VdspError:
                return False
        assert wait_until(up, 60), self.logs()

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.base / f"{name}.log", "wb") as out:
            self.procs[name] = subprocess.Popen(argv, env=self.env(name), stdin=subprocess.DEVNULL, stdout=out,
                                                stderr=subprocess.STDOUT, start_new_session=True)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in self.base.glob("*.log"))

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs.values())

    def stop(self) -> None:
        for name in ("relay", "vdsp1", "vdsp0"):
            proc = self.procs.get(name)
            if proc and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        ddr.close_owner(str(self.shm))
        shutil.rmtree(self.base, ignore_errors=True)
        shutil.rmtree(self.shm, ignore_errors=True)


@contextlib.contextmanager
def running_tcp_soc():
    """A started TcpSoc, with the SoC variables of this process's environment cleared around it."""
    saved = {k: os.environ.get(k) for k in ("VDSP_KEYS_DIR", "VDSP_RELAY_ENDPOINT", "VDSP_RUNTIME_DIR",
                                            "VDSP_CORE_ENDPOINTS", "VDSP_RPC_MODE", "VDSP_CLIENT_KEY", "VDSP_SHM_DIR")}
    for k in saved:
        os.environ.pop(k, None)
    soc = TcpSoc()
    try:
        soc.start()
        yield soc
    finally:
        soc.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def tcp_soc():
    with running_tcp_soc() as soc:
        yield soc


def test_an_allowed_client_runs_tasks_and_reads_but_cannot_write_attributes(tcp_soc):
    with Soc(autostart_relay=False) as soc:
        assert soc.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
        assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}
        assert soc.control("vdsp0", "state") == "running"
        with pytest.raises(errors.VdspError) as exc:
            soc.control("vdsp0", "state", "stop")
        assert exc.value.code == -13 and "admin key" in exc.value.message
        assert soc.control("vdsp0", "state") == "running"


def test_an_admin_key_may_write_attributes(tcp_soc, monkeypatch):
    monkeypatch.setenv("VDSP_CLIENT_KEY", str(tcp_soc.keys / "admin.key_secret"))
    with Soc(autostart_relay=False) as soc:
        assert soc.control("vdsp1", "recovery", "disabled") == "disabled"
        assert soc.control("vdsp1", "recovery", "enabled") == "enabled"


def test_an_allowed_client_may_use_direct_mode_but_not_write_there_either(tcp_soc, monkeypatch):
    monkeypatch.setenv("VDSP_CORE_ENDPOINTS", ",".join(f"{n}={e}" for n, e in tcp_soc.ctl.items()))
    with Soc(mode="direct", autostart_relay=False) as soc:
        assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}
        with pytest.raises(errors.VdspError) as exc:
            soc.control("vdsp1", "state", "stop")
        assert exc.value.code == -13


@pytest.mark.parametrize("mode", ["relay", "direct"])
def test_a_revoked_key_is_told_at_once_that_the_server_refused_it(tcp_soc, monkeypatch, mode):
    """Before, a client whose key had been revoked waited its whole connect timeout (20 s) and
    got RelayUnavailable 'no relay answers', with no hint that its key was the problem."""
    env = dict(os.environ, VDSP_KEYS_DIR=str(tcp_soc.keys))
    vdsp = [sys.executable, "-m", "vdsp_sim.cli", "keys"]
    subprocess.run(vdsp + ["add", f"gone-{mode}"], env=env, check=True, capture_output=True, timeout=60)
    subprocess.run(vdsp + ["revoke", f"gone-{mode}"], env=env, check=True, capture_output=True, timeout=60)
    monkeypatch.setenv("VDSP_CLIENT_KEY", str(tcp_soc.keys / f"gone-{mode}.key_secret"))
    monkeypatch.setenv("VDSP_CORE_ENDPOINTS", ",".join(f"{n}={e}" for n, e in tcp_soc.ctl.items()))
    with pytest.raises(errors.VdspError) as exc:
        Soc(mode=mode, autostart_relay=False, connect_timeout_s=5)
    assert exc.value.code == -6000301, exc.value
    assert "the server did not accept this client key" in exc.value.message
    assert f"gone-{mode}.key_secret" in exc.value.message


def test_vdsp_names_a_refused_key_and_its_code(tcp_soc):
    env = dict(os.environ, VDSP_KEYS_DIR=str(tcp_soc.keys), VDSP_RELAY_ENDPOINT=tcp_soc.relay)
    vdsp = [sys.executable, "-m", "vdsp_sim.cli"]
    subprocess.run(vdsp + ["keys", "add", "gone-cli"], env=env, check=True, capture_output=True, timeout=60)
    subprocess.run(vdsp + ["keys", "revoke", "gone-cli"], env=env, check=True, capture_output=True, timeout=60)
    env["VDSP_CLIENT_KEY"] = str(tcp_soc.keys / "gone-cli.key_secret")
    res = run_or_show_stacks(vdsp + ["status"], env, 60)     # it hung once: a blocking send (tests/sdk/test_refused_link.py)
    assert res.returncode != 0
    assert "the server did not accept this client key" in res.stderr + res.stdout
    assert "HB_DSP_KEY_REFUSED" in res.stderr + res.stdout or "-6000301" in res.stderr + res.stdout


STRANGER = textwrap.dedent("""
    import json, os, sys, tempfile, time
    import zmq, zmq.auth
    from protocol import messages, wire
    from vdsp_sim.otheruser import become
    uid = become()      # modules are loaded (the venv may live in a home it cannot read); another user from here on
    endpoints, server_public = json.loads(sys.argv[1]), sys.argv[2].encode()
    with tempfile.TemporaryDirectory() as keydir:       # the key pair is read at once: nothing left in /tmp
        public, secret = zmq.auth.load_certificate(zmq.auth.create_certificates(keydir, "me")[1])
    ctx = zmq.Context()
    answers, queued = {}, {}
    for where, endpoint in endpoints.items():
        for keyed in (False, True):
            sock = ctx.socket(zmq.DEALER)
            sock.linger = 0
            if keyed:   # a well-formed CURVE key the SoC never allowed
                sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = server_public, public, secret
            sock.connect(endpoint)
            # not blocking: once the server has refused the handshake, libzmq ends this socket's only
            # session, and a blocking send then waits for a peer for ever (a suite run, once: the
            # server refused between two sends). A send refused so is nothing answered; the first,
            # made as the socket connects, always has the session to go to (counted: ``queued``).
            n = 0
            try:
                for frames in (messages.task(1, 0, inputs=[], outputs=[], core=1),
                               messages.control(2, "vdsp0", "state", "stop"), messages.hello(3, "client")):
                    sock.send_multipart(wire.encode(frames), zmq.NOBLOCK)
                    n += 1
            except zmq.Again:
                pass
            queued[f"{where} keyed={keyed}"] = n
            answers[f"{where} keyed={keyed}"] = sock.poll(1500) != 0
            sock.close(0)
    print(json.dumps({"uid": uid, "answers": answers, "queued": queued}))
""")


def test_a_peer_without_an_allowed_key_from_another_uid_gets_nothing_at_all(tcp_soc):
    from vdsp_board.identity import curve
    require(otheruser.unavailable())
    endpoints = {"relay": tcp_soc.relay, "vdsp0 control": tcp_soc.ctl["vdsp0"], "vdsp0 firmware": tcp_soc.fw["vdsp0"]}
    server_public = curve.load_public(tcp_soc.keys / "server.key").decode()
    # its stacks if it does not end (CI, once, on Python 3.13 in the whole suite: it did not end
    # within 60 s, and nothing said where it stood; 3 runs of this file alone passed)
    res = run_or_show_stacks([sys.executable, "-c", STRANGER, json.dumps(endpoints), server_public],
                             {"PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"], "HOME": "/tmp"}, 60, cwd="/tmp")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["uid"] == otheruser.other_ids()[0] != os.getuid()
    assert out["answers"] and not any(out["answers"].values()), out["answers"]
    assert all(n >= 1 for n in out["queued"].values()), out["queued"]     # each socket sent something
    assert tcp_soc.alive()
    with Soc(autostart_relay=False) as soc:       # nothing was stopped
        assert soc.control("vdsp0", "state") == "running"
        assert soc.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
    logs = tcp_soc.logs()
    assert "refused a tcp peer with CURVE key" in logs


GREETING = b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"CURVE".ljust(20, b"\0") + b"\0" + b"\0" * 31


def _cut_by_server(sock: socket.socket, deadline_s: float) -> bool:
    """True if the server closed ``sock`` within ``deadline_s`` (EOF or reset), reading what it sends."""
    sock.settimeout(deadline_s)
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except OSError:     # timeout: still open
        return False


def test_peers_that_never_authenticate_cannot_make_a_server_hold_their_frames(tcp_soc):
    """Each peer sends a CURVE greeting, then the start of a 60 MiB command frame instead of
    HELLO, and keeps the connection open. Before, the relay and the firmware (64 MiB frames)
    held every such frame until the 30 s handshake timeout (twelve took the relay from 33 to
    770 MB) and the core took frames of any size; now each of those connections is cut within
    moments (scripts/preauth_flood.py measures the memory), and keyed clients are served."""
    endpoints = {"relay": tcp_soc.relay, "vdsp0 control": tcp_soc.ctl["vdsp0"], "vdsp0 firmware": tcp_soc.fw["vdsp0"]}
    for name, endpoint in endpoints.items():
        peers = []
        for _ in range(4):
            sock = socket.create_connection(("127.0.0.1", int(endpoint.rsplit(":", 1)[1])), timeout=10)
            sock.sendall(GREETING + b"\x06" + (60 << 20).to_bytes(8, "big"))
            try:
                sock.sendall(b"x" * (2 << 20))
            except OSError:
                pass        # cut while sending: fine
            peers.append(sock)
        try:
            cut = [_cut_by_server(sock, 10.0) for sock in peers]
        finally:
            for sock in peers:
                sock.close()
        assert all(cut), f"{name}: {cut.count(False)} of {len(cut)} unauthenticated connections still open"
    assert tcp_soc.alive()
    with Soc(autostart_relay=False) as soc:
        assert soc.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
    assert "had not authenticated" in tcp_soc.logs()


def test_a_server_without_its_key_refuses_to_start_with_a_clear_message(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VDSP_")}
    rt = tmp_path / "rt"
    env.update(VDSP_RUNTIME_DIR=str(rt), VDSP_KEYS_DIR=str(tmp_path / "nokeys"), PYTHONPATH=str(ROOT))
    port = free_ports(1)[0]
    res = subprocess.run([sys.executable, "-m", "relay_server.main", "--bind", f"tcp://127.0.0.1:{port}",
                          "--core", f"vdsp0=tcp://127.0.0.1:{port + 1}"], env=env, capture_output=True,
                         text=True, timeout=30)
    assert res.returncode != 0
    assert "vdsp keys init" in res.stderr and "Traceback" not in res.stderr


def run_or_show_stacks(cmd: list, env: dict, timeout: float, cwd: str | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run`` that, past ``timeout``, has the command print every thread's Python stack
    (faulthandler, on SIGABRT) and fails the test with it (CI, once: `vdsp status --json` did not end
    within 60 s, its own connect timeout being 30 s, and nothing said where it stood)."""
    proc = subprocess.Popen(cmd, env=dict(env, PYTHONFAULTHANDLER="1"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        out, err = proc.communicate(timeout=30)
        pytest.fail(f"{' '.join(cmd[2:])} did not end within {timeout} s; its stacks:\n{err[-6000:]}\n{out[-2000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_vdsp_up_with_tcp_endpoints_starts_a_tcp_soc_with_its_keys(tmp_path):
    """`vdsp up` with VDSP_RELAY_ENDPOINT / VDSP_CORE_ENDPOINTS on tcp binds the cores there
    (it bound ipc, and the relay waited 60 s for cores that never came), makes its keys,
    serves clients with an allowed key only, and `vdsp down` leaves nothing behind."""
    from vdsp_board.identity import curve
    env = {k: v for k, v in os.environ.items() if not k.startswith("VDSP_")}
    rt = tmp_path / "rt"
    relay, c0, c1 = free_ports(3, with_next=True)   # each firmware: the next port
    env.update(VDSP_RUNTIME_DIR=str(rt), PYTHONPATH=str(ROOT), VDSP_RELAY_ENDPOINT=f"tcp://127.0.0.1:{relay}",
               VDSP_CORE_ENDPOINTS=f"vdsp0=tcp://127.0.0.1:{c0},vdsp1=tcp://127.0.0.1:{c1}")
    vdsp = [sys.executable, "-m", "vdsp_sim.cli"]
    up = subprocess.run(vdsp + ["up", "-d", "--timeout", "60"], env=env, capture_output=True, text=True, timeout=120)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        keys = rt / "keys"
        assert (keys / "server.key_secret").exists() and (keys / "client.key_secret").exists()
        listening = {p for p in (relay, c0, c0 + 1, c1, c1 + 1)
                     if socket.socket().connect_ex(("127.0.0.1", p)) == 0}
        assert listening == {relay, c0, c0 + 1, c1, c1 + 1}
        assert not list(rt.glob("*.sock")), "the cores bound ipc instead of tcp"
        smoke = run_or_show_stacks(vdsp + ["sample", "smoke", "--rounds", "3"], env, 120)
        assert smoke.returncode == 0, smoke.stdout + smoke.stderr
        status = run_or_show_stacks(vdsp + ["status", "--json"], env, 60)
        assert status.returncode == 0, status.stdout + status.stderr
        assert [c["state"] for c in json.loads(status.stdout)["cores"]] == ["running", "running"]
        # a client whose key is not on the allow-list gets nothing over that tcp relay
        stranger_keys = tmp_path / "stranger"
        stranger_keys.mkdir(mode=0o700)
        curve.create(stranger_keys, "client", role=None)
        shutil.copy(keys / "server.key", stranger_keys / "server.key")
        refused = run_or_show_stacks(vdsp + ["status", "--json"], dict(env, VDSP_KEYS_DIR=str(stranger_keys)), 60)
        assert refused.returncode != 0
    finally:
        down = subprocess.run(vdsp + ["down"], env=env, capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stdout + down.stderr
    for p in (relay, c0, c0 + 1, c1, c1 + 1):
        assert socket.socket().connect_ex(("127.0.0.1", p)) != 0, f"port {p} still open after vdsp down"

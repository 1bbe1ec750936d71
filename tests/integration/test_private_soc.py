"""vdsp_sim.soc.private_soc: the one way tests, benchmarks and samples start a SoC of their own.
It gets its own runtime and DDR directories, names them to this process only while it runs,
and leaves nothing behind; what it had to clean up is reported."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from arm_side import CORE_0, CORE_1, Soc, opids
from vdsp_sim.soc import private_soc as ps
from vdsp_board.memory import ddr
from vdsp_board.processes.pidfile import alive

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
NAMING = ("VDSP_RUNTIME_DIR", "VDSP_SHM_DIR", "VDSP_RELAY_ENDPOINT", "VDSP_CORE_ENDPOINTS", "VDSP_RPC_MODE",
          "VDSP_STRICT_CACHE")


def naming_env() -> dict:
    return {k: os.environ.get(k) for k in NAMING}


def test_two_private_socs_side_by_side_share_nothing_and_leave_nothing():
    before = naming_env()
    with ps.private_soc() as a:
        with Soc() as client:
            buf = client.mem.alloc(4096)
            assert client.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
            assert any(n.startswith("vdsp-") for n in os.listdir(a.ddr_dir))     # our buffer is in a's DDR dir
            buf.free()
        with ps.private_soc(mode="direct") as b:                                # a second SoC meanwhile
            assert b.rt != a.rt and b.ddr_dir != a.ddr_dir
            assert os.environ["VDSP_RUNTIME_DIR"] == str(b.rt) and os.environ["VDSP_RPC_MODE"] == "direct"
            with Soc() as client:
                assert client.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}
            pids_b = [b.pid(n) for n in ("relay", "vdsp0", "vdsp1")]
        assert not any(alive(p) for p in pids_b) and not b.rt.exists() and not b.ddr_dir.exists()
        assert os.environ["VDSP_RUNTIME_DIR"] == str(a.rt) and "VDSP_RPC_MODE" not in os.environ
        with Soc() as client:                                                   # a is not disturbed
            assert client.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}
        pids = [a.pid(n) for n in ("relay", "vdsp0", "vdsp1")]
        starters = [c for n in ("vdsp0", "vdsp1") for c in ps.children(a.pid(n))]
        firmware = starters + [f for s in starters for f in ps.children(s)]
        assert len(firmware) == 4       # each core's starter and the firmware it started
    assert not any(alive(p) for p in pids + firmware)
    assert not a.rt.exists() and not a.ddr_dir.exists()
    assert naming_env() == before


def test_given_directories_are_used_and_kept(tmp_path):
    rt = ps.fresh_runtime_dir()
    ddr_dir = tmp_path / "ddr"
    ddr_dir.mkdir(mode=0o700)
    try:
        with ps.private_soc(runtime_dir=rt, ddr_dir=ddr_dir, relay=False) as private:
            assert private.sup.procs.keys() == {"vdsp0", "vdsp1"} and private.relay_pid() is None
            with Soc(mode="direct") as client:
                client.mem.alloc(4096)
                assert client.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
        assert rt.is_dir() and ddr_dir.is_dir() and not list(rt.glob("*.sock"))
    finally:
        ddr.close_owner(str(ddr_dir))
        shutil.rmtree(rt, ignore_errors=True)


HOLDER = textwrap.dedent("""
    import time
    from arm_side.memory import MemoryManager
    MemoryManager().alloc(4096)
    print("ready", flush=True)
    time.sleep(60)
""")


def test_close_reports_what_it_had_to_clean_up(monkeypatch):
    """A leak (a DDR file whose owner still lives, a socket file nobody removed) is reported,
    and cleaned up all the same."""
    monkeypatch.setattr(ps, "GONE_WAIT_S", 0.5)
    private = ps.PrivateSoc()
    private.start()
    holder = None
    try:
        holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True,
                                  env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert holder.stdout.readline().strip() == "ready"
        stray = socket.socket(socket.AF_UNIX)
        stray.bind(str(private.rt / "stray.sock"))
        stray.close()
        problems = private.close()
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        private.close()
    assert any("DDR files leaked" in p for p in problems), problems
    assert any("socket files left" in p and "stray.sock" in p for p in problems), problems
    assert not private.rt.exists() and not private.ddr_dir.exists()
    assert private.close() == []            # closing again finds nothing more


def test_free_tcp_ports_are_outside_the_kernels_ephemeral_range():
    """The kernel may hand a port of its ephemeral range to any process's outgoing connection
    between the pick and the bind of the SoC's process (a `vdsp up` of the suite failed so): the
    ports, and with_next each one's next port, are picked outside it, distinct and free."""
    low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    room = (low - 1 - 10000) + (65535 - high - 1) >= 1000     # Linux's default range leaves 50 000 ports
    for with_next in (False, True):
        ports = ps.free_tcp_ports(4, with_next=with_next)
        taken = ports + [p + 1 for p in ports] if with_next else ports
        assert len(set(taken)) == len(taken), ports
        for port in taken:
            assert not room or not low <= port <= high and port >= 10000, (port, low, high)
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))

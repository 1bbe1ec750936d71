"""The owner proof on kernels without SO_PEERPIDFD (issue 35), each on a SoC of its own whose
servers are made to use it (``VDSP_IDENTITY_PROOF``): ``pidfd`` as on Linux 5.3-6.4 (Debian 12,
Ubuntu 22.04, RHEL 9), ``start-time`` as before 5.3 (RHEL 8's 4.18). On each:

- the README example runs in relay and in direct mode (before: every ipc claim was refused,
  ``HB_DSP_CLAIM_REFUSED`` in relay mode and ``HB_DSP_FOREIGN_HANDLE`` in direct mode);
- a client in another language proves its owner to the relay and to a firmware, a claim of
  another process's owner is refused, and so is a claim over a connection whose process exited;
- a killed client is dropped at once (liveness uses no pidfd);
- ``vdsp status`` names the proof the SoC uses.

The default proof (``SO_PEERPIDFD`` where the kernel has it) is what every other live module
runs on; a reused pid against each proof: tests/integration/test_live_identity.py.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from arm_side import CLEAN, CORE_1, CORE_ANY, INVALIDATE, Soc, opids
from tests.conftest import wait_until
from tests.live import LiveSoc
from tests.peers import CLAIM_REFUSED, Zmtp, orphan_connection, raw_client
from vdsp_board.memory import ddr

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=["pidfd", "start-time"])
def proof_soc(request):
    """A SoC whose relay and firmwares prove owners the way ``request.param`` says."""
    soc = LiveSoc(env={"VDSP_IDENTITY_PROOF": request.param})
    soc.start()
    soc.proof = request.param
    try:
        yield soc
    finally:
        soc.stop_and_check()


@pytest.mark.parametrize("mode", ["relay", "direct"])
def test_the_readme_example_runs(proof_soc, mode):
    with Soc(mode=mode, autostart_relay=False) as soc:
        src = soc.mem.alloc_cached(1 << 20)
        dst = soc.mem.alloc(1 << 20)
        src.array(np.uint8)[:] = 7
        src.flush(CLEAN)
        task = soc.rpc(cmd=opids.MEMCPY, inputs=[src], outputs=[dst], core=CORE_ANY, priority=0)
        assert task.wait(timeout_ms=10_000) == {"bytes": 1 << 20}
        soc.rpc(opids.FILL, outputs=[src], params={"value": 1}, core=CORE_1).wait(10_000)
        src.flush(INVALIDATE)
        assert (dst.array(np.uint8) == 7).all() and (src.array(np.uint8) == 1).all()


@pytest.mark.parametrize("endpoint", ["relay.sock", "vdsp0.fw.sock"])
def test_a_client_in_another_language_proves_its_owner_and_not_anothers(proof_soc, endpoint):
    url = f"ipc://{proof_soc.rt}/{endpoint}"
    for args in ((), ("--no-lock-fd",)):
        out = raw_client("--endpoint", url, *args)
        assert out["hello"] == "READY" and out["task"]["copied"], out
    theirs = ddr.current_owner().id         # this test process holds it; the raw client does not
    out = raw_client("--endpoint", url, "--claim", hex(theirs))
    assert out["hello"] == "ERROR" and out["code"] == CLAIM_REFUSED, out
    assert f"process {out['pid']} does not hold owner 0x{theirs:06x}'s lock" in out["message"], out


@pytest.mark.parametrize("endpoint", ["relay.sock", "vdsp0.fw.sock"])
def test_a_connection_whose_process_exited_claims_nothing(proof_soc, endpoint):
    conn, pid = orphan_connection(f"{proof_soc.rt}/{endpoint}")     # its process has exited; we kept its socket
    try:
        command, body = Zmtp(conn).ask(0x01, 1, {"role": "client", "owner": ddr.current_owner().id})
    finally:
        conn.close()
    assert command == 0x12 and body["code"] == CLAIM_REFUSED, body
    assert f"process {pid}, which opened this connection, has exited" in body["message"], body


CLIENT = """
import sys
from arm_side import Soc
soc = Soc(mode="relay", autostart_relay=False)
soc.mem.alloc(4096)
print("ready", flush=True)
sys.stdin.read()
"""


def test_a_killed_client_is_dropped_at_once_without_a_pidfd(proof_soc):
    """Liveness rests on no pidfd (under ``start-time`` none is ever opened): a client killed with
    SIGKILL is dropped by the relay when its connection closes and its process is gone, well
    before the 20 s hung deadline."""
    with Soc(mode="relay", autostart_relay=False) as watcher:
        before = watcher.query("stats")["clients"]
        client = subprocess.Popen([sys.executable, "-c", CLIENT], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        try:
            assert client.stdout.readline().strip() == "ready"
            assert wait_until(lambda: watcher.query("stats")["clients"] == before + 1, 10)
        finally:
            client.kill()
            client.wait()
        t0 = time.monotonic()
        assert wait_until(lambda: watcher.query("stats")["clients"] == before, 10), watcher.query("stats")
        assert time.monotonic() - t0 < 5


def test_vdsp_status_names_the_proof(proof_soc, capsys, monkeypatch):
    from vdsp_sim.commands import status
    monkeypatch.delenv("VDSP_IDENTITY_PROOF")           # the SoC's word, not this process's setting
    assert status.run(argparse.Namespace(json=False, timeout=60.0, verbose=False)) == 0
    out = capsys.readouterr().out
    line = next((x for x in out.splitlines() if x.startswith("identity: ")), out)
    said = {"pidfd": "a pidfd taken at accept", "start-time": "the connection's client end among /proc/PID/fd"}
    assert f"VDSP_IDENTITY_PROOF={proof_soc.proof}" in line and said[proof_soc.proof] in line, line

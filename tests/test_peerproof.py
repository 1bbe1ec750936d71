"""The pieces of the identity proofs (vdsp_board.peerproof) on real processes and sockets: a
process's start time, a pin that tells the pinned process from a later holder of its pid, the
accept records an admission thread writes (on a path and an abstract ipc endpoint), and which proof
a host uses (VDSP_IDENTITY_PROOF)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest
import zmq

from protocol import errors
from vdsp_board import peercred, peerproof
from vdsp_board.admission import Admission
from vdsp_board.peerproof import Accepted, Gone, Pin, Proof, start_time

PIN_PROOFS = [p for p in (Proof.PIDFD, Proof.START_TIME) if p.rank >= peerproof.kernel_proof().rank]


def test_start_time_is_field_22_and_none_once_a_process_exited():
    with open("/proc/self/stat") as fh:
        assert start_time(os.getpid()) == int(fh.read().rpartition(")")[2].split()[19])
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    assert start_time(child.pid) is not None
    child.stdin.close()
    deadline = time.monotonic() + 30
    while start_time(child.pid) is not None and time.monotonic() < deadline:     # a zombie has exited too
        time.sleep(0.01)
    assert start_time(child.pid) is None
    child.wait()
    assert start_time(child.pid) is None


@pytest.mark.parametrize("proof", PIN_PROOFS)
def test_a_pin_holds_its_process_only(proof):
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        start = start_time(child.pid)
        assert start is not None
        with pytest.raises(Gone):
            Pin.take(child.pid, start + 1, proof)      # another start time: another process with that pid
        pin = Pin.take(child.pid, start, proof)
        assert pin.alive() and (pin.pidfd is not None) is (proof is Proof.PIDFD)
        child.stdin.close()
        child.wait()
        assert not pin.alive()
        pin.close()
        with pytest.raises(Gone):
            Pin.take(child.pid, start, proof)
    finally:
        child.kill()
        child.wait()


def test_accept_records_are_keyed_by_the_socket_waited_for_and_bounded():
    records = Accepted(limit=2)
    pairs = [socket.socketpair() for _ in range(3)]
    try:
        ours = pairs[0][0]
        inode = os.fstat(ours.fileno()).st_ino
        assert records.wait(inode, 0.05) is None                 # nothing recorded: None after the wait
        threading.Timer(0.2, records.record, (ours,)).start()    # the admission thread records it later
        t0 = time.monotonic()
        rec = records.wait(inode, 10)
        assert rec is not None and time.monotonic() - t0 < 5
        assert (rec.pid, rec.uid, rec.start) == (os.getpid(), os.getuid(), start_time(os.getpid()))
        records.forget(ours.fileno())                            # the connection closed
        assert records.wait(inode, 0) is None
        for a, _ in pairs:
            records.record(a)
        assert len(records) == 2 and records.wait(inode, 0) is None       # the oldest went first
    finally:
        for a, b in pairs:
            a.close()
            b.close()


def test_the_setting_lowers_the_proof_and_says_so(monkeypatch):
    kernel = peerproof.kernel_proof()
    monkeypatch.delenv("VDSP_IDENTITY_PROOF", raising=False)
    assert peerproof.host_proof() is kernel and "VDSP_IDENTITY_PROOF" not in peerproof.describe()
    monkeypatch.setenv("VDSP_IDENTITY_PROOF", "start-time")
    assert peerproof.host_proof() is Proof.START_TIME and peerproof.accept_records() is not None
    assert peerproof.describe().endswith(f"(Linux {peerproof.kernel_release()}; VDSP_IDENTITY_PROOF=start-time)")
    monkeypatch.setenv("VDSP_IDENTITY_PROOF", "peer-pidfd")          # never above what the kernel has
    assert peerproof.host_proof() is kernel
    monkeypatch.setenv("VDSP_IDENTITY_PROOF", "sock-diag")
    with pytest.raises(errors.InvalidArgument) as info:
        peerproof.host_proof()
    assert "peer-pidfd, pidfd, start-time" in info.value.message


def test_the_kernel_probe_finds_at_least_what_the_release_has():
    major, minor = (int(x) for x in peerproof.kernel_release().split("."))
    has = Proof.PEER_PIDFD if (major, minor) >= (6, 5) else Proof.PIDFD if (major, minor) >= (5, 3) \
        else Proof.START_TIME
    assert peerproof.kernel_proof().rank <= has.rank      # a vendor kernel may have more (backports)


@pytest.mark.parametrize("where", ["path", "abstract"])
def test_an_admission_thread_records_who_connected(tmp_path, where):
    endpoint = f"ipc://{tmp_path}/s" if where == "path" else f"ipc://@vdsp-test-{os.getpid()}-{time.monotonic_ns()}"
    records = Accepted()
    ctx = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    admission = Admission(router, "test", max_frame=1 << 20, accepted=records)
    try:
        router.bind(endpoint)
        dealer.connect(endpoint)
        dealer.send(b"x")
        frame = router.recv(copy=False)
        rec = records.wait(peercred.connection_inode(frame), 10)
        assert rec is not None and (rec.pid, rec.start) == (os.getpid(), start_time(os.getpid()))
    finally:
        admission.stop()
        router.close(0)
        dealer.close(0)
        ctx.term()

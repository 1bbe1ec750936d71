"""The pieces of the identity proofs (vdsp_board.identity.peerproof) on real processes and sockets: a
process's start time, a pin that tells the pinned process from a later holder of its pid, the
accept records an admission thread writes (on a path and an abstract ipc endpoint) and the pins
taken from them (a pidfd taken at accept; a start time waited out, with the connection's client
end found by sock_diag among the process's fds: vdsp_board.identity.sockdiag), and which proof a host uses
(VDSP_IDENTITY_PROOF)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
import zmq

from protocol import errors
from tests.peers import Forker
from tests.privilege import require
from vdsp_board.identity import peercred, peerproof, sockdiag
from vdsp_board.identity.admission import Admission
from vdsp_board.identity.peerproof import Accepted, Gone, Pin, Proof, start_time

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


def test_a_start_time_pin_holds_its_process_only():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        start = start_time(child.pid)
        assert start is not None
        with pytest.raises(Gone):
            Pin.take(child.pid, start + 1)      # another start time: another process with that pid
        pin = Pin.take(child.pid, start)
        assert pin.alive() and pin.pidfd is None
        child.stdin.close()
        child.wait()
        assert not pin.alive()
        with pytest.raises(Gone):
            Pin.take(child.pid, start)
    finally:
        child.kill()
        child.wait()


@pytest.fixture
def listener(short_dir):
    """A listening unix socket, as ZeroMQ's ipc endpoint is, and its path."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(short_dir / "l.sock"))
    sock.listen(8)
    yield sock, str(short_dir / "l.sock")
    sock.close()


@pytest.fixture
def connection(listener):
    """A connection to :func:`listener`: (our client end, the accepted socket)."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(listener[1])
    accepted, _ = listener[0].accept()
    yield client, accepted
    client.close()
    accepted.close()


@pytest.mark.parametrize("proof", PIN_PROOFS)
def test_a_record_pins_the_process_that_connected_until_it_exits(listener, proof):
    """Each connection of a process forked just now (it claims within its own start tick: the
    start-time pin waits that tick out): pinned while it lives, Gone once it exited."""
    sock, path = listener
    records = Accepted(proof)
    forker = Forker()
    try:
        conn, pid = forker.connect(path)
        accepted, _ = sock.accept()
        inode = os.fstat(accepted.fileno()).st_ino
        records.record(accepted)
        rec = records.wait(inode, 0)
        assert rec is not None and rec.pid == pid and (rec.pidfd is not None) is (proof is Proof.PIDFD)
        started = start_time(pid)
        with pytest.raises(Gone):
            records.pin(inode, pid + 1)                 # the connection came from another pid
        pin = records.pin(inode, pid)
        assert pin.alive()
        if proof is Proof.START_TIME:
            assert started is not None and time.clock_gettime_ns(time.CLOCK_BOOTTIME) // peerproof.TICK_NS >= started + 2
            assert rec.peer == os.fstat(conn.fileno()).st_ino       # the client's end, by sock_diag
        forker.release()                                # it exits; we still hold its socket
        assert not pin.alive()
        pin.close()
        with pytest.raises(Gone):
            records.pin(inode, pid)
        records.forget(accepted.fileno())
        assert rec.pidfd is None                        # the record's pidfd closed with the connection
        with pytest.raises(peerproof.NotRecorded):
            records.pin(inode, pid, 0)
        accepted.close()
        conn.close()
    finally:
        forker.close()
        records.clear()


def test_a_start_time_pin_needs_the_connection_among_the_process_fds(connection):
    """The process with the recorded pid and start time (here: our own) that does not hold the
    connection's client end (as if it had handed it over and closed its copy)."""
    client, accepted = connection
    records = Accepted(Proof.START_TIME)
    inode = os.fstat(accepted.fileno()).st_ino
    records.record(accepted)
    records.pin(inode, os.getpid()).close()         # we hold the client's end: pinned
    moved = socket.socket(fileno=os.dup(client.fileno()))
    client.close()
    records.pin(inode, os.getpid()).close()         # through another fd just as well
    moved.close()                                   # no fd of ours holds it now
    with pytest.raises(Gone) as info:
        records.pin(inode, os.getpid())
    assert "does not hold the connection's client end" in info.value.strerror


@pytest.mark.skipif(Proof.PIDFD not in PIN_PROOFS, reason="this kernel has no pidfd_open (Linux < 5.3)")
def test_a_pidfd_record_closes_its_pidfd_when_it_is_pushed_out():
    records = Accepted(Proof.PIDFD, limit=1)
    pairs = [socket.socketpair() for _ in range(2)]
    try:
        records.record(pairs[0][0])
        first = records.wait(os.fstat(pairs[0][0].fileno()).st_ino, 0)
        assert first is not None and first.pidfd is not None
        records.record(pairs[1][0])                     # the oldest goes first, and its pidfd with it
        assert first.pidfd is None and len(records) == 1
    finally:
        records.clear()
        for a, b in pairs:
            a.close()
            b.close()


def test_without_unix_diag_start_time_proves_nothing_and_says_so(connection, monkeypatch):
    """A kernel that answers no unix_diag lookup (faked: the probe's answer) refuses, never falls back."""
    why = "sock_diag cannot look up unix sockets (No such file or directory): the kernel lacks unix_diag"
    monkeypatch.setattr(sockdiag, "unavailable", lambda: why)
    _, accepted = connection
    records = Accepted(Proof.START_TIME)
    records.record(accepted)
    with pytest.raises(OSError) as info:
        records.pin(os.fstat(accepted.fileno()).st_ino, os.getpid())
    assert not isinstance(info.value, Gone) and info.value.strerror == why
    assert f"every ipc claim is refused: {why}" in peerproof.describe(Proof.START_TIME)
    assert "refused" not in peerproof.describe(Proof.PIDFD)


def test_sock_diag_names_the_other_end_of_a_unix_socket(connection):
    require(sockdiag.unavailable())
    a, b = socket.socketpair()
    assert sockdiag.peer_inode(os.fstat(a.fileno()).st_ino) == os.fstat(b.fileno()).st_ino
    client, accepted = connection
    assert sockdiag.peer_inode(os.fstat(accepted.fileno()).st_ino) == os.fstat(client.fileno()).st_ino
    client.close()
    assert sockdiag.peer_inode(os.fstat(accepted.fileno()).st_ino) == 0          # its other end is gone
    assert peercred.holds_socket(os.getpid(), os.fstat(a.fileno()).st_ino)
    assert not peercred.holds_socket(os.getppid(), os.fstat(a.fileno()).st_ino)
    closed = os.fstat(a.fileno()).st_ino
    a.close()
    b.close()
    assert sockdiag.peer_inode(closed) is None                  # no socket has that inode now
    with pytest.raises(peercred.TooManyFds):                    # fds looked through up to a bound, never further
        peercred.holds_socket(os.getpid(), closed, limit=1)


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
def test_an_admission_thread_records_who_connected(short_dir, where):
    endpoint = f"ipc://{short_dir}/s" if where == "path" else f"ipc://@vdsp-test-{os.getpid()}-{time.monotonic_ns()}"
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

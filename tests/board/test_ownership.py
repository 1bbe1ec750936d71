"""Ownership without processes of the SoC: the access-list format and rule (protocol.acl), owner
proofs from the connecting process alone, pinned by each proof this kernel offers, and its
/proc/PID/fdinfo (vdsp_board.identity.peercred, vdsp_board.identity.peerproof, vdsp_board.identity.ownership), access-list
files (vdsp_board.memory.acl) and reserved handle flags."""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import msgpack
import pytest
import zmq

from protocol import acl as rule, errors, messages, wire
from vdsp_board.memory import acl, ddr
from vdsp_board.identity import peercred, peerproof
from vdsp_board.identity.admission import Admission
from vdsp_board.identity.bindings import Bindings
from vdsp_board.identity.ownership import RELAY, Ownership

ROOT = Path(__file__).resolve().parents[2]
ME, OTHER, THIRD = 0x0000a1, 0x0000b2, 0x0000c3


def phys(owner: int, offset: int) -> int:
    return (owner << 40) | offset


# --- protocol.acl: the rule ---------------------------------------------------------------------

def grants_of(table: dict):
    return lambda owner: table.get(owner, ())


def test_own_memory_is_allowed_and_a_body_owner_is_not_consulted():
    body = {"inputs": [[phys(ME, 0x1000), 64, 0]], "outputs": [[phys(ME, 0x2000), 64, 1]], "owner": OTHER}
    rule.check_task(body, ME, grants_of({}))
    with pytest.raises(errors.ForeignHandle) as info:
        rule.check_task(body, OTHER, grants_of({}))     # what the body says does not matter
    assert info.value.code == -6000283 and "inputs[0]" in info.value.message and not info.value.unbound


def test_no_verified_owner_means_no_memory_at_all():
    with pytest.raises(errors.ForeignHandle) as info:
        rule.check_task({"outputs": [[phys(ME, 0x1000), 1, 0]]}, None, grants_of({ME: (rule.AclEntry(0x1000, 1),)}))
    assert "send HELLO" in info.value.message and info.value.unbound    # rule 1: says so on the wire
    rule.check_task({"inputs": [], "outputs": [], "params": {"x": 1}}, None, grants_of({}))   # a PING is fine


@pytest.mark.parametrize("grant, offset, size, ok", [
    (rule.AclEntry(0x1000, 4096, ME), 0x1000, 4096, True),
    (rule.AclEntry(0x1000, 4096, rule.ANY), 0x1800, 2048, True),
    (rule.AclEntry(0x1000, 4096, ME), 0x1000, 4097, False),      # runs past the grant
    (rule.AclEntry(0x1000, 4096, ME), 0x0fff, 2, False),         # starts before it
    (rule.AclEntry(0x1000, 4096, THIRD), 0x1000, 1, False),      # granted to someone else
])
def test_a_grant_covers_its_range_for_its_grantee(grant, offset, size, ok):
    body = {"inputs": [[phys(OTHER, offset), size, 0]]}
    if ok:
        rule.check_task(body, ME, grants_of({OTHER: (grant,)}))
    else:
        with pytest.raises(errors.ForeignHandle) as info:
            rule.check_task(body, ME, grants_of({OTHER: (grant,)}))
        assert f"0x{OTHER:06x}" in info.value.message and f"0x{ME:06x}" in info.value.message


def test_inputs_are_checked_before_outputs():
    body = {"inputs": [[phys(ME, 0x1000), 1, 0], [phys(OTHER, 0x1000), 1, 0]],
            "outputs": [[phys(THIRD, 0x1000), 1, 0]]}
    with pytest.raises(errors.ForeignHandle) as info:
        rule.check_task(body, ME, grants_of({}))
    assert info.value.message.startswith("inputs[1]")


def test_access_list_round_trip_and_limits():
    lst = rule.AccessList(77, (rule.AclEntry(0x1000, 10, 0), rule.AclEntry(0x2000, 5, ME)), "k" * 40)
    assert rule.decode(rule.encode(lst)) == lst
    many = rule.AccessList(1, tuple(rule.AclEntry(0x1000, 1, i) for i in range(rule.MAX_GRANTS + 1)))
    with pytest.raises(errors.InvalidArgument):
        rule.encode(many)
    bad = [msgpack.packb([1]), msgpack.packb({"lock": "x"}), msgpack.packb({"lock": 1, "grants": [[1, 2]]}),
           msgpack.packb({"lock": 1, "grants": [[0, 1, 0]]}), msgpack.packb({"lock": 1, "key": "short"}),
           msgpack.packb({"lock": 1, "grants": [[0x1000, 1, 1 << 22]]}), b"\x80" * (rule.MAX_ACL_BYTES + 1),
           msgpack.packb({"lock": 1, "grants": [[0x1000, 1, 0]] * (rule.MAX_GRANTS + 1)})]
    for data in bad:
        with pytest.raises(errors.VdspError):
            rule.decode(data)


# --- reserved flags ----------------------------------------------------------------------------------

@pytest.mark.parametrize("flags", [2, 4, 0xFF, 1 << 63])
def test_reserved_handle_flags_are_invalid_arguments(flags):
    msg = messages.task(1, 2, inputs=[], outputs=[[phys(ME, 0x1000), 8, flags]], params={"value": 1})
    with pytest.raises(errors.InvalidArgument) as info:
        messages.check_body(wire.decode(wire.encode(msg)))
    assert info.value.code == -6000001 and "reserved" in info.value.message and "outputs[0]" in info.value.message
    for ok in (0, 1):
        msg.body["outputs"][0][2] = ok
        messages.check_body(wire.decode(wire.encode(msg)))


# --- vdsp_board.identity.peercred ------------------------------------------------------------------------------------

def test_peer_pid_parses_ipc_addresses_only():
    assert peercred.peer_pid("localhost:0:0:4242") == 4242
    for address in (None, "", "127.0.0.1", "localhost:0:0", "localhost:0:0:x", "localhost:0:0:0", "10.0.0.1:1:2:3"):
        assert peercred.peer_pid(address) is None


def test_fdinfo_lock_lines_count_exclusive_flocks_of_that_file_only(tmp_path):
    ident = (0, 0x1b, 5156)
    fdinfo = tmp_path / "77" / "fdinfo"
    fdinfo.mkdir(parents=True)
    lines = {3: "lock:\t1: POSIX  ADVISORY  WRITE 10 00:1b:5156 0 EOF",
             4: "lock:\t1: FLOCK  ADVISORY  READ 11 00:1b:5156 0 EOF",
             5: "lock:\t1: FLOCK  ADVISORY  WRITE 12 00:1b:5157 0 EOF",
             6: "lock:\t1: OFDLCK ADVISORY  WRITE -1 00:1b:5156 0 EOF",
             7: "lock:\t1: FLOCK  ADVISORY  WRITE 99 00:1b:5156 0 EOF"}       # taken by another pid: still held here
    for fd, line in lines.items():
        (fdinfo / str(fd)).write_text(f"pos:\t0\nflags:\t02\nmnt_id:\t4\nino:\t5156\n{line}\n")
    proc = str(tmp_path)
    assert [fd for fd in lines if peercred.fd_holds_exclusive_flock(77, fd, ident, proc)] == [7]
    assert not peercred.fd_holds_exclusive_flock(77, 9, ident, proc)              # no such fd
    assert peercred.holds_exclusive_flock(77, ident, proc=proc)                   # found by a scan
    with pytest.raises(peercred.TooManyFds):
        peercred.holds_exclusive_flock(77, ident, proc=proc, limit=2)
    with pytest.raises(OSError):
        peercred.fd_holds_exclusive_flock(78, 7, ident, proc)                     # no such process


def test_holds_exclusive_flock_on_the_real_fdinfo(tmp_path):
    path = tmp_path / "x.lock"
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        ident = peercred.lock_identity(str(path))
        assert not peercred.holds_exclusive_flock(os.getpid(), ident)
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert peercred.holds_exclusive_flock(os.getpid(), ident)
        assert peercred.holds_exclusive_flock(os.getpid(), ident, fd)
        assert not peercred.holds_exclusive_flock(os.getpid(), ident, 0)           # another fd of ours
        assert not peercred.holds_exclusive_flock(os.getppid(), ident)
    finally:
        os.close(fd)
    os.symlink(path, tmp_path / "link")
    assert peercred.lock_identity(str(tmp_path / "link")) is None       # never through a symlink


# --- vdsp_board.identity.ownership: HELLO claims over a real ipc connection ------------------------------------------

PROOFS = [p.value for p in peerproof.Proof if p.rank >= peerproof.kernel_proof().rank]


class Ipc:
    """A ROUTER/DEALER pair over ipc whose ROUTER has a server's admission thread (which records
    each connection's accept for the proofs that need it): :meth:`hello` sends a message and
    returns the frame that carries its metadata; ``accepted`` goes to the Ownership under test."""

    def __init__(self, endpoint: str) -> None:
        self.accepted = peerproof.accept_records()
        self.ctx = zmq.Context()
        self.router, self.dealer = self.ctx.socket(zmq.ROUTER), self.ctx.socket(zmq.DEALER)
        self.admission = Admission(self.router, "test", max_frame=1 << 20, accepted=self.accepted)
        self.router.bind(endpoint)
        self.dealer.connect(endpoint)

    def __call__(self, body: dict):
        self.dealer.send_multipart([b"h", b"b"])
        meta = self.router.recv(copy=False)
        self.router.recv_multipart()
        return meta

    def close(self) -> None:
        self.admission.stop()
        self.router.close(0)
        self.dealer.close(0)
        self.ctx.term()


@pytest.fixture(params=PROOFS)
def ipc(request, short_dir, monkeypatch):
    """An :class:`Ipc` pair, once per identity proof this kernel offers (VDSP_IDENTITY_PROOF); its
    socket in a short directory (under a normal user's long TMPDIR, tmp_path and a long test name
    are past a unix socket path's 107 characters)."""
    monkeypatch.setenv("VDSP_IDENTITY_PROOF", request.param)
    pair = Ipc(f"ipc://{short_dir}/t.sock")
    yield pair
    pair.close()


HOLDER = textwrap.dedent("""
    import sys
    from vdsp_board.memory import ddr
    print(ddr.current_owner().id, flush=True)
    sys.stdin.read()
""")


def test_a_claim_is_verified_against_the_process_holding_the_lock(shm, ipc, tmp_path):
    judge = Ownership("test", accept_relay=True, rt=tmp_path, accepted=ipc.accepted)
    me = ddr.current_owner().id
    assert judge.claim({"role": "client", "owner": me}, ipc({})) == me
    assert judge.claim({"role": "client"}, ipc({})) is None
    assert judge.claim({"role": "client", "owner": 0}, ipc({})) is None
    child = subprocess.Popen([sys.executable, "-c", HOLDER], cwd=ROOT, text=True, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        theirs = int(child.stdout.readline())
        with pytest.raises(errors.ClaimRefused) as info:
            judge.claim({"role": "client", "owner": theirs}, ipc({}))
        assert info.value.code == -6000284 and f"process {os.getpid()} does not hold" in info.value.message
    finally:
        child.communicate("", timeout=30)
    for bad in (-1, 1 << 22, True, "1", 0x3FFFFE):      # not ids, or nobody's
        with pytest.raises(errors.ClaimRefused):
            judge.claim({"role": "client", "owner": bad}, ipc({}))
    with pytest.raises(errors.ClaimRefused):            # no credentials at all: nothing is taken on trust
        judge.claim({"role": "client", "owner": me}, None)


def test_the_relay_role_needs_the_relay_pid_file(ipc, tmp_path):
    judge = Ownership("test", accept_relay=True, rt=tmp_path, accepted=ipc.accepted)
    with pytest.raises(errors.ClaimRefused):
        judge.claim({"role": "relay"}, ipc({}))
    (tmp_path / "relay.pid").write_text(f"{os.getppid()}\n")
    with pytest.raises(errors.ClaimRefused) as info:
        judge.claim({"role": "relay"}, ipc({}))
    assert "relay.pid" in info.value.message
    (tmp_path / "relay.pid").write_text(f"{os.getpid()}\n")
    assert judge.claim({"role": "relay"}, ipc({})) == RELAY
    judge.check_task(RELAY, {"inputs": [[phys(OTHER, 0x1000), 1, 0]]})     # the relay checked it
    assert Ownership("front", accepted=ipc.accepted).claim({"role": "relay"}, ipc({})) is None   # elsewhere: a name


def test_bindings_are_bounded_least_recently_used_first():
    b = Bindings(limit=3)
    for i in range(3):
        b.set(bytes([i]), i + 1)
    assert b.get(b"\x00") == 1          # now the most recent
    b.set(b"\x09", 9)
    assert len(b) == 3 and b.get(b"\x01") is None and b.get(b"\x00") == 1
    b.set(b"\x00", None)
    assert b.get(b"\x00") is None and len(b) == 2


# --- vdsp_board.memory.acl: files ----------------------------------------------------------------------------------

def test_reader_ignores_unusable_lists(shm):
    me = ddr.current_owner()
    reader = acl.Reader()
    path = shm / acl.acl_name(me.id)
    token = acl.own_list(me).grant(0x1000, 10, 0)
    assert reader.grants(me.id) == (rule.AclEntry(0x1000, 10, 0),)
    good = path.read_bytes()
    for data in (b"garbage", b"\x80" * (rule.MAX_ACL_BYTES + 1), rule.encode(rule.AccessList(1, ()))):
        path.write_bytes(data)          # not msgpack, too large, written for another lock file
        assert reader.grants(me.id) == ()
    path.unlink()
    os.symlink(shm / "elsewhere", path)
    (shm / "elsewhere").write_bytes(good)
    assert reader.grants(me.id) == ()   # a symlink is not a list
    path.unlink()
    acl.own_list(me).revoke(token)
    assert not path.exists() and reader.grants(0) == () and reader.grants(1 << 22) == ()


DYING = textwrap.dedent("""
    import os, sys
    from vdsp_board.memory import acl, ddr
    owner = ddr.current_owner()
    acl.own_list(owner).grant(0x1000, 4096, 0)
    print(owner.id, flush=True)
    sys.stdin.read()
    os._exit(0)             # as if killed: nothing cleaned up
""")


def test_a_dead_owners_grants_are_void_before_they_are_reaped(shm):
    child = subprocess.Popen([sys.executable, "-c", DYING], cwd=ROOT, text=True, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    owner = int(child.stdout.readline())
    reader = acl.Reader()
    assert reader.grants(owner) == (rule.AclEntry(0x1000, 4096, 0),)
    child.communicate("", timeout=30)
    assert (shm / acl.acl_name(owner)).exists()         # still there...
    assert reader.grants(owner) == ()                   # ...but void: nobody holds the owner's lock
    ddr.reap()
    assert not (shm / acl.acl_name(owner)).exists() and not (shm / ddr.lock_name(owner)).exists()

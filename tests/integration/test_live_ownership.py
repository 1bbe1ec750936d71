"""Memory ownership is proven, not claimed: a client uses its own buffers and what others grant it.

Before, the relay and the firmwares took a TASK body's ``owner`` and a handle's REGISTERED
flag on trust: client B read and overwrote client A's buffer by putting A's owner id in the
body, by setting the flag, or by claiming A's owner id in its HELLO (physical addresses are
visible in /dev/shm names). Here A is another process with a secret in a buffer, B this test
process; every way in is tried in relay and direct mode, then A grants and revokes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import pytest
import zmq

from arm_side import ANY_OWNER, CORE_0, CORE_1, Soc, errors, opids
from arm_side.client import Client
from arm_side.transport import ZmqTransport
from protocol import messages, wire
from protocol.task_options import TaskOptions
from vdsp_board.memory import acl, ddr
from tests.conftest import wait_until

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
SECRET = (b"A's secret bytes" * 256)[:4096]
FOREIGN, CLAIM_REFUSED, INVALID_ARGUMENT = -6000283, -6000284, -6000001

OWNER_A = textwrap.dedent("""
    import sys
    from arm_side.memory import MemoryManager
    mm = MemoryManager()
    buf = mm.alloc(4096)
    buf.write(sys.stdin.buffer.read(4096))
    print(buf.phys_addr, mm.owner_id, flush=True)
    grants, soc = [], None
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "share":            # share TO OFFSET SIZE
            grants.append(buf.share(to=int(cmd[1]), offset=int(cmd[2]), size=int(cmd[3])))
        elif cmd[0] == "revoke":         # the last grant
            grants.pop().revoke()
        elif cmd[0] == "read":
            print(buf.read().hex(), flush=True)
            continue
        elif cmd[0] == "connect":        # connect MODE: A uses its own buffer through the SoC
            from arm_side import Soc, opids
            soc = Soc(mode=cmd[1], autostart_relay=False)
            print(soc.call(opids.CHECKSUM, inputs=[buf])["crc32"], flush=True)
            continue
        print("ok", flush=True)
""")


class OwnerA:
    """Client A: another process owning a 4096-byte buffer that holds SECRET."""

    def __init__(self, env: dict | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", OWNER_A], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=dict(env or os.environ, PYTHONPATH=str(ROOT)))
        self.proc.stdin.write(SECRET)
        self.proc.stdin.flush()
        phys, owner = self.proc.stdout.readline().split()
        self.phys, self.owner = int(phys), int(owner)

    def ask(self, line: str) -> str:
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().decode().strip()

    def share(self, to: int, offset: int = 0, size: int = 4096) -> None:
        assert self.ask(f"share {to} {offset} {size}") == "ok"

    def revoke(self) -> None:
        assert self.ask("revoke") == "ok"

    def content(self) -> bytes:
        return bytes.fromhex(self.ask("read"))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(30)


@pytest.fixture
def owner_a(shared_soc):
    a = OwnerA()
    yield a
    a.close()


def refused(code: int, fn, *args, **kw) -> errors.VdspError:
    with pytest.raises(errors.VdspError) as info:
        fn(*args, **kw)
    assert info.value.code == code, info.value
    return info.value


def read_a(soc: Soc, a: OwnerA, size: int = 4096, core=CORE_0) -> dict:
    return soc.call(opids.CHECKSUM, inputs=[(a.phys, size)], core=core)


def write_a(soc: Soc, a: OwnerA, value: int, size: int = 4096, flags: int = 0, core=CORE_1) -> dict:
    return soc.call(opids.FILL, outputs=[(a.phys, size, flags)], params={"value": value}, core=core)


def assert_untouched(soc: Soc, a: OwnerA) -> None:
    assert a.content() == SECRET
    assert soc.call(opids.PING, core=CORE_0) == {"core": "vdsp0"}      # and everyone keeps serving


# --- the three ways in, closed ---------------------------------------------------------------------

def test_the_owner_in_a_task_body_grants_nothing(mode_soc, owner_a):
    soc, a = mode_soc, owner_a
    soc.client.owner = a.owner          # every TASK body now says owner = A, as an attacker would write it
    try:
        err = refused(FOREIGN, read_a, soc, a)
        assert f"0x{a.phys:x}" in err.message and f"0x{a.owner:06x}" in err.message
        refused(FOREIGN, write_a, soc, a, 0xEE)
        refused(FOREIGN, soc.call, opids.MEMCPY, inputs=[(a.phys, 4096)], outputs=[soc.mem.alloc(4096)])
    finally:
        soc.client.owner = soc.mem.owner_id
    assert_untouched(soc, a)


def test_the_registered_flag_grants_nothing(mode_soc, owner_a):
    soc, a = mode_soc, owner_a
    refused(FOREIGN, soc.call, opids.CHECKSUM, inputs=[(a.phys, 4096, 1)])
    err = refused(FOREIGN, write_a, soc, a, 0xEE, flags=1)
    assert "not granted" in err.message
    with pytest.raises(errors.SysRegisterMemFailed):        # nor can B register it to get the flag
        soc.mem.register(a.phys, 4096)
    assert_untouched(soc, a)


def claim_owner(mode: str, a: "OwnerA") -> errors.VdspError:
    """Connect with the SDK claiming A's owner id; the error the claim gets. In relay mode the
    relay refuses the HELLO, so the connection fails; in direct mode the SDK does not wait for
    the firmwares' answers (one may be busy with a long task): their refusal then stops every
    task with buffers sent there."""
    if mode == "relay":
        with pytest.raises(errors.VdspError) as info:
            Client(ZmqTransport(mode, autostart_relay=False), owner=a.owner, connect_timeout_s=5)
        return info.value
    client = Client(ZmqTransport(mode, autostart_relay=False), owner=a.owner, connect_timeout_s=5)
    try:
        with pytest.raises(errors.VdspError) as info:
            client.peers[0].fw_hello.wait(5000)
        for core in (CORE_0, CORE_1):
            with pytest.raises(errors.VdspError) as task_info:
                client.submit(opids.FILL, [], [[a.phys, 4096, 0]], {"value": 0xEE}, TaskOptions(core=core)).wait(5000)
            assert task_info.value.code in (CLAIM_REFUSED, FOREIGN), task_info.value
        assert client.submit(opids.PING, [], [], {}, TaskOptions(core=CORE_0)).wait(5000) == {"core": "vdsp0"}
        return info.value
    finally:
        client.close()


@pytest.mark.parametrize("mode", ["relay", "direct"])
def test_claiming_another_owner_in_hello_is_refused(shared_soc, owner_a, mode):
    a = owner_a
    err = claim_owner(mode, a)                  # the SDK's own HELLO, with A's id
    assert err.code == CLAIM_REFUSED, err
    assert f"0x{a.owner:06x}" in err.message and f"does not hold owner 0x{a.owner:06x}'s lock" in err.message
    endpoint = "relay.sock" if mode == "relay" else "vdsp0.fw.sock"
    raw = Raw(f"ipc://{shared_soc.rt}/{endpoint}")
    try:    # a bare connection: the refused claim leaves it without an owner
        reply = raw.ask(messages.hello(1, "client", owner=a.owner))
        assert reply.command is wire.Command.ERROR and reply.body["code"] == CLAIM_REFUSED
        reply = raw.ask(messages.task(2, opids.FILL, inputs=[], outputs=[[a.phys, 4096, 0]], params={"value": 1},
                                      owner=a.owner))
        assert reply.body["code"] == FOREIGN and "send HELLO" in reply.body["message"]
        reply = raw.ask(messages.hello(3, "relay"))       # nor may a client pose as the relay at a firmware
        if mode == "direct":
            assert reply.body["code"] == CLAIM_REFUSED and "relay.pid" in reply.body["message"]
        reply = raw.ask(messages.task(4, opids.FILL, inputs=[], outputs=[[a.phys, 4096, 0]], params={"value": 1}))
        assert reply.body["code"] == FOREIGN
    finally:
        raw.close()
    with Soc(mode=mode) as soc:
        assert_untouched(soc, a)
    server = "relay" if mode == "relay" else "vdsp0"    # a firmware logs into its core's log
    assert wait_until(lambda: "refused the HELLO" in shared_soc.log(server), 5)


# --- grants ------------------------------------------------------------------------------------------

def test_b_uses_a_buffer_after_a_grants_it_and_not_after_a_revokes(mode_soc, owner_a):
    soc, a = mode_soc, owner_a
    a.share(to=soc.mem.owner_id)
    assert read_a(soc, a)["crc32"] == zlib.crc32(SECRET)            # B reads A's buffer
    assert write_a(soc, a, 0x42, size=16, core=CORE_0) == {"bytes": 16}   # and writes it
    assert a.content()[:16] == b"\x42" * 16
    mem = soc.mem.register(a.phys, 4096)                            # hbSysRegisterMem works within the grant
    assert soc.call(opids.FILL, outputs=[mem], params={"value": 7, "size": 8}) == {"bytes": 8}
    mem.flush(1)
    assert mem.read(9) == b"\x07" * 8 + b"\x42"
    soc.mem.unregister(mem)
    a.revoke()
    refused(FOREIGN, read_a, soc, a)
    refused(FOREIGN, write_a, soc, a, 0xEE)
    with pytest.raises(errors.SysRegisterMemFailed):
        soc.mem.register(a.phys, 4096)
    assert a.content()[:9] == b"\x07" * 8 + b"\x42"


def test_a_grant_covers_its_range_and_its_grantee_only(mode_soc, owner_a):
    soc, a = mode_soc, owner_a
    a.share(to=soc.mem.owner_id ^ 1)                                  # to someone else
    refused(FOREIGN, read_a, soc, a)
    a.share(to=soc.mem.owner_id, offset=0, size=1024)                 # the first KiB, to B
    assert read_a(soc, a, size=1024)["crc32"] == zlib.crc32(SECRET[:1024])
    refused(FOREIGN, read_a, soc, a, size=1025)
    refused(FOREIGN, soc.call, opids.CHECKSUM, inputs=[(a.phys + 1024, 16)])
    a.share(to=ANY_OWNER, offset=2048, size=2048)                     # the second half, to anyone
    assert soc.call(opids.CHECKSUM, inputs=[(a.phys + 2048, 2048)])["crc32"] == zlib.crc32(SECRET[2048:])
    a.revoke()
    refused(FOREIGN, soc.call, opids.CHECKSUM, inputs=[(a.phys + 2048, 2048)])
    assert_untouched(soc, a)


def test_grants_die_with_their_owner(mode_soc, shared_soc):
    soc, a = mode_soc, OwnerA()
    try:
        a.share(to=ANY_OWNER)
        assert read_a(soc, a)["crc32"] == zlib.crc32(SECRET)
        os.kill(a.proc.pid, signal.SIGKILL)     # no chance to withdraw anything
        a.proc.wait(10)
        err = refused(FOREIGN, read_a, soc, a)  # void at once, before its files are reaped
        assert "not granted" in err.message
    finally:
        a.close()


REAPER_RACE_ATTEMPTS = 10


def test_grants_die_with_their_owner_while_a_reaper_removes_its_files(mode_soc, shared_soc):
    """The relay, the cores and every SDK reap dead owners' files, holding the dead owner's lock
    meanwhile. A reader took that lock for the owner's own and honoured the dead owner's grants
    (a task passed the relay, and the firmware then answered HB_DSP_FREED_HANDLE).

    The case: A dead, this test holding its lock as a reaper does, A's access list still there
    for the whole read. The SoC's own reapers (every second) may remove A's files first, on a
    loaded host especially: then the read proves nothing (no list, no grant), and the case is set
    up again with another A."""
    soc = mode_soc
    for _ in range(REAPER_RACE_ATTEMPTS):
        a = OwnerA()
        try:
            a.share(to=ANY_OWNER)
            listed = os.path.join(ddr.shm_dir(), acl.acl_name(a.owner))
            os.kill(a.proc.pid, signal.SIGKILL)
            a.proc.wait(10)
            fd = ddr._lock_if_dead(os.path.join(ddr.shm_dir(), ddr.lock_name(a.owner)))  # a reaper at work
            if fd is None:
                continue        # another reaper removed A's files already
            try:
                before = _inode(listed)
                err = refused(FOREIGN, read_a, soc, a)
                if before is None or _inode(listed) != before:
                    continue    # A's list went while we read: not the case
                assert "not granted" in err.message
                return
            finally:
                os.close(fd)
        finally:
            a.close()
    pytest.fail(f"in {REAPER_RACE_ATTEMPTS} tries the SoC's reapers removed the dead owner's files before the read")


def _inode(path: str) -> int | None:
    try:
        return os.lstat(path).st_ino
    except FileNotFoundError:
        return None


def test_reserved_handle_flags_are_refused(mode_soc):
    soc = mode_soc
    own = soc.mem.alloc(64)
    for flags in (2, 0x80, 1 << 40):
        err = refused(INVALID_ARGUMENT, soc.call, opids.FILL, outputs=[(own.phys_addr, 64, flags)],
                      params={"value": 1})
        assert "reserved" in err.message and "outputs[0]" in err.message
    assert soc.call(opids.FILL, outputs=[(own.phys_addr, 64, 1)], params={"value": 1}) == {"bytes": 64}


def test_grants_survive_a_relay_restart(live_soc):
    a = OwnerA()
    try:
        with Soc() as soc:
            a.share(to=soc.mem.owner_id)
            assert read_a(soc, a)["crc32"] == zlib.crc32(SECRET)
            old = live_soc.relay_pid()
            os.kill(old, signal.SIGKILL)
            deadline = time.monotonic() + 20
            while True:     # the SDK hears the relay go, and starts a new one on the next call
                try:
                    assert read_a(soc, a)["crc32"] == zlib.crc32(SECRET)
                    break
                except errors.RelayUnavailable:
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            assert live_soc.relay_pid() not in (None, old)
            a.revoke()
            refused(FOREIGN, read_a, soc, a)
    finally:
        a.close()


# --- connections without HELLO ---------------------------------------------------------------------

class Raw:
    """A bare DEALER: no HELLO unless the test sends one."""

    def __init__(self, endpoint: str) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.linger = 0
        self.sock.rcvtimeo = 5000
        self.sock.connect(endpoint)

    def ask(self, msg: wire.Message) -> wire.Message:
        self.sock.send_multipart(wire.encode(msg))
        while True:
            reply = wire.decode(self.sock.recv_multipart())
            if reply.msg_id == msg.msg_id and reply.command is not wire.Command.EVENT:
                return reply

    def close(self) -> None:
        self.sock.close(0)
        self.ctx.term()


@pytest.mark.parametrize("endpoint", ["relay.sock", "vdsp0.fw.sock"])
def test_without_hello_a_client_may_ping_but_not_use_memory(shared_soc, endpoint):
    own = ddr.Segment.create(64)      # even this process's own buffer: the connection never said whose it is
    raw = Raw(f"ipc://{shared_soc.rt}/{endpoint}")
    try:
        reply = raw.ask(messages.task(1, opids.PING, inputs=[], outputs=[], core=CORE_0))
        assert reply.command is wire.Command.RESULT and reply.body["values"] == {"core": "vdsp0"}
        task = messages.task(2, opids.FILL, inputs=[], outputs=[[own.phys, 64, 0]], params={"value": 1},
                             owner=ddr.current_owner().id, core=CORE_0)
        reply = raw.ask(task)
        assert reply.body["code"] == FOREIGN and "send HELLO" in reply.body["message"], reply.body
        hello = raw.ask(messages.hello(3, "client", owner=ddr.current_owner().id))
        assert hello.command is wire.Command.READY, hello.body
        task.msg_id = 4
        assert raw.ask(task).body["values"] == {"bytes": 64}
        assert bytes(own.buf[:64]) == b"\x01" * 64
    finally:
        raw.close()
        own.close()


def test_acl_files_leave_with_their_owner(shared_soc):
    a = OwnerA()
    a.share(to=ANY_OWNER)
    path = Path(ddr.shm_dir()) / acl.acl_name(a.owner)
    assert path.exists()
    a.close()
    assert not path.exists()

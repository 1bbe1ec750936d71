"""PROTOCOL.md and the README say what the servers do (issue 34, point 6), each statement checked
where a test can hold it: against the constants the servers use, over the bare wire against a
live SoC, and by running the §6.3 launcher as printed.

An outside client written from PROTOCOL.md alone found these wrong or unwritten: §5.5 dropped a
silent client after 1.5 s (the servers wait 20 s), the README dropped replies past 1,000 (4,096),
`lock_fd: -1` counting as absent and the 1,024-fd scan were not written, §6.7 did not say that
one bad grant voids a whole access list, and the §6.3 shell launcher, copied as printed, broke
step 1's rules (no exclusive create, no mode 0600, no way to pick the id or try another)."""
from __future__ import annotations

import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgpack
import pytest
import zmq

from dsp_side import inbox
from protocol import acl as aclrule, messages, opids, wire
from protocol.constants import HUNG_AFTER_MS, HUNG_HARD_FACTOR, Command
from relay_server import server as relay_server
from tests import privilege
from vdsp_board.memory import acl, ddr

ROOT = Path(__file__).resolve().parents[2]
CLAIM_REFUSED = -6000284
FENCE = re.compile(r"^```sh\n(.*?)^```[ \t]*$", re.M | re.S)


def protocol_section(title: str) -> str:
    text = (ROOT / "PROTOCOL.md").read_text()
    start = text.index(f"\n{title}")
    end = re.compile(r"\n##+ ").search(text, start + len(title) + 2)     # the next heading ('# ' is a comment)
    return text[start:end.start() if end else len(text)]


def hello(sock: zmq.Socket, msg_id: int, **body) -> wire.Message:
    sock.send_multipart(wire.encode(messages.hello(msg_id, "client", **body)))
    return next_reply(sock, msg_id)


def next_reply(sock: zmq.Socket, msg_id: int, timeout_s: float = 20) -> wire.Message:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sock.poll(100):
            msg = wire.decode(sock.recv_multipart())
            if msg.msg_id == msg_id and msg.command in (Command.READY, Command.RESULT, Command.ERROR):
                return msg
    raise AssertionError(f"no reply to message {msg_id} within {timeout_s} s")


@pytest.fixture
def dealer():
    ctx = zmq.Context()
    socks: list[zmq.Socket] = []

    def connect(url: str) -> zmq.Socket:
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.connect(url)
        socks.append(sock)
        return sock
    yield connect
    for sock in socks:
        sock.close(0)
    ctx.term()


# --- numbers the documents give and the servers use --------------------------------------------

def test_the_limits_page_and_section_12_give_the_limits_the_servers_use():
    readme = " ".join((ROOT / "docs" / "limits.md").read_text().split())
    number = r"(\d[\d,]*)"
    replies = re.search(rf"drops replies past {number} waiting for a client", readme)
    assert replies and int(replies[1].replace(",", "")) == relay_server.CLIENT_SNDHWM
    waiting = re.search(rf"a firmware's inbox takes at most {number} waiting tasks, {number} per connection", readme)
    assert waiting and (int(waiting[1].replace(",", "")), int(waiting[2])) == (inbox.MAX_WAITING,
                                                                            inbox.MAX_WAITING_PER_PEER)
    limits = protocol_section("## 12. Limits and flow control")
    row = next(line for line in limits.splitlines() if line.startswith("| replies waiting for one client"))
    assert f"| {relay_server.CLIENT_SNDHWM} messages |" in row
    row = next(line for line in limits.splitlines() if line.startswith("| tasks waiting in one firmware's inbox"))
    assert f"| {inbox.MAX_WAITING}, of which {inbox.MAX_WAITING_PER_PEER} per connection |" in row


def test_section_5_5_says_a_silent_client_is_dropped_at_the_hung_deadline():
    cancel = " ".join(protocol_section("### 5.5 CANCEL (0x13)").split())
    assert "1.5 s" not in cancel
    assert f"hung deadline, {HUNG_AFTER_MS // 1000} s by default" in cancel
    assert f"{HUNG_HARD_FACTOR * HUNG_AFTER_MS // 1000} s whatever it does" in cancel


def test_a_client_silent_past_the_old_liveness_window_is_still_known(shared_soc, dealer):
    """§5.5 over the bare wire: a client that sends nothing for 3 s (twice the 1.5 s the text gave)
    while its task runs still has it: its CANCEL finds the task running, not `unknown`."""
    sock = dealer(f"ipc://{shared_soc.rt}/relay.sock")
    assert hello(sock, 1).command is Command.READY
    sock.send_multipart(wire.encode(messages.task(2, opids.SLEEP, inputs=[], outputs=[], params={"ms": 5000},
                                                  core=1)))
    time.sleep(3.0)                             # silent: no HEARTBEAT, nothing
    sock.send_multipart(wire.encode(messages.cancel(3, 2)))
    answer = next_reply(sock, 3)
    assert answer.command is Command.RESULT and answer.body["state"] == "running", answer.body


# --- §5.2 lock_fd ---------------------------------------------------------------------------------

def test_lock_fd_minus_one_counts_as_absent_and_any_other_is_read(shared_soc, dealer, monkeypatch):
    monkeypatch.setenv("VDSP_SHM_DIR", str(shared_soc.ddr_dir))
    me = ddr.current_owner()
    try:
        for endpoint in ("relay.sock", "vdsp0.fw.sock"):
            sock = dealer(f"ipc://{shared_soc.rt}/{endpoint}")
            assert hello(sock, 1, owner=me.id, lock_fd=-1).command is Command.READY, endpoint    # looked for
            assert hello(sock, 2, owner=me.id, lock_fd=me.lock_fd).command is Command.READY, endpoint
            wrong = hello(sock, 3, owner=me.id, lock_fd=0)       # named, and not the lock's: refused
            assert wrong.command is Command.ERROR and wrong.body["code"] == CLAIM_REFUSED, endpoint
            assert "through fd 0" in wrong.body["message"], wrong.body
    finally:
        ddr.close_owner(str(shared_soc.ddr_dir))


MANY_FDS = textwrap.dedent("""
    import os, resource, sys, time
    import zmq
    from protocol import messages, wire
    from vdsp_board.memory import ddr
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    spare = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]     # before the lock: it comes later
    me = ddr.current_owner()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(sys.argv[1])
    for msg_id, body in ((1, {"owner": me.id}), (2, {"owner": me.id, "lock_fd": me.lock_fd})):
        sock.send_multipart(wire.encode(messages.hello(msg_id, "client", **body)))
        assert sock.poll(20000)
        reply = wire.decode(sock.recv_multipart())
        print(me.lock_fd, reply.command.name, reply.body.get("message", ""), flush=True)
    sock.close(0)
    ctx.term()
""")


def test_a_sender_with_more_than_1024_fds_names_its_lock_fd(shared_soc):
    """§5.2: without `lock_fd` the server looks through 1,024 of the sender's fds and refuses,
    saying so, when the lock is not among them; naming the fd works whatever the count."""
    out = subprocess.run([sys.executable, "-c", MANY_FDS, f"ipc://{shared_soc.rt}/relay.sock"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, VDSP_SHM_DIR=str(shared_soc.ddr_dir), PYTHONPATH=str(ROOT)))
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout + out.stderr
    fd, verdict, message = lines[0].split(" ", 2)
    assert int(fd) > 1024 and verdict == "ERROR" and "1024" in message and "lock_fd" in message, lines[0]
    assert lines[1].split(" ")[1] == "READY", lines[1]


# --- §6.7: one bad grant voids the list ------------------------------------------------------------

def test_one_bad_grant_voids_the_whole_access_list(shm):
    owner = ddr.current_owner()
    lock_inode = os.stat(owner.lock_path).st_ino
    key = "x" * aclrule.KEY_LEN
    path = Path(shm) / acl.acl_name(owner.id)

    def publish(grants: list) -> aclrule.AccessList:
        path.write_bytes(msgpack.packb({"lock": lock_inode, "grants": grants, "key": key}))
        path.chmod(0o600)
        return acl.Reader(str(shm)).get(owner.id)

    good = [0x1000, 4096, 0]
    assert publish([good]).grants == (aclrule.AclEntry(0x1000, 4096, 0),)
    for bad in ([0, 4096, 0], [0x1000, 4096, 1 << 22], [0x1000, 4096], "grant"):
        voided = publish([good, bad])
        assert voided.grants == () and voided.key is None, bad      # the good grant and the key too
    path.unlink()


# --- §6.3: the launcher, as printed -----------------------------------------------------------------

STAND_IN = textwrap.dedent("""
    # stands for `node client.js X`: says HELLO with lock_fd 9 (inherited), then lets a child do the same
    import fcntl, os, stat, subprocess, sys
    import zmq
    from protocol import messages, wire
    owner, url = int(sys.argv[1]), os.environ["RELAY"]
    lock = os.path.join(os.environ["VDSP_SHM_DIR"], f"vdsp-{owner:06x}.lock")

    def say_hello(msg_id):
        ctx = zmq.Context()
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.connect(url)
        sock.send_multipart(wire.encode(messages.hello(msg_id, "client", owner=owner, lock_fd=9)))
        verdict = wire.decode(sock.recv_multipart()).command.name if sock.poll(20000) else "silence"
        sock.close(0)
        ctx.term()
        return verdict

    if sys.argv[2:] == ["child"]:
        print(say_hello(7), flush=True)
        sys.exit()
    st = os.stat(lock)
    print("lock", oct(stat.S_IMODE(st.st_mode)), sorted(n for n in os.listdir(os.environ["VDSP_SHM_DIR"])
                                                        if n.startswith(f"vdsp-{owner:06x}")), flush=True)
    print("fd9", os.fstat(9).st_ino == st.st_ino, flush=True)
    print("client", say_hello(1), flush=True)
    child = [sys.executable, __file__, str(owner), "child"]
    print("heir", subprocess.run(child, capture_output=True, text=True, close_fds=False).stdout.strip(), flush=True)
    fcntl.fcntl(9, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
    print("heir after FD_CLOEXEC", subprocess.run(child, capture_output=True, text=True,
                                                  close_fds=False).stdout.strip(), flush=True)
    os.unlink(lock)         # step 4, at exit
""")



def launcher() -> str:
    text = protocol_section("### 6.3 Owners and segment files")
    (block,) = FENCE.findall(text)
    return block


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_the_launcher_of_section_6_3_runs_as_printed(shared_soc, tmp_path, shell):
    if shutil.which(shell) is None or shutil.which("flock") is None:
        privilege.require(f"no {shell} or flock(1) here")
    block = launcher()
    last = 'exec node client.js "$X"'
    assert last in block
    client = tmp_path / "client.py"
    client.write_text(STAND_IN)
    script = tmp_path / "launch.sh"
    script.write_text(block.replace(last, f'exec {sys.executable} {client} "$X"'))
    out = subprocess.run([shell, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, VDSP_SHM_DIR=str(shared_soc.ddr_dir), PYTHONPATH=str(ROOT),
                                  RELAY=f"ipc://{shared_soc.rt}/relay.sock"))
    lines = out.stdout.splitlines()
    assert len(lines) == 5, out.stdout + out.stderr
    mode, names = re.fullmatch(r"lock (0o\d+) \[(.*)\]", lines[0]).groups()
    assert mode == "0o600"                                  # umask 077
    assert names.count("'") == 2 and names.endswith(".lock'")     # the lock alone: its temporary name is gone
    assert lines[1] == "fd9 True"                           # fd 9 holds that very file
    assert lines[2] == "client READY"
    assert lines[3] == "heir READY"                         # an heir of fd 9 proves the owner too (the warning)
    assert lines[4] == "heir after FD_CLOEXEC ERROR"        # not once the client marked it close-on-exec


def test_the_launcher_never_opens_an_existing_file(shared_soc, tmp_path):
    """`set -C`: the temporary name is created exclusively; a file already there (a symlink planted at
    it, say) is never opened or written through, and the launcher takes another id."""
    if shutil.which("flock") is None:
        privilege.require("no flock(1) here")
    ddr_dir = tmp_path / "ddr"
    ddr_dir.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    script = tmp_path / "launch.sh"
    # the first id drawn is pinned (a stand-in for od(1)); its temporary name is a planted symlink
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "od").write_text('#!/bin/sh\nn=$(cat "$ODS" 2>/dev/null || echo 0); echo $((n+1)) > "$ODS"\n'
                                 'if [ "$n" = 0 ]; then echo 41; else exec /usr/bin/od "$@"; fi\n')
    (fake_bin / "od").chmod(0o755)
    script.write_text(launcher().replace('exec node client.js "$X"', 'echo "$X"; ls -l /proc/$$/fd/9'))
    out = subprocess.run(["dash", "-c", f'ln -s {victim} "{ddr_dir}/vdsp-00002a.lock.tmp$$"; . {script}'],
                         capture_output=True, text=True, timeout=30,
                         env=dict(os.environ, VDSP_SHM_DIR=str(ddr_dir), ODS=str(tmp_path / "ods"),
                                  PATH=f"{fake_bin}:{os.environ['PATH']}"))
    assert victim.read_text() == "keep me"
    x = int(out.stdout.splitlines()[0])
    assert x != 42 and (ddr_dir / f"vdsp-{x:06x}.lock").exists(), out.stdout + out.stderr
    assert stat.S_IMODE(os.stat(ddr_dir / f"vdsp-{x:06x}.lock").st_mode) == 0o600


# --- §17 versions ---------------------------------------------------------------------------------

BAD_MAGIC = -6000258
ENDPOINTS = ("relay.sock", "vdsp0.sock", "vdsp0.fw.sock")     # the relay, a core's control, a firmware


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_client_of_version_1_is_told_in_its_own_header_why_it_is_refused(shared_soc, dealer, endpoint):
    """§17: a client written for version 1 (the per-firmware CURVE key and READY's `protocol`
    came with version 2) meets a refusal it can read, not silence: an ERROR in a version-1 header
    (the layout is the same), HB_DSP_BAD_MAGIC, naming the version the server speaks and §17."""
    sock = dealer(f"ipc://{shared_soc.rt}/{endpoint}")
    sock.send_multipart([struct.pack("<2sBBHBBQq", b"VD", 1, Command.HELLO, 0, 0, 0, 7, 0),
                         msgpack.packb({"role": "client"})])
    assert sock.poll(10_000), f"{endpoint}: no answer to a version-1 HELLO"
    frames = sock.recv_multipart()
    magic, version, command, _, _, _, msg_id, _ = struct.unpack("<2sBBHBBQq", frames[0])
    assert (magic, version, command, msg_id) == (b"VD", 1, Command.ERROR, 7), frames[0]
    body = msgpack.unpackb(frames[1])
    assert body["code"] == BAD_MAGIC, body
    assert "speaks version 2" in body["message"] and "§17" in body["message"], body
    assert "## 17. Changes between versions" in (ROOT / "PROTOCOL.md").read_text()


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_ready_says_the_version_its_server_speaks(shared_soc, dealer, endpoint):
    sock = dealer(f"ipc://{shared_soc.rt}/{endpoint}")
    sock.send_multipart(wire.encode(messages.hello(1, "client")))
    assert sock.poll(10_000), endpoint
    frames = sock.recv_multipart()
    assert frames[0][2] == 2 and frames[0][3] == Command.READY, frames[0]
    assert msgpack.unpackb(frames[1])["protocol"] == 2

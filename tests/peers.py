"""Peers made by hand for the identity tests: a client in another language (examples/raw_client.py),
ZMTP spoken over a plain unix socket, a connection that outlives the process that opened it, and
a process started with a chosen pid."""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import msgpack

ROOT = Path(__file__).resolve().parent.parent
RAW_CLIENT = ROOT / "examples" / "raw_client.py"
CLAIM_REFUSED = -6000284
HEADER = struct.Struct("<2sBBHBBQq")


def raw_client(*args: str, pass_fds: tuple = (), shell: str | None = None) -> dict:
    """Run examples/raw_client.py (or ``shell`` that execs it) with a clean Python path: no vdsp-sim."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-I", str(RAW_CLIENT), *args] if shell is None else ["sh", "-c", shell]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, pass_fds=pass_fds, cwd="/")
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


class Zmtp:
    """ZMTP 3.0 (NULL mechanism) by hand over a plain unix socket: a DEALER as libzmq speaks it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buf = sock, b""
        sock.settimeout(60)
        sock.sendall(b"\xff" + bytes(8) + b"\x7f\x03\x00" + b"NULL".ljust(20, b"\0") + bytes(32))
        self._read(64)
        self._frame(b"\x05READY\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER", command=True)
        flags, body = self._next()
        assert flags & 4 and body.startswith(b"\x05READY"), body

    def send(self, frames: list[bytes]) -> None:
        for i, frame in enumerate(frames):
            self._frame(frame, more=i < len(frames) - 1)

    def ask(self, command: int, msg_id: int, body: dict) -> tuple[int, dict]:
        self.send([HEADER.pack(b"VD", 2, command, 0, 0, 0, msg_id, 0), msgpack.packb(body)])
        while True:
            frames = []
            while True:
                flags, data = self._next()
                if not flags & 4:
                    frames.append(data)
                    if not flags & 1:
                        break
            head = HEADER.unpack(frames[0])
            if head[6] == msg_id:
                return head[2], msgpack.unpackb(frames[1])

    def _frame(self, body: bytes, more: bool = False, command: bool = False) -> None:
        flags = (1 if more else 0) | (4 if command else 0)
        size = struct.pack(">Q", len(body)) if len(body) > 255 else bytes([len(body)])
        self.sock.sendall(bytes([flags | (2 if len(body) > 255 else 0)]) + size + body)

    def _next(self) -> tuple[int, bytes]:
        flags = self._read(1)[0]
        size = struct.unpack(">Q", self._read(8))[0] if flags & 2 else self._read(1)[0]
        return flags, self._read(size)

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the connection"
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


CONNECTOR = textwrap.dedent("""
    import socket, sys
    back = socket.socket(fileno=int(sys.argv[2]))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(sys.argv[1])
    socket.send_fds(back, [b"x"], [conn.fileno()])
""")

HOLDER = textwrap.dedent("""
    import os, sys
    from vdsp_board import ddr
    print(os.getpid(), ddr.current_owner().id, flush=True)
    sys.stdin.read()
""")


def orphan_connection(path: str) -> tuple[socket.socket, int]:
    """A connection to ``path`` opened by a process that has exited since (we kept its socket): (socket, its pid)."""
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen([sys.executable, "-I", "-c", CONNECTOR, path, str(theirs.fileno())],
                            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
    theirs.close()
    _, fds, _, _ = socket.recv_fds(ours, 1, 1)
    ours.close()
    proc.wait(timeout=30)
    return socket.socket(fileno=fds[0]), proc.pid


def holder_at_pid(pid: int, tries: int = 200) -> subprocess.Popen:
    """A process holding a DDR owner of its own, started with pid ``pid`` (the kernel's next pid set
    just before each try: other processes of the pid namespace may take it first). Needs the
    privilege to write ``ns_last_pid`` (tests/privilege.py: a pid namespace of one's own)."""
    for _ in range(tries):
        with open("/proc/sys/kernel/ns_last_pid", "w") as fh:
            fh.write(str(pid - 1))
        proc = subprocess.Popen([sys.executable, "-c", HOLDER], cwd=ROOT, text=True, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.communicate()
    raise RuntimeError(f"could not start a process with pid {pid} in {tries} tries (a busy host took it first)")

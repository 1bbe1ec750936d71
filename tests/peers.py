"""Peers made by hand for the identity tests: a client in another language (examples/raw_client.py),
ZMTP spoken over a plain unix socket, a connection that outlives the process that opened it (also
forked on demand: :class:`Forker`), and a victim whose forked children hold its owner (:class:`Victim`)."""
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



FORKER = textwrap.dedent("""
    import os, socket, sys
    if sys.argv[1] == "victim":
        from vdsp_board.memory import ddr
        me = ddr.current_owner()
        held = os.dup(me.lock_fd)       # its children keep this one (the SDK closes the owner's own fd in a child)
        print(me.id, flush=True)
    else:
        back = socket.socket(fileno=int(sys.argv[2]))
    while line := sys.stdin.readline().strip():
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:                    # lives until let go
            os.close(go_w)
            if sys.argv[1] == "connector":      # A: connects to the path `line`, hands its socket over
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.connect(line)
                socket.send_fds(back, [b"x"], [conn.fileno()])
            os.read(go_r, 1)            # (a victim's child holds its owner's lock through fd `held`)
            os._exit(0)
        os.close(go_r)
        print(pid, flush=True)
        sys.stdin.readline()
        os.close(go_w)
        os.waitpid(pid, 0)
        print("reaped", flush=True)
""")


class _Helper:
    """A helper process answering one line per request."""

    def __init__(self, code: str, *args: str, pass_fds: tuple = ()) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, text=True, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, pass_fds=pass_fds,
                                     env=dict(os.environ, PYTHONPATH=str(ROOT)))

    def ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        assert answer, f"the helper exited ({self.proc.poll()})"
        return answer

    def close(self) -> None:
        self.proc.communicate("", timeout=30)


class Forker(_Helper):
    """Forks, on demand, a process A that connects to a unix socket and hands us its connection."""

    def __init__(self) -> None:
        self._back, theirs = socket.socketpair()
        super().__init__(FORKER, "connector", str(theirs.fileno()), pass_fds=(theirs.fileno(),))
        theirs.close()

    def connect(self, path: str) -> tuple[socket.socket, int]:
        """A's connection to ``path`` (now ours too) and A's pid; A lives until :meth:`release`."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(path + "\n")
        self.proc.stdin.flush()
        _, fds, _, _ = socket.recv_fds(self._back, 1, 1)
        return socket.socket(fileno=fds[0]), int(self.proc.stdout.readline())

    def release(self) -> None:
        """A exits and is reaped: its pid is free."""
        assert self.ask("exit") == "reaped"

    def close(self) -> None:
        super().close()
        self._back.close()


class Victim(_Helper):
    """A process holding a DDR owner (``owner``) that forks, on demand, a child holding that owner's
    lock too (through an fd it inherited): the pid it gets is whatever the kernel gives next."""

    def __init__(self) -> None:
        super().__init__(FORKER, "victim")
        assert self.proc.stdout is not None
        self.owner = int(self.proc.stdout.readline())

    def fork(self) -> int:
        """The child's pid."""
        return int(self.ask("fork"))

    def release(self) -> None:
        assert self.ask("exit") == "reaped"

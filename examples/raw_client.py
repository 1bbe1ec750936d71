"""A client written from PROTOCOL.md alone: raw ZeroMQ frames and msgpack, no vdsp-sim import.

It does what a C, Go or Node client does to prove its DDR owner over ipc (PROTOCOL.md §6.3,
§5.2, §15): claim an owner id by its lock file in the DDR directory and keep the fd that holds
the exclusive flock, allocate two buffers, connect, say HELLO with ``owner`` and ``lock_fd``,
then run memcpy (op 0x0001) from one buffer to the other and check the copy.

    VDSP_RUNTIME_DIR=... VDSP_SHM_DIR=... python examples/raw_client.py
    python examples/raw_client.py --endpoint ipc://$VDSP_RUNTIME_DIR/vdsp0.fw.sock   # direct mode
    # a runtime without flock(2) (Node.js core): a launcher holds the lock on an inherited fd
    python examples/raw_client.py --owner 0x2a --lock-fd 9

It prints one JSON line: the HELLO's answer and, if READY, the task's.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import secrets
import struct
import sys

import msgpack
import zmq

HEADER = struct.Struct("<2sBBHBBQq")       # magic, version, command, op, priority, core, msg_id, custom_id
HELLO, READY, TASK, RESULT, ERROR, DISCONNECT = 0x01, 0x02, 0x10, 0x11, 0x12, 0x50
MEMCPY, SIZE = 0x0001, 4096


def message(command: int, msg_id: int, body: dict, op: int = 0) -> list[bytes]:
    return [HEADER.pack(b"VD", 2, command, op, 0, 0, msg_id, 0), msgpack.packb(body)]


def ask(sock: zmq.Socket, frames: list[bytes], timeout_ms: int) -> tuple[int, dict]:
    """Send a request; the (command, body) of the reply with its msg_id (other messages are skipped)."""
    msg_id = HEADER.unpack(frames[0])[6]
    sock.send_multipart(frames)
    while sock.poll(timeout_ms):
        reply = sock.recv_multipart()
        head = HEADER.unpack(reply[0])
        if head[6] == msg_id and head[2] in (READY, RESULT, ERROR):
            return head[2], msgpack.unpackb(reply[1])
    raise SystemExit(json.dumps({"error": f"no answer within {timeout_ms} ms"}))


def claim_owner(ddr: str) -> tuple[int, int]:
    """PROTOCOL.md §6.3 step 1: a free owner id and the fd holding its lock's exclusive flock."""
    while True:
        owner = secrets.randbelow((1 << 22) - 1) + 1
        final = os.path.join(ddr, f"vdsp-{owner:06x}.lock")
        tmp = f"{final}.tmp{os.getpid()}"
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            os.link(tmp, final)
        except FileExistsError:
            os.close(fd)
            continue
        finally:
            os.unlink(tmp)
        return owner, fd


def main() -> None:
    ap = argparse.ArgumentParser()
    rt = os.environ.get("VDSP_RUNTIME_DIR") or os.path.join(os.environ.get("XDG_RUNTIME_DIR", ""), "vdsp")
    ap.add_argument("--endpoint", default=os.environ.get("VDSP_RELAY_ENDPOINT") or f"ipc://{rt}/relay.sock")
    ap.add_argument("--owner", type=lambda s: int(s, 0), help="an owner whose lock --lock-fd already holds")
    ap.add_argument("--lock-fd", type=int, help="the inherited fd holding --owner's lock")
    ap.add_argument("--claim", type=lambda s: int(s, 0), help="claim this owner in HELLO instead of ours")
    ap.add_argument("--no-lock-fd", action="store_true", help="do not name the fd in HELLO (the server scans ours)")
    ap.add_argument("--timeout-ms", type=int, default=60000)
    args = ap.parse_args()
    ddr = os.environ.get("VDSP_SHM_DIR") or "/dev/shm"
    owner, lock_fd = (args.owner, args.lock_fd) if args.owner else claim_owner(ddr)
    src, dst = (owner << 40) | 0x1000, (owner << 40) | 0x2000      # §6.1, §6.3 step 2
    paths = [os.path.join(ddr, f"vdsp-{owner:06x}-{offset:010x}") for offset in (0x1000, 0x2000)]
    data = secrets.token_bytes(SIZE)
    for path, content in zip(paths, (data, bytes(SIZE))):
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        os.write(fd, content)
        os.close(fd)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    if args.endpoint.startswith("ipc://"):
        sock.reconnect_ivl = -1     # connect once (PROTOCOL.md §2.1): never again to a path by itself
    sock.connect(args.endpoint)
    out: dict = {"pid": os.getpid(), "owner": owner}
    try:
        hello = {"role": "client", "pid": os.getpid(), "owner": args.claim or owner, "name": "raw-client"}
        if not args.no_lock_fd:
            hello["lock_fd"] = lock_fd
        command, body = ask(sock, message(HELLO, 1, hello), args.timeout_ms)
        out["hello"] = {READY: "READY", ERROR: "ERROR"}.get(command, command)
        if command == ERROR:
            out.update(code=body["code"], message=body["message"])
        else:
            task = {"inputs": [[src, SIZE, 0]], "outputs": [[dst, SIZE, 0]], "params": {}}
            command, body = ask(sock, message(TASK, 2, task, op=MEMCPY), args.timeout_ms)
            with open(paths[1], "rb") as fh:
                copied = fh.read() == data
            out["task"] = {"command": command, "body": body, "copied": copied}
        sock.send_multipart(message(DISCONNECT, 0, {}))
    finally:
        sock.close(0)
        ctx.term()
        for path in paths:                                      # §6.3 step 3
            os.unlink(path)
        if not args.owner:
            os.unlink(os.path.join(ddr, f"vdsp-{owner:06x}.lock"))
            os.close(lock_fd)
    print(json.dumps(out), flush=True)
    sys.exit(0 if out.get("task", {}).get("copied") else 1)


if __name__ == "__main__":
    main()

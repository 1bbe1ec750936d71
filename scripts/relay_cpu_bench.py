"""The relay's CPU per task, alone: the real relay process between raw-pyzmq stand-ins.

Two fake cores (each answers the relay's HELLO with READY naming a fake firmware endpoint),
two fake firmwares (each answers every TASK with an empty RESULT) and N raw DEALER clients
keeping WINDOW PING tasks in flight, all in this one process; the relay is
``python -m relay_server.main`` from whatever ``relay_server`` PYTHONPATH finds first. Prints,
per measured window, the relay's CPU µs per task (utime + stime of its process, and per
thread: its Python loop and ZeroMQ's I/O thread) as one JSON line. For an A/B of two
checkouts run it alternately with PYTHONPATH=/path/to/checkout-A and -B from a neutral cwd
(``python -m`` puts the cwd first on sys.path):

    cd /tmp && PYTHONPATH=/path/to/old .venv/bin/python /path/to/scripts/relay_cpu_bench.py 3 3
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import msgpack
import zmq

HEADER = struct.Struct("<2sBBHBBQq")
HELLO, READY, TASK, RESULT, ERROR = 0x01, 0x02, 0x10, 0x11, 0x12
TCK = os.sysconf("SC_CLK_TCK")


def hdr(cmd: int, msg_id: int) -> bytes:
    return HEADER.pack(b"VD", 2, cmd, 0, 0, 0, msg_id, 0)


def msg_id(frame: bytes) -> int:
    return struct.unpack_from("<Q", frame, 8)[0]


def cpu_by_thread(pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            raw = open(f"/proc/{pid}/task/{tid}/stat").read()
        except OSError:
            continue
        name = "loop" if tid == str(pid) else raw[raw.index("(") + 1:raw.rindex(")")]
        st = raw.rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0.0) + (int(st[11]) + int(st[12])) / TCK
    return out


def main() -> int:
    seconds, windows = float(sys.argv[1]), int(sys.argv[2])
    window = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    rt = tempfile.mkdtemp(prefix="relay-cpu-")
    os.makedirs(f"{rt}/shm")
    ctx = zmq.Context()
    cores, fws, clients = [], [], []
    poller = zmq.Poller()
    for i in range(2):
        for kind, group in (("c", cores), ("fw", fws)):
            sock = ctx.socket(zmq.ROUTER)
            sock.sndhwm = sock.rcvhwm = 100000
            sock.bind(f"ipc://{rt}/{kind}{i}.sock")
            poller.register(sock, zmq.POLLIN)
            group.append(sock)
    env = dict(os.environ, VDSP_RUNTIME_DIR=rt, VDSP_SHM_DIR=f"{rt}/shm")
    relay = subprocess.Popen([sys.executable, "-m", "relay_server.main", "--bind", f"ipc://{rt}/relay.sock",
                              "--core", f"vdsp0=ipc://{rt}/c0.sock", "--core", f"vdsp1=ipc://{rt}/c1.sock",
                              "--hung-ms", "600000"], env=env, stderr=subprocess.DEVNULL)
    for _ in range(max(1, window // 32)):      # the relay's default limit: 32 tasks in flight per client
        sock = ctx.socket(zmq.DEALER)
        sock.sndhwm = sock.rcvhwm = 100000
        sock.connect(f"ipc://{rt}/relay.sock")
        poller.register(sock, zmq.POLLIN)
        clients.append(sock)
    body = msgpack.packb({"inputs": [], "outputs": [], "params": {}, "owner": 0x3FFFFF})
    ready = [False, False]
    state = {"done": 0, "id": 0}

    def send_task(sock: zmq.Socket) -> None:
        state["id"] += 1
        sock.send_multipart([hdr(TASK, state["id"]), body])

    def serve(timeout_ms: int) -> None:
        for sock, _ in poller.poll(timeout_ms):
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if sock in cores:
                    if frames[1][3] == HELLO:
                        i = cores.index(sock)
                        sock.send_multipart([frames[0], hdr(READY, msg_id(frames[1])), msgpack.packb(
                            {"name": f"vdsp{i}", "role": "core", "state": "running", "pid": os.getpid(),
                             "fw_pid": os.getpid(), "fw_endpoint": f"ipc://{rt}/fw{i}.sock"})])
                        ready[i] = True
                elif sock in fws:
                    reply = READY if frames[1][3] == HELLO else RESULT
                    sock.send_multipart([frames[0], hdr(reply, msg_id(frames[1])), b"\x80"])
                elif frames[0][3] in (RESULT, ERROR):
                    state["done"] += 1
                    send_task(sock)

    def run(duration: float) -> None:
        end = time.monotonic() + duration
        while time.monotonic() < end:
            serve(100)

    try:
        t0 = time.monotonic()
        while not all(ready) and time.monotonic() - t0 < 20:
            serve(50)
        run(0.3)
        for sock in clients:
            for _ in range(window // len(clients)):
                send_task(sock)
        run(1.0)
        for _ in range(windows):
            n0, c0, t = state["done"], cpu_by_thread(relay.pid), time.monotonic()
            run(seconds)
            n, c1 = state["done"] - n0, cpu_by_thread(relay.pid)
            per = {k: round((v - c0.get(k, 0.0)) / n * 1e6, 2) for k, v in c1.items() if v > c0.get(k, 0.0)}
            print(json.dumps({"tag": os.environ.get("TAG", ""), "tasks_s": round(n / (time.monotonic() - t)),
                              "relay_us": round(sum(per.values()), 2), "threads": per}), flush=True)
    finally:
        relay.terminate()
        relay.wait(10)
        ctx.destroy(0)
        shutil.rmtree(rt, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

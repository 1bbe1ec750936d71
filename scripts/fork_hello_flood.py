"""Is a relay's PING latency beside many forked HELLO senders the relay's or the host's? (issue 40 point 4)

Starts a private SoC (ipc), then measures a relay-mode client's PING round trips (one at a time,
``--gap-ms`` apart) in three phases of ``--hold`` seconds each, in one run:

- ``quiet``: nothing else;
- ``idle forks``: ``--forks`` processes forked from one parent that imported pyzmq, each asleep
  (what the host pays for that many processes, without a byte to the relay);
- ``forks saying HELLO elsewhere``: the same forks and messages, sent to a socket of the flood's
  parent that answers each (the host's share of the work, without the relay);
- ``hello forks``: the same number of forked processes, each with a connection of its own to the
  relay that says HELLO ``--hellos`` times, claiming this script's DDR owner without ``lock_fd``
  (the relay looks through the sender's fds: each fork inherits the owner's lock), then reads
  what comes back and stays connected until the phase ends.

Per phase: PING p50 / p99 / max (ms), PINGs answered, and the CPU seconds the relay's threads
used (``/proc/PID/task/*/stat``), by thread name.

    .venv/bin/python scripts/fork_hello_flood.py [--forks 300] [--hellos 12] [--hold 10]
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLOOD = r"""
import os, sys, time, signal, struct
import msgpack, zmq
url, forks, hellos, owner = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sink = None
if url == "sink":       # the host's share: the same forks and messages, to a socket of ours that answers
    import threading
    ctx0 = zmq.Context(1)
    sink = ctx0.socket(zmq.ROUTER)
    url = "ipc:///tmp/vdsp-sink-%d" % os.getpid()
    sink.bind(url)
kids = []
for i in range(forks):
    pid = os.fork()
    if pid == 0:
        try:
            if hellos:
                ctx = zmq.Context(1)
                s = ctx.socket(zmq.DEALER)
                s.linger = 0
                s.connect(url)
                for n in range(hellos):
                    s.send_multipart([struct.pack("<2sBBHBBQq", b"VD", 2, 1, 0, 0, 0, n + 1, 0),
                                      msgpack.packb({"role": "client", "owner": owner, "name": f"flood{i}"})])
                got = 0
                while got < hellos and s.poll(30000):
                    s.recv_multipart()
                    got += 1
            signal.pause()
        finally:
            os._exit(0)
    kids.append(pid)
print("started", flush=True)
if sink is not None:
    poller = zmq.Poller()
    poller.register(sink, zmq.POLLIN)
    poller.register(sys.stdin, zmq.POLLIN)
    while True:
        ready = dict(poller.poll())
        if sys.stdin.fileno() in ready:
            break
        while sink.poll(0):
            ident, head, body = sink.recv_multipart()
            sink.send_multipart([ident, head[:3] + bytes([0x12]) + head[4:], body])
try:
    sys.stdin.read()
finally:
    for pid in kids:
        os.kill(pid, signal.SIGKILL)
    for pid in kids:
        os.waitpid(pid, 0)
"""


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds by thread name of process ``pid``."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rpartition(")")[2].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def pings(soc, stop: threading.Event, gap_s: float, out: list, start: float) -> None:
    from arm_side import CORE_ANY, opids
    while not stop.is_set():
        t0 = time.perf_counter()
        soc.rpc(opids.PING, core=CORE_ANY).wait(60000)
        out.append((time.perf_counter() - t0, t0 - start))
        time.sleep(gap_s)


def phase(name: str, soc, relay_pid: int, hold_s: float, gap_s: float, start: float) -> dict:
    before = thread_cpu(relay_pid)
    stop, samples = threading.Event(), []
    t = threading.Thread(target=pings, args=(soc, stop, gap_s, samples, start))
    t.start()
    time.sleep(hold_s)
    stop.set()
    t.join()
    after = thread_cpu(relay_pid)
    lat = sorted(s[0] for s in samples)
    worst = max(samples)
    cpu = {k: round(after[k] - before.get(k, 0.0), 2) for k in after if after[k] - before.get(k, 0.0) > 0.005}
    row = {"phase": name, "pings": len(lat), "p50_ms": round(lat[len(lat) // 2] * 1e3, 2),
           "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3, 2),
           "max_ms": round(lat[-1] * 1e3, 2), "max_at_s": round(worst[1], 2), "over_100ms": sum(x > 0.1 for x in lat),
           "relay_cpu_s": cpu, "load": os.getloadavg()[0]}
    print(row, flush=True)
    return row


def flood(url: str, forks: int, hellos: int, owner: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", FLOOD, url, str(forks), str(hellos), str(owner)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    return proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--forks", type=int, default=300)
    ap.add_argument("--hellos", type=int, default=12)
    ap.add_argument("--hold", type=float, default=10.0, help="seconds per phase")
    ap.add_argument("--gap-ms", type=float, default=5.0, help="pause between PINGs")
    args = ap.parse_args()
    from arm_side import Soc
    from vdsp_board.memory import ddr
    from vdsp_sim.soc.private_soc import PrivateSoc, PrivateSocConfig
    with PrivateSoc(PrivateSocConfig(env={"VDSP_KEYS_DIR": None})) as private:
        relay_pid = int((Path(private.rt) / "relay.pid").read_text().split()[0])
        owner = ddr.current_owner()
        print(f"relay pid {relay_pid}", flush=True)
        url = f"ipc://{private.rt}/relay.sock"
        with Soc(mode="relay") as soc:
            rows = [phase("quiet", soc, relay_pid, args.hold, args.gap_ms / 1e3, time.perf_counter())]
            for name, target, hellos in (("idle forks", url, 0), ("forks saying HELLO elsewhere", "sink", args.hellos),
                                         ("hello forks", url, args.hellos)):
                start = time.perf_counter()
                proc = flood(target, args.forks, hellos, owner.id)
                try:
                    rows.append(phase(name, soc, relay_pid, args.hold, args.gap_ms / 1e3, start))
                finally:
                    proc.stdin.close()
                    proc.wait(60)
        ddr.close_owner(str(private.ddr_dir))
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    sys.exit(main())

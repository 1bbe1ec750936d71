"""Memory that peers which never authenticate can make the SoC's processes hold (issue 22).

Starts a tcp + CURVE SoC (tests.integration.test_live_curve.TcpSoc), then, for each tcp endpoint (the
relay's front, vdsp0's control endpoint, vdsp0's firmware endpoint), opens CONNS raw tcp
connections that each send a ZMTP 3.0 greeting for CURVE and then the start of one huge
command frame (declared FRAME bytes, FRAME - 1 sent), and keep them open. Prints the peak RSS
growth of the relay, the core and the firmware, and whether a client with an allowed key is
still served during the flood.

    .venv/bin/python scripts/preauth_flood.py [--conns 12] [--frame-mib 60] [--hold 5]
"""
from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GREETING = b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"CURVE".ljust(20, b"\0") + b"\0" + b"\0" * 31


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def attacker(port: int, frame: int, stop: threading.Event, sent: list) -> None:
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(GREETING)
        sock.sendall(b"\x06" + struct.pack(">Q", frame))
        chunk, left = b"x" * (1 << 20), frame - 1
        while left > 0 and not stop.is_set():
            n = sock.send(chunk[:min(len(chunk), left)])
            left -= n
            sent.append(n)
        stop.wait()
        sock.close()
    except OSError:
        pass        # cut by the server: what we want


def children(pid: int) -> list[int]:
    out = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if f"\nPPid:\t{pid}\n" in text:
            out.append(int(status.parent.name))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conns", type=int, default=12)
    ap.add_argument("--frame-mib", type=float, default=60)
    ap.add_argument("--hold", type=float, default=5.0)
    args = ap.parse_args()
    from arm_side import Soc, opids
    from tests.integration.test_live_curve import running_tcp_soc
    with running_tcp_soc() as soc:
        core = soc.procs["vdsp0"].pid
        # the core's firmware: a child of the core's starter, titled "vdsp: vdsp0 firmware"
        fw = next(p for s in children(core) for p in children(s)
                  if Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"vdsp: vdsp0 firmware"))
        pids = {"relay": soc.procs["relay"].pid, "vdsp0": core, "vdsp0 firmware": fw}
        ports = {"relay": soc.relay, "vdsp0": soc.ctl["vdsp0"], "vdsp0 firmware": soc.fw["vdsp0"]}
        frame = int(args.frame_mib * (1 << 20))
        print(f"{args.conns} connections per endpoint, each a CURVE greeting and {frame - 1} bytes of a "
              f"{frame}-byte command frame, held {args.hold:g} s")
        for name, pid in pids.items():
            before = rss_mb(pid)
            stop, sent = threading.Event(), []
            port = int(ports[name].rsplit(":", 1)[1])
            threads = [threading.Thread(target=attacker, args=(port, frame, stop, sent), daemon=True)
                       for _ in range(args.conns)]
            for t in threads:
                t.start()
            peak, end = before, time.monotonic() + args.hold
            served = None
            while time.monotonic() < end:
                peak = max(peak, rss_mb(pid))
                if served is None and time.monotonic() > end - args.hold / 2:
                    with Soc(autostart_relay=False, connect_timeout_s=10) as client:
                        served = "core" in client.call(opids.PING)
                time.sleep(0.05)
            stop.set()
            for t in threads:
                t.join(5)
            print(f"{name:15} RSS {before:6.1f} MB -> peak {peak:6.1f} MB (+{peak - before:.1f}); "
                  f"{sum(sent) / 2**20:.0f} MiB sent by the peers; a keyed client served meanwhile: {bool(served)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

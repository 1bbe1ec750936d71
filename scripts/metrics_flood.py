"""Threads and memory of the relay under many idle /metrics connections (issue 22).

    .venv/bin/python scripts/metrics_flood.py [--conns 3000]
"""
from __future__ import annotations

import argparse
import resource
import socket
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def status(pid: int) -> tuple[int, float]:
    threads, rss = 0, 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            threads = int(line.split()[1])
        elif line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return threads, rss


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conns", type=int, default=3000)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.conns + 256)), hard))
    from vdsp_sim.soc.private_soc import free_tcp_ports, private_soc
    port = free_tcp_ports(1)[0]
    with private_soc(relay_args=("--metrics-port", str(port))) as private:
        pid = private.relay_pid()
        assert pid
        url = f"http://127.0.0.1:{port}/metrics"
        urllib.request.urlopen(url, timeout=10).read()
        before = status(pid)
        conns = []
        for _ in range(args.conns):
            try:
                conns.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError as exc:
                print(f"connection {len(conns)}: {exc}")
                break
        time.sleep(1.0)
        during = status(pid)
        t0 = time.monotonic()
        ok = urllib.request.urlopen(url, timeout=10).status == 200
        took = time.monotonic() - t0
        for sock in conns:
            sock.close()
        print(f"relay: threads {before[0]} -> {during[0]}, RSS {before[1]:.1f} -> {during[1]:.1f} MB with "
              f"{len(conns)} idle /metrics connections; a scrape meanwhile: {'200' if ok else 'failed'} in {took:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

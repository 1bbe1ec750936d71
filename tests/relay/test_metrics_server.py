"""The relay's /metrics endpoint on real sockets in this process: bounded threads and connections."""
from __future__ import annotations

import socket
import threading
import urllib.request

from relay_server import metrics
from tests.conftest import wait_until


def _scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def test_idle_connections_do_not_make_threads_and_scrapes_are_still_answered():
    """Before, prometheus_client's server started a thread per connection: 3,000 idle
    connections from uid 65534 gave the relay 3,004 threads."""
    m = metrics.RelayMetrics(ddr_dir="/nonexistent")
    m.submitted.labels("0x0001", "any", "normal").inc()
    before = threading.active_count()
    server = metrics.serve(m, 0, "127.0.0.1")
    port = server.server_address[1]
    idle = []
    try:
        for _ in range(50):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        text = _scrape(port)       # answered after the 50 were accepted
        assert 'vdsp_tasks_submitted_total{core="any",op="0x0001",priority_class="normal"} 1.0' in text
        assert threading.active_count() <= before + 1          # one server thread, whatever the clients
    finally:
        for sock in idle:
            sock.close()
        server.shutdown()


def test_connections_beyond_the_limit_close_the_oldest_and_big_requests_are_refused(monkeypatch):
    monkeypatch.setattr(metrics, "MAX_CONNECTIONS", 8)
    server = metrics.serve(metrics.RelayMetrics(ddr_dir="/nonexistent"), 0, "127.0.0.1")
    port = server.server_address[1]
    idle = []
    try:
        for _ in range(20):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        assert wait_until(lambda: server.closed_for_room >= 12, 5)
        assert len(server.conns) <= 8
        assert "vdsp_relay_clients" in _scrape(port)           # a scrape gets in all the same
        big = socket.create_connection(("127.0.0.1", port), timeout=5)
        big.sendall(b"GET /metrics HTTP/1.0\r\nX: " + b"a" * 20000)
        assert big.recv(100).startswith(b"HTTP/1.0 431")
        big.close()
    finally:
        for sock in idle:
            sock.close()
        server.shutdown()

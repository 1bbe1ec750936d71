"""vdsp_board.admission on real ZeroMQ sockets in this process: connection counts and limits."""
from __future__ import annotations

import zmq

from tests.conftest import wait_until
from vdsp_board.admission import PREAUTH_BUDGET, Admission, max_pending_for


def test_pending_handshakes_times_the_largest_frame_stay_within_the_budget():
    for frame in (64 << 20, 1 << 20, 4096):
        assert max_pending_for(frame) * frame <= PREAUTH_BUDGET
    assert max_pending_for(64 << 20) == 1


def test_connections_beyond_the_limit_are_shut_down(tmp_path):
    ctx = zmq.Context()
    server = ctx.socket(zmq.ROUTER)
    admission = Admission(server, "test", max_frame=1 << 20, max_connections=3)
    endpoint = f"ipc://{tmp_path}/s.sock"
    server.bind(endpoint)
    clients = []
    try:
        for _ in range(5):
            sock = ctx.socket(zmq.DEALER)
            sock.linger = 0
            sock.connect(endpoint)
            clients.append(sock)
        assert wait_until(lambda: admission.refused >= 2, 5)
        assert wait_until(lambda: admission.counts() == (0, 3), 5), admission.counts()  # ipc: nothing pending
        assert server.maxmsgsize == 1 << 20
        clients[0].send(b"hello")           # the connections let in are served
        assert server.poll(5000) and server.recv_multipart()[1] == b"hello"
    finally:
        for sock in clients:
            sock.close(0)
        admission.stop()
        server.close(0)
        ctx.term()


def test_stop_ends_the_idle_monitor_thread_at_once_not_at_its_next_poll(tmp_path, monkeypatch):
    # An idle server's monitor thread sleeps long between looks (it costs CPU every wake-up):
    # stop() must wake it, or every server's close would wait for that sleep.
    from vdsp_board import admission as mod
    monkeypatch.setattr(mod, "IDLE_POLL_MS", 60_000)
    ctx = zmq.Context()
    server = ctx.socket(zmq.ROUTER)
    admission = Admission(server, "test", max_frame=1 << 20)
    server.bind(f"ipc://{tmp_path}/s.sock")
    try:
        assert wait_until(lambda: admission._thread.is_alive(), 5)
        admission.stop()        # joins for at most 2 s
        assert not admission._thread.is_alive()
    finally:
        server.close(0)
        ctx.term()


def test_when_full_a_connection_of_another_process_takes_the_place_of_the_newest_of_the_one_holding_most(
        tmp_path):
    """Issue 40, point 7: one process holding every place (a HELLO flood) kept every other client
    out; now a process holding fewer takes the place of the newest connection of the one holding
    the most, and that one's next connection is refused (it would still hold the most)."""
    import os
    import socket
    import subprocess
    import sys
    ctx = zmq.Context()
    server = ctx.socket(zmq.ROUTER)
    admission = Admission(server, "test", max_frame=1 << 20, max_connections=3)
    endpoint = f"ipc://{tmp_path}/s.sock"
    server.bind(endpoint)
    ours = []
    other = None
    try:
        for _ in range(3):
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(endpoint[6:])
            ours.append(sock)
        assert wait_until(lambda: admission.counts() == (0, 3), 5), admission.counts()
        other = subprocess.Popen([sys.executable, "-c", "import socket, sys; s = socket.socket(socket.AF_UNIX); "
                                  "s.connect(sys.argv[1]); print('up', flush=True); sys.stdin.read()", endpoint[6:]],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert other.stdout.readline().strip() == "up"
        assert wait_until(lambda: admission.displaced == 1, 5)
        assert dict(admission.held) == {("process", os.getpid()): 2, ("process", other.pid): 1}
        ours[2].settimeout(30)
        while ours[2].recv(4096):           # our newest was shut down: its stream ends (after ZMTP's greeting)
            pass
        late = socket.socket(socket.AF_UNIX)
        late.connect(endpoint[6:])
        ours.append(late)
        assert wait_until(lambda: admission.refused == 1, 5)     # ours would still hold the most: refused
        assert dict(admission.held) == {("process", os.getpid()): 2, ("process", other.pid): 1}
    finally:
        if other is not None:
            other.stdin.close()
            other.wait(timeout=30)
        for sock in ours:
            sock.close()
        admission.stop()
        server.close(0)
        ctx.term()

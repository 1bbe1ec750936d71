"""vdsp_board.identity.admission on real ZeroMQ sockets in this process: connection counts and limits."""
from __future__ import annotations

import threading

import zmq

from tests.conftest import wait_until
from vdsp_board.identity.admission import PREAUTH_BUDGET, Admission, max_pending_for


def _raw_server(short_dir, max_connections: int) -> tuple:
    """(context, ROUTER, its Admission, endpoint): an ipc server that keeps raw connections (which
    never greet) however slow the host. short_dir: tmp_path under a long TMPDIR is past 107 characters."""
    ctx = zmq.Context()
    server = ctx.socket(zmq.ROUTER)
    admission = Admission(server, "test", max_frame=1 << 20, max_connections=max_connections)
    server.handshake_ivl = 600_000
    endpoint = f"ipc://{short_dir}/s.sock"
    server.bind(endpoint)
    return ctx, server, admission, endpoint


def _close_raw(ctx, server, admission, socks: list) -> None:
    for sock in socks:
        sock.close()
    admission.stop()
    server.close(0)
    ctx.term()


def _raw_connections(endpoint: str, count: int) -> list:
    import socket
    out = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(endpoint[6:])
        out.append(sock)
    return out


def test_pending_handshakes_times_the_largest_frame_stay_within_the_budget():
    for frame in (64 << 20, 1 << 20, 4096):
        assert max_pending_for(frame) * frame <= PREAUTH_BUDGET
    assert max_pending_for(64 << 20) == 1


def test_connections_beyond_the_limit_are_shut_down(short_dir):
    ctx = zmq.Context()
    server = ctx.socket(zmq.ROUTER)
    admission = Admission(server, "test", max_frame=1 << 20, max_connections=3)
    endpoint = f"ipc://{short_dir}/s.sock"     # short_dir: tmp_path under a long TMPDIR is past 107 characters
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


def test_stop_ends_the_idle_monitor_thread_at_once_not_at_its_next_poll(short_dir, monkeypatch):
    # An idle server's monitor thread sleeps long between looks (it costs CPU every wake-up):
    # stop() must wake it, or every server's close would wait for that sleep.
    from vdsp_board.identity import admission as mod
    monkeypatch.setattr(mod, "IDLE_POLL_MS", 60_000)
    ctx = zmq.Context()
    server = ctx.socket(zmq.ROUTER)
    admission = Admission(server, "test", max_frame=1 << 20)
    server.bind(f"ipc://{short_dir}/s.sock")
    try:
        assert wait_until(lambda: admission._thread.is_alive(), 5)
        admission.stop()        # joins for at most 2 s
        assert not admission._thread.is_alive()
    finally:
        server.close(0)
        ctx.term()


def test_connections_opened_at_once_over_tcp_lose_nothing_to_the_handshake_limit(tmp_path):
    """A CURVE server that keeps one handshake at a time (``max_pending=1``, as with 64 MiB
    frames): eight clients connect at once and send at once, twelve times over. Each message
    is answered: the admission closes only connections whose handshake has not succeeded (their
    client connects again, what it sent waiting in its queue), never one that has (issue 40:
    handshake, then disconnect within 1 ms, and the messages sent on it lost)."""
    from vdsp_board.identity import curve
    from vdsp_sim.soc.private_soc import free_tcp_ports
    curve.init(tmp_path)
    ctx = zmq.Context()
    server = ctx.socket(zmq.ROUTER)
    server.linger = 0
    admission = Admission(server, "test", max_frame=1 << 20, max_pending=1)
    gate = curve.Gate(ctx, tmp_path)
    endpoint = f"tcp://127.0.0.1:{free_tcp_ports(1)[0]}"
    curve.secure_server(server, endpoint, tmp_path)
    server.bind(endpoint)
    stop = threading.Event()

    def echo() -> None:
        while not stop.is_set():
            if server.poll(50):
                server.send_multipart(server.recv_multipart())
    echoer = threading.Thread(target=echo, daemon=True)
    echoer.start()
    public, secret = curve.load_pair(tmp_path / "client.key_secret")
    try:
        for burst in range(12):
            clients = []
            for _ in range(8):
                sock = ctx.socket(zmq.DEALER)
                sock.linger = 0
                sock.curve_serverkey = curve.load_public(tmp_path / "server.key")
                sock.curve_publickey, sock.curve_secretkey = public, secret
                sock.connect(endpoint)
                clients.append(sock)
            for sock in clients:
                for i in range(50):
                    sock.send(b"%d" % i)
            answered = []
            for sock in clients:
                got = 0
                while got < 50 and sock.poll(10000):
                    sock.recv()
                    got += 1
                answered.append(got)
                sock.close(0)
            assert answered == [50] * 8, (burst, answered)
        assert admission.evicted > 0        # the limit was reached: handshakes were closed
    finally:
        stop.set()
        echoer.join(5)
        admission.stop()
        gate.stop()
        server.close(0)
        ctx.term()


def test_a_connection_with_a_whole_handshake_is_kept_while_a_yes_is_in_flight(monkeypatch):
    """The rule the cuts follow (``_Ledger``), without sockets: a connection short of a whole
    client handshake can always be cut (its READY waits for the look to end); one with a whole
    handshake only while no yes of the ZAP handler is on its way (it may be that yes's); a yes is
    done when a connection is seen authenticated, or once every admission looked after it and
    found no connection where its own could be."""
    from types import SimpleNamespace

    from vdsp_board.identity import admission as mod
    ledger = mod._Ledger()
    monkeypatch.setattr(mod, "_LEDGER", ledger)
    a, b = SimpleNamespace(looked_at=-1, whole=0), SimpleNamespace(looked_at=-1, whole=0)
    ledger.admissions = [a, b]
    assert Admission._unauthenticated(0, mod.HANDSHAKE_MIN)
    mod.zap_verdict(True)
    assert ledger.in_flight() == 1
    assert Admission._unauthenticated(0, mod.HANDSHAKE_MIN - 1)
    assert not Admission._unauthenticated(0, mod.HANDSHAKE_MIN)
    assert not Admission._unauthenticated(mod.AUTH_SENT_MIN, 100)          # authenticated: never
    a.looked_at, a.whole = 1, 1
    ledger.settle()
    assert ledger.in_flight() == 1                  # b has not looked since; a's may be the one
    b.looked_at = 1
    ledger.settle()
    assert ledger.in_flight() == 1                  # a's may still be the one
    ledger.authenticated()
    ledger.authenticated()                          # one without a yes (no ZAP handler): not below 0
    assert ledger.in_flight() == 0
    mod.zap_verdict(True)
    mod.zap_verdict(False)                          # a no is no READY
    a.looked_at, a.whole, b.looked_at = 2, 0, 2     # its connection closed before it was seen
    ledger.settle()
    assert ledger.in_flight() == 0
    assert Admission._unauthenticated(0, mod.HANDSHAKE_MIN)


def test_when_full_a_connection_of_another_process_takes_the_place_of_the_newest_of_the_one_holding_most(
        short_dir):
    """Issue 40, point 7: one process holding every place (a HELLO flood) kept every other client
    out; now a process holding fewer takes the place of the newest connection of the one holding
    the most, and that one's next connection is refused (it would still hold the most)."""
    import os
    import socket
    import subprocess
    import sys
    ctx, server, admission, endpoint = _raw_server(short_dir, 3)
    ours = []
    other = None
    try:
        ours += _raw_connections(endpoint, 3)
        assert wait_until(lambda: admission.counts() == (0, 3), 5), admission.counts()
        other = subprocess.Popen([sys.executable, "-c", "import socket, sys; s = socket.socket(socket.AF_UNIX); "
                                  "s.connect(sys.argv[1]); print('up', flush=True); sys.stdin.read()", endpoint[6:]],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert other.stdout.readline().strip() == "up"
        expected = {("process", os.getpid()): 2, ("process", other.pid): 1}

        def held() -> dict:
            with admission._lock:       # the admission thread counts the new connection after the displacement
                return dict(admission.held)
        assert wait_until(lambda: admission.displaced == 1 and held() == expected, 5), held()
        ours[2].settimeout(30)
        while ours[2].recv(4096):           # our newest was shut down: its stream ends (after ZMTP's greeting)
            pass
        late = socket.socket(socket.AF_UNIX)
        late.connect(endpoint[6:])
        ours.append(late)
        assert wait_until(lambda: admission.refused == 1, 5)     # ours would still hold the most: refused
        assert held() == expected
    finally:
        if other is not None:
            other.stdin.close()
            other.wait(timeout=30)
        _close_raw(ctx, server, admission, ours)


_ROOM = r"""
import resource
from vdsp_board.identity import admission
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))     # below a listening socket's cap
admission.room_for(admission.MAX_CONNECTIONS)
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)
"""


def test_a_listening_socket_gets_descriptors_for_all_its_connections():
    # a normal user's soft limit (1,024 by default) was the cap itself: at the cap nothing could be accepted
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _ROOM], capture_output=True, text=True, timeout=60, check=True)
    soft, hard = (int(x) for x in out.stdout.split())
    assert soft >= min(hard, 1024 + 64), out.stdout


_HOLD = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX)
sys.stdin.readline()                    # "connect"
s.connect(sys.argv[1])
print("up", flush=True)
sys.stdin.readline()                    # "check": was this connection shut down by the server?
s.settimeout(2.0)
try:
    while s.recv(4096):                 # the server's ZMTP greeting, then nothing: kept
        pass
    print("cut", flush=True)
except socket.timeout:
    print("kept", flush=True)
sys.stdin.read()
"""


def test_a_displacement_decided_late_shuts_down_the_connection_it_chose_not_one_that_took_its_number(short_dir):
    """The admission thread reads the monitor's events late on a busy host. A connection it chose
    to displace (the newest of the peer holding the most) may have closed meanwhile, and its
    descriptor number gone to a new connection of another process: that one was shut down in its
    place. Beside a HELLO flood on 24 busy CPUs a client's connection, its HELLO verified, was cut
    so, and its next task went out on ZeroMQ's new connection, unknown to the relay (HB_DSP_RELAY_
    UNAVAILABLE, "no longer knows this connection's HELLO"). Here the thread is held while another
    process connects (this one displaces ours), ours closes its newest and a third process's
    connection takes that number: the third is kept, ours' other connection is the one cut.
    Holds docs/security.md: "A connection is cut by its socket (its inode, checked on a duplicate
    of the descriptor), never by a descriptor number another connection may have taken since"."""
    import os
    import select
    import socket
    import subprocess
    import sys
    ctx, server, admission, endpoint = _raw_server(short_dir, 2)
    ours, procs = [], []

    def holder() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", _HOLD, endpoint[6:]], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    def say(proc: subprocess.Popen, line: str) -> str:
        """``line`` to a holder, and its answer within 60 s (a deadline of its own: a hung child fails)."""
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, f"the holder did not answer {line!r} within 60 s"
        return proc.stdout.readline().strip()

    def sockets() -> dict[int, int]:
        """This process's unix sockets: descriptor -> inode (the server's connections among them)."""
        out = {}
        for name in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                continue
            if target.startswith("socket:["):
                out[int(name)] = int(target[8:-1])
        return out
    try:
        ours += _raw_connections(endpoint, 2)
        assert wait_until(lambda: admission.counts() == (0, 2), 5), admission.counts()
        with admission._lock:
            newest = list(admission.conns)[-1]      # the server's descriptor of ours[1]
        other, third = holder(), holder()          # their pipes made now: no descriptor of ours is freed below
        before = sockets()
        with admission._lock:                       # the admission thread reads no event until this block ends
            assert say(other, "connect") == "up"    # another process: it displaces ours' newest, decided below
            assert wait_until(lambda: len(sockets()) == len(before) + 1, 10)       # accepted by ZeroMQ
            ours[1].shutdown(socket.SHUT_RDWR)      # ours' newest ends (its descriptor here stays taken) and
            assert wait_until(lambda: sockets().get(newest) != before[newest], 10)      # the server closes its own
            assert say(third, "connect") == "up"    # the next connection takes that number
            assert wait_until(lambda: newest in sockets() and sockets()[newest] != before[newest], 10), \
                "the third connection did not take the closed connection's descriptor number"
        assert wait_until(lambda: admission.displaced == 1, 10)
        assert say(third, "check") == "kept"
        ours[0].settimeout(30)
        while ours[0].recv(4096):                   # ours' other connection was the one displaced
            pass
        from pathlib import Path
        docs = " ".join((Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text().split())
        assert ("A connection is cut by its socket (its inode, checked on a duplicate of the descriptor), never by a "
                "descriptor number another connection may have taken since the decision.") in docs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=30)
        _close_raw(ctx, server, admission, ours)

"""A flood of HELLO claims from one peer does not keep another client out.

Before, the HELLO claims a server judges off its loop (``vdsp_board.identity.hellogate``) were bounded
in all only: 600 owner claims sent at once by one process of the same user filled the 256
places, and a ``Soc()`` opened meanwhile failed at once with HB_DSP_BUSY, which the SDK did not
retry; under a sustained flood a legitimate open took up to 9.7 s or failed. Now each peer (an
ipc process, a CURVE key over tcp) has a bounded share, a claim of a peer with fewer claims
waiting takes the place of the newest claim of the peer with the most, claims are judged in
turn across peers, and the SDK says HELLO again after HB_DSP_BUSY within its connect timeout.

The flood is another process (same user) with 600 connections, each claiming an owner whose lock
it does not hold (judging each reads all its fds: the slowest claim there is), at once or again
and again; meanwhile this process opens Socs and runs a task with its own buffer (a task that
needs the HELLO's verdict: in direct mode it goes to the firmware, whose gate judged the HELLO).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from arm_side import CORE_0, CORE_1, Soc, opids
from tests.live import LiveSoc
from vdsp_board.processes import rundir
from vdsp_board.memory import ddr
from vdsp_board.identity import curve
from vdsp_board.identity.admission import MAX_CONNECTIONS

pytestmark = pytest.mark.live
# Every test here runs with no other test of the run beside it (``exclusive``): those that bound how
# long an open takes, and the one with 1,024 flooding connections, which bounds no time but whose
# flood spins for as long as its ten opens take: alone it took 11 s in a suite run on the 2-CPU VM,
# beside the other workers 69 s, its flood holding one of the two CPUs all along (the module's
# CPU, with every process it started: 80 -> 48 CPU-s).
ROOT = Path(__file__).resolve().parents[2]
# An open during a flood is slow at worst, never refused: refused, it would fail at the SDK's 20 s
# connect timeout. 3 s held on a quiet host (0.03-0.3 s here) but not in CI's 3.13 run beside the C
# compiles of other workers (5.7 s); how fast an open is is vdsp bench identity's to say.
OPEN_WITHIN_S = 15.0

FLOOD = textwrap.dedent("""
    import json, resource, sys, threading, time
    import zmq
    from protocol import messages, wire
    from vdsp_board.identity import curve
    endpoints, conns, owner, style = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    stop = threading.Event()     # set when the test closes our stdin
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    ctx = zmq.Context()
    ctx.max_sockets = 8192
    socks = []
    plain = wire.encode(messages.hello(1, "client", pid=1, name="flood"))
    for endpoint in endpoints:
        # over ipc 16 connections set up at once, each answered before the next 16 (one after the
        # other took 1-2 s of the 600); over tcp one at a time: a server takes few CURVE handshakes at
        # once (vdsp_board.identity.admission), and 16 at once took twice as long. The burst then is one burst.
        batch_size = 1 if endpoint.startswith("tcp://") else 16
        for first in range(0, conns, batch_size):
            batch = []
            for _ in range(min(batch_size, conns - first)):
                sock = ctx.socket(zmq.DEALER)
                sock.linger = 0
                curve.secure_client(sock, endpoint)
                sock.connect(endpoint)
                sock.send_multipart(plain)
                batch.append(sock)
            for sock in batch:
                assert sock.poll(30000), "no READY"
                sock.recv_multipart()
            socks += batch
    hello = wire.encode(messages.hello(1, "client", pid=1, owner=owner, name="flood"))
    sent = answered = busy = 0
    for sock in socks:
        sock.send_multipart(hello)
        sent += 1
    print("flooding", flush=True)
    began = time.monotonic()
    deadline = began + 120
    # at least 3 rounds over every connection, however soon the test says stop (its opens took 0.03 s
    # each here); a flood goes on until the server turned away as many claims as there are connections
    # (an answer may come later than the opens: 0 of 3,900 claims were answered in 0.2 s once)
    rounds, stopped = 0, False
    while (not stop.is_set() or rounds < 3 or (style == "flood" and busy < len(socks))) and \
            time.monotonic() < deadline:
        if stop.is_set() and not stopped:       # told to stop: 30 s more at most (result() waits 60)
            stopped, deadline = True, min(deadline, time.monotonic() + 30)
        rounds += 1
        for sock in socks:
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if wire.decode(frames).command not in (wire.Command.READY, wire.Command.ERROR):
                    continue        # a core state EVENT
                answered += 1
                busy += wire.decode(frames).body.get("code") == -6000293
                if style == "burst":    # this connection's claim was judged (or refused): claim again
                    sock.send_multipart(hello)
                    sent += 1
            if style == "flood":       # every connection says HELLO again, as fast as it can
                try:
                    sock.send_multipart(hello, zmq.NOBLOCK)
                    sent += 1
                except zmq.Again:       # the server does not keep up: its queue for us is full
                    pass
        if style == "burst":
            time.sleep(0.001)
    print(json.dumps({"sent": sent, "answered": answered, "busy": busy, "s": round(time.monotonic() - began, 2)}),
          flush=True)
""")


class Flood:
    """The flooding process: ``conns`` connections to each of ``endpoints``, each claiming
    ``owner`` (whose lock that process does not hold). ``style`` "burst": one claim per
    connection at once, each claimed again as soon as it is answered; "flood": every connection
    claims again and again without waiting. Until :meth:`result`."""

    def __init__(self, endpoints: list[str], conns: int, owner: int, style: str, env: dict | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", FLOOD, json.dumps(endpoints), str(conns), str(owner), style],
                                     cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=dict(env or os.environ, PYTHONPATH=str(ROOT)))
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "flooding"

    def result(self) -> dict:
        """Stop; what was sent and answered (``busy``: refused with HB_DSP_BUSY)."""
        out, _ = self.proc.communicate(timeout=60)
        return json.loads(out.strip().splitlines()[-1])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def open_and_run(mode: str, **kw) -> float:
    """Seconds a new Soc took to open and run a task with its own buffer on each core."""
    t0 = time.monotonic()
    with Soc(mode=mode, autostart_relay=False, **kw) as soc:
        buf = soc.mem.alloc(64)
        for core in (CORE_0, CORE_1):
            assert soc.call(opids.FILL, outputs=[buf], params={"value": 7}, core=core, timeout_ms=20000) == {"bytes": 64}
        return time.monotonic() - t0


@pytest.fixture(scope="module")
def soc():
    soc = LiveSoc()
    soc.start()
    try:
        yield soc
    finally:
        soc.stop_and_check()


def targets(soc: LiveSoc, mode: str) -> list[str]:
    """The relay's endpoint, or both firmwares' (their default ones, where direct clients go)."""
    if mode == "relay":
        return [rundir.relay_endpoint(soc.rt)]
    return [rundir.fw_endpoint_for(control) for control in rundir.core_endpoints(soc.rt).values()]


@pytest.mark.exclusive     # it loads the host and measures time: no other test of the run beside it
@pytest.mark.parametrize("mode", ["relay", "direct"])
def test_a_soc_opens_during_a_burst_of_600_hellos_from_another_process(soc, mode):
    flood = Flood(targets(soc, mode), 600, ddr.current_owner().id, "burst")
    try:
        took = open_and_run(mode)
        got = flood.result()
    finally:
        flood.close()
    print(f"{mode}: opened and ran in {took:.2f} s during a burst: {got}")
    assert took < OPEN_WITHIN_S


@pytest.mark.exclusive     # it loads the host and measures time: no other test of the run beside it
@pytest.mark.parametrize("mode", ["relay", "direct"])
def test_a_soc_opens_during_a_sustained_hello_flood_from_another_process(soc, mode):
    servers = targets(soc, mode)
    flood = Flood(servers, 300, ddr.current_owner().id, "flood")
    try:
        took = [open_and_run(mode) for _ in range(3)]
        got = flood.result()
    finally:
        flood.close()
    print(f"{mode}: opened and ran in {', '.join(f'{t:.2f}' for t in took)} s during a flood: {got}")
    conns = 300 * len(servers)      # a flood all along the opens: each connection claimed again at least twice,
    assert got["sent"] >= 3 * conns and got["busy"] >= conns, got   # and the servers turned away as many
    assert max(took) < OPEN_WITHIN_S


@pytest.mark.exclusive     # its flood spins as long as the opens take: alone, not stretched by the others
def test_a_soc_opens_beside_a_flood_that_holds_every_connection_the_relay_takes(soc):
    """Issue 40, point 7: beside a same-user process flooding HELLO claims (without lock_fd) on
    ~1,000 connections, 1 of 10 opens failed HB_DSP_RELAY_UNAVAILABLE "no relay answers at
    ipc://…/relay.sock" while the relay was alive. A listening socket takes at most
    MAX_CONNECTIONS (1,024) connections, and every further one was shut down at once: the flood
    with the SoC's other connections reached that, and the new client's connection (and each
    made again) was cut until its connect timeout. Now the connection of a peer holding fewer
    connections takes the place of the newest of the peer holding the most (vdsp_board.identity.admission):
    an open during such a flood is slow at worst, never refused as unreachable."""
    flood = Flood(targets(soc, "relay"), MAX_CONNECTIONS, ddr.current_owner().id, "flood")
    took = []
    try:
        for _ in range(10):     # each opens, and runs a task with its buffer (slow beside a CPU hog: no limit)
            t0 = time.monotonic()
            # slow is allowed, refused is not: on 2 busy CPUs (the pure modules on 3.13 beside the run's
            # other workers) the relay once took over the default 20 s to answer the HELLO of a connection
            # it had taken; the refusal this test is about cut every connection, whatever the timeout
            with Soc(mode="relay", autostart_relay=False, connect_timeout_s=120) as client:
                buf = client.mem.alloc(64)
                assert client.call(opids.FILL, outputs=[buf], params={"value": 7}, timeout_ms=120000) == {"bytes": 64}
            took.append(time.monotonic() - t0)
        got = flood.result()
    finally:
        flood.close()
    print(f"opened and ran in {', '.join(f'{t:.2f}' for t in took)} s beside {MAX_CONNECTIONS} flooding "
          f"connections: {got}")
    assert len(took) == 10


@pytest.mark.exclusive     # it loads the host and measures time: no other test of the run beside it
def test_over_tcp_a_soc_opens_during_a_hello_flood_from_another_key():
    from tests.integration.test_live_curve import running_tcp_soc
    with running_tcp_soc() as tcp:
        curve.create(tcp.keys, "mallory", role=curve.CLIENT)
        env = dict(os.environ, VDSP_CLIENT_KEY=str(tcp.keys / "mallory.key_secret"))
        burst = Flood([tcp.relay], 600, ddr.current_owner().id, "burst", env)
        try:
            took = [open_and_run("relay")]
            burst.result()
        finally:
            burst.close()
        flood = Flood([tcp.relay], 300, ddr.current_owner().id, "flood", env)
        try:
            took += [open_and_run("relay") for _ in range(3)]
            got = flood.result()
        finally:
            flood.close()
        print(f"tcp: opened and ran in {', '.join(f'{t:.2f}' for t in took)} s during a burst, then a flood: {got}")
        # the flood went on all along the opens: each of its 300 connections said HELLO again at least twice,
        # and the relay turned away at least as many as there are connections. (A fixed count, busy > 1000,
        # measured how long the opens took rather than the flood: CI's 3.13 run got 742 in four opens of 0.04 s.)
        assert got["sent"] >= 3 * 300 and got["busy"] >= 300, got
        assert max(took) < OPEN_WITHIN_S

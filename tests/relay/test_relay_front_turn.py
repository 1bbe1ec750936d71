"""A burst on the relay's front cannot hold a loop turn: the front is read for at most
``FRONT_TURN_S`` a turn, then the firmware links are served and the turn's replies sent.

Beside 300 forked processes that each said HELLO 12 times (issue 40 point 4), a client's PING
through the relay took up to 2.4 s: a turn read up to 256 front messages, each HELLO claim
taken apart with its syscalls, before the firmware's reply to the PING was read. The measurement
is ``scripts/fork_hello_flood.py``; here a real RelayServer's front reader is timed by a clock
that advances 1 ms per reading, so the bound is checked without timing anything."""
from __future__ import annotations

import shutil

import zmq

from protocol import messages, wire
from relay_server import server as server_mod
from relay_server.server import RelayServer
from tests.conftest import wait_until
from vdsp_sim.soc.private_soc import fresh_runtime_dir


def test_a_turn_reads_the_front_for_its_time_budget_only_and_leaves_the_rest_for_the_next(monkeypatch):
    rt = fresh_runtime_dir()
    monkeypatch.setenv("VDSP_RUNTIME_DIR", str(rt))
    relay = RelayServer(f"ipc://{rt}/relay.sock", {"vdsp0": f"ipc://{rt}/c0.sock", "vdsp1": f"ipc://{rt}/c1.sock"})
    client = relay.ctx.socket(zmq.DEALER)
    client.linger = 0
    try:
        client.connect(f"ipc://{rt}/relay.sock")
        for msg_id in range(1, 301):            # QUERYs: each answered, none held by the HELLO gate
            client.send_multipart(wire.encode(messages.query(msg_id, "stats")))
        assert wait_until(lambda: relay.front.poll(0), 10)
        clock = [1000.0]

        def monotonic() -> float:
            clock[0] += 0.001                   # each look at the clock: 1 ms later
            return clock[0]
        monkeypatch.setattr(server_mod.time, "monotonic", monotonic)
        relay._drain_front()
        relay.flush()
        got = 0
        while client.poll(2000 if got == 0 else 200):
            client.recv_multipart()
            got += 1
        budget_reads = int(server_mod.FRONT_TURN_S / 0.001)
        assert 1 <= got <= budget_reads + 2, f"one turn answered {got} of 300 waiting requests"
        assert relay.front.poll(0), "the rest waits for the next turn"
        monkeypatch.undo()
    finally:
        client.close(0)
        relay.close()
        shutil.rmtree(rt, ignore_errors=True)

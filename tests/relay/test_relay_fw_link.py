"""The relay's loop never blocks on a firmware link whose firmware refused the relay's key.

libzmq ends a connection whose CURVE handshake the server denied and does not connect again; a
DEALER then has nowhere to queue a message. The relay sent tasks to a firmware with a blocking
send: the first task after such a refusal stopped its one loop for good (every client and core of
the SoC with it). Now the send does not block: the tasks sent ahead there fail, and the link is
opened afresh (tests/relay/test_relay_engine.py has the engine's side).

A real RelayServer (ipc front, in a private runtime directory) whose vdsp1 firmware link is a
DEALER that a real CURVE server on loopback tcp refused (``refusing_server``: tests/conftest.py).
"""
from __future__ import annotations

import shutil
import threading

import zmq

from protocol import messages, wire
from relay_server.effects import ToFw
from relay_server.server import RelayServer
from tests.conftest import wait_until
from vdsp_sim.soc.private_soc import fresh_runtime_dir

FLUSH_WITHIN_S = 5.0


def _refused_dealer(ctx: zmq.Context, endpoint: str, server_key: str) -> zmq.Socket:
    """A DEALER whose connection the server refused: it takes no message any more."""
    from vdsp_board.identity import curve
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    curve.secure_client(sock, endpoint, server_key=server_key)
    sock.connect(endpoint)

    def takes_none() -> bool:
        try:
            sock.send(b"probe", zmq.NOBLOCK)
            return False
        except zmq.Again:
            return True
    assert wait_until(takes_none, 10, 0.05), "the refused connection still takes messages"
    return sock


def test_a_task_for_a_firmware_that_refused_the_relay_does_not_stop_its_loop(refusing_server, monkeypatch):
    endpoint, server_key = refusing_server
    rt = fresh_runtime_dir()        # under /tmp, short: an ipc path has 107 characters at most
    monkeypatch.setenv("VDSP_RUNTIME_DIR", str(rt))
    relay = RelayServer(f"ipc://{rt}/relay.sock", {"vdsp0": f"ipc://{rt}/c0.sock", "vdsp1": f"ipc://{rt}/c1.sock"})
    engine = relay.engine
    blocked = False
    try:
        for index, name in enumerate(("vdsp0", "vdsp1")):   # both cores running, their firmware links opened
            engine.on_ctl(index, wire.encode(messages.ready(1, name, "core", state="running",
                                                            fw_endpoint=f"ipc://{rt}/{name}.fw.sock")), 0.0)
        relay.flush()
        stuck = _refused_dealer(relay.ctx, endpoint, server_key)
        # the link closed as the relay closes one (its monitor first: a monitor left bound at
        # inproc://monitor.s-<fd> refused the monitor of the next socket given that fd number)
        relay._close_link(relay.fw[1], relay.fw_monitors[1])
        relay.fw_monitors[1] = None
        relay.fw[1] = stuck
        engine.out.append(ToFw(1, wire.encode(messages.task(9, 1, inputs=[], outputs=[]))))
        flusher = threading.Thread(target=relay.flush, daemon=True)     # daemon: a blocked flush must not hang pytest
        flusher.start()
        flusher.join(FLUSH_WITHIN_S)
        blocked = flusher.is_alive()
        assert not blocked, f"the relay's loop blocked {FLUSH_WITHIN_S} s sending to a refused firmware link"
        assert relay.fw[1] is not None and relay.fw[1] is not stuck, "the firmware link was not opened afresh"
    finally:
        if not blocked:     # else closing would wait for the socket the blocked send holds
            relay.close()
        shutil.rmtree(rt, ignore_errors=True)

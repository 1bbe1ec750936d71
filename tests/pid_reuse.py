"""A reused pid against each identity proof, run as pid 1 of a pid namespace of its own (so that it
may set the namespace's next pid as a normal user: tests/privilege.py), by
tests/integration/test_live_identity.py::test_a_connection_whose_process_exited_claims_nothing_when_its_pid_comes_back.

    python -m tests.pid_reuse PROOF...        (PROOF: peer-pidfd, pidfd, start-time; or kernel: the
                                               host's own, VDSP_IDENTITY_PROOF unset; PROOF@before-record:
                                               the pid changes hands before the server records the
                                               connection, the moment the pidfd proof leaves open)

For each proof: a server made of the parts the relay and the firmwares use (a ROUTER, its
admission thread, ``Ownership`` with that proof forced by ``VDSP_IDENTITY_PROOF``); this process
claims its own owner over a fresh connection (READY expected); then the attack of issue 40, in the
same clock tick: a process A (forked) connects and hands us its socket, the server records the
connection, A exits, and a child of a victim process (it holds the victim's owner lock through an
inherited fd) gets A's pid at once (``ns_last_pid``), so that both started in the same tick of
``/proc/PID/stat``'s start time (tries are repeated until they did); over A's connection we claim
the victim's owner. Prints one JSON line: per proof, the proof the server used, both answers, the
pids, their start times and the tries it took.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time

import zmq

from protocol import messages, wire
from tests.peers import Forker, Victim, Zmtp
from vdsp_board.config import settings
from vdsp_board.memory import ddr
from vdsp_board.identity import peerproof
from vdsp_board.identity.peerproof import start_time
from vdsp_board.identity.admission import Admission
from vdsp_board.identity.ownership import Ownership


class Server:
    """HELLO claims judged at ``path`` as a firmware endpoint judges them, with ``proof`` forced."""

    def __init__(self, proof: str, path: str) -> None:
        saved = settings.export({"VDSP_IDENTITY_PROOF": None if proof == "kernel" else proof})
        try:
            self.accepted = peerproof.accept_records()
            self.ownership = Ownership(f"{proof} server", accepted=self.accepted)
            self.used = peerproof.describe(self.ownership.proof)
        finally:
            settings.export(saved)
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.linger = 0
        self.admission = Admission(self.sock, proof, max_frame=1 << 20, accepted=self.accepted)
        self.sock.bind(f"ipc://{path}")
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            if not self.sock.poll(100):
                continue
            meta = self.sock.recv(copy=False)
            frames = self.sock.recv_multipart() if meta.more else []
            msg = wire.decode(frames)
            verdict = self.ownership.judge(self.ownership.take(msg.body, meta))
            reply = messages.ready(msg.msg_id, "server", "firmware") if verdict.refusal is None \
                else messages.error(msg.msg_id, verdict.refusal)
            self.sock.send_multipart([meta.bytes, *wire.encode(reply)])

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.admission.stop()
        self.sock.close(0)
        self.ctx.term()


def own_claim(path: str) -> str:
    """This process's own owner claimed over a fresh connection: READY, or the refusal."""
    me = ddr.current_owner()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    try:
        sock.connect(f"ipc://{path}")
        sock.send_multipart(wire.encode(messages.hello(1, "client", owner=me.id, lock_fd=me.lock_fd)))
        if not sock.poll(30_000):
            return "no answer in 30 s"
        reply = wire.decode(sock.recv_multipart())
        return "READY" if reply.command is wire.Command.READY else repr(reply.body)
    finally:
        sock.close(0)
        ctx.term()


TICK_NS = 10**9 // os.sysconf("SC_CLK_TCK")     # the unit of /proc/PID/stat's start time
TRIES = 500                 # same-tick tries (beside 4 CPU hogs on 2 CPUs: 1-33 were needed)
RECORD_WAIT_S = 10.0


def _wait(until, what: str) -> None:
    deadline = time.monotonic() + RECORD_WAIT_S
    while not until():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {RECORD_WAIT_S} s")
        time.sleep(0.0002)


def _next_tick() -> None:
    """Sleep until just after the start of the next clock tick (CLOCK_BOOTTIME: what start times count)."""
    now = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    time.sleep((TICK_NS - now % TICK_NS + 100_000) / 1e9)


def same_tick_attack(server: Server, path: str, forker: Forker, victim: Victim, early: bool = False) -> dict:
    """A's connection, A gone, its pid given to the victim's child in the tick A started in; then
    the victim's owner claimed over A's connection (see the module's docstring). ``early``: all
    that before the server records the connection (its admission thread held back meanwhile)."""
    records = server.accepted
    for tries in range(1, TRIES + 1):
        if records is not None:
            _wait(lambda: len(records) == 0, "the server did not drop the records of closed connections")
        _next_tick()
        with server.admission._lock if early else contextlib.nullcontext():    # the record waits for it
            conn, pid = forker.connect(path)
            started = start_time(pid)
            if records is not None and not early:   # A lives until the server has recorded its connection
                _wait(lambda: len(records) > 0, "the server did not record the connection")
            forker.release()
            with open("/proc/sys/kernel/ns_last_pid", "w") as fh:
                fh.write(str(pid - 1))
            child = victim.fork()
        if child == pid and start_time(child) == started:
            try:
                command, body = Zmtp(conn).ask(0x01, 1, {"role": "client", "pid": pid, "owner": victim.owner})
            finally:
                conn.close()
                victim.release()
            return {"pid": pid, "holder_pid": child, "started": started, "tries": tries, "command": command,
                    "code": body.get("code"), "message": body.get("message", "")}
        conn.close()
        victim.release()
    raise RuntimeError(f"no child of the victim got A's pid in A's clock tick in {TRIES} tries")


def main(proofs: list[str]) -> dict:
    results = {}
    forker, victim = Forker(), Victim()
    try:
        with tempfile.TemporaryDirectory(prefix="vpr") as d:
            for n, spec in enumerate(proofs):
                proof, _, when = spec.partition("@")
                path = f"{d}/{n}.sock"
                server = Server(proof, path)
                try:
                    own = own_claim(path)
                    results[spec] = {"used": server.used, "own": own,
                                     **same_tick_attack(server, path, forker, victim, early=when == "before-record")}
                finally:
                    server.close()
    finally:
        forker.close()
        victim.close()
    ddr.close_owner()
    return results


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])), flush=True)

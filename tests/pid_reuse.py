"""A reused pid against each identity proof, run as pid 1 of a pid namespace of its own (so that it
may set the namespace's next pid as a normal user: tests/privilege.py), by
tests/test_live_identity.py::test_a_connection_whose_process_exited_claims_nothing_when_its_pid_comes_back.

    python -m tests.pid_reuse PROOF...        (PROOF: peer-pidfd, pidfd, start-time)

For each proof: a server made of the parts the relay and the firmwares use (a ROUTER, its
admission thread, ``Ownership`` with that proof forced by ``VDSP_IDENTITY_PROOF``); this process
claims its own owner over a fresh connection (READY expected); then a connection opened by a
process that has exited since claims the owner of another process started with that very pid.
Prints one JSON line: per proof, the proof the server used, both answers, and the pids.
"""
from __future__ import annotations

import json
import sys
import tempfile
import threading

import zmq

from protocol import messages, wire
from tests.peers import Zmtp, holder_at_pid, orphan_connection
from vdsp_board import ddr, peerproof, settings
from vdsp_board.admission import Admission
from vdsp_board.ownership import Ownership


class Server:
    """HELLO claims judged at ``path`` as a firmware endpoint judges them, with ``proof`` forced."""

    def __init__(self, proof: str, path: str) -> None:
        saved = settings.export({"VDSP_IDENTITY_PROOF": proof})
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


def main(proofs: list[str]) -> dict:
    results = {}
    with tempfile.TemporaryDirectory(prefix="vpr") as d:
        for proof in proofs:
            path = f"{d}/{proof}.sock"
            server = Server(proof, path)
            try:
                own = own_claim(path)
                conn, pid = orphan_connection(path)
                zmtp = Zmtp(conn)           # the handshake now: ZeroMQ closes one not done within 5 s
                holder = holder_at_pid(pid)
                try:
                    their_pid, owner = map(int, holder.stdout.readline().split())
                    command, body = zmtp.ask(0x01, 1, {"role": "client", "pid": pid, "owner": owner})
                finally:
                    conn.close()
                    holder.communicate("", timeout=30)
                results[proof] = {"used": server.used, "own": own, "pid": pid,
                                  "holder_pid": their_pid, "command": command, "code": body.get("code"),
                                  "message": body.get("message", "")}
            finally:
                server.close()
    ddr.close_owner()
    return results


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])), flush=True)

"""vdsp_board.hellogate: HELLO claims judged off the loop; the claiming connection's later
messages wait for the verdict in order, others pass; what waits is bounded and refused, not dropped.
The judge is a stand-in that blocks until the test lets it answer (one layer under test)."""
from __future__ import annotations

import select
import threading

from protocol import errors, messages, wire
from vdsp_board import hellogate
from vdsp_board.hellogate import HelloGate
from vdsp_board.ownership import Claim, Ownership, Verdict

A, B = b"\x00A", b"\x00B"


class SlowJudge(Ownership):
    """Takes claims as they are; each verdict waits for ``go`` (owner 7 is held, others are not)."""

    def __init__(self) -> None:
        super().__init__("test")
        self.go = threading.Event()
        self.judged: list[int] = []

    def take(self, body: dict, frame: object = None, peer_name: str = "") -> Claim:
        return Claim(body, None, peer_name, "owner" if body.get("owner") else None)

    def judge(self, claim: Claim) -> Verdict:
        assert self.go.wait(30)
        self.judged.append(claim.body["owner"])
        if claim.body["owner"] == 7:
            return Verdict(7)
        return Verdict(None, errors.ClaimRefused(f"process 1 does not hold owner 0x{claim.body['owner']:06x}'s lock"))


def hello(msg_id: int, owner: int) -> list:
    return wire.encode(messages.hello(msg_id, "client", owner=owner))


def task(msg_id: int) -> list:
    return wire.encode(messages.task(msg_id, 0, inputs=[], outputs=[]))


def wait_ready(gate: HelloGate) -> list:
    assert select.select([gate.fileno()], [], [], 30)[0], "no verdict within 30 s"
    return gate.ready()


def test_a_claiming_connection_waits_for_its_verdict_in_order_and_others_pass():
    judge = SlowJudge()
    gate = HelloGate(judge)
    try:
        assert gate.admit(A, task(1)) and len(gate.admit(A, task(1))) == 1       # no claim yet: passes
        assert gate.admit(A, hello(2, 7)) == []                                   # being judged
        assert gate.admit(A, task(3)) == [] and gate.admit(A, hello(4, 9)) == [] and gate.admit(A, task(5)) == []
        passed = gate.admit(B, task(6))                                           # B does not wait for A
        assert [wire.peek_msg_id(i.frames) for i in passed] == [6]
        assert gate.admit(B, hello(0, 0))[0].meta is None                         # claims nothing: not judged
        judge.go.set()
        out: list = []
        while len(out) < 4:
            out += wait_ready(gate)
        assert [wire.peek_msg_id(i.frames) for i in out] == [2, 3, 4, 5]          # A's order kept
        assert out[0].meta.result() == 7 and out[1].meta is None
        refused = out[2].meta
        assert isinstance(refused, Verdict) and refused.refusal is not None
        assert "process 1 does not hold owner 0x000009's lock" in refused.refusal.message
        assert judge.judged == [7, 9] and gate.held == {} and gate.held_bytes == 0
        assert len(gate.admit(A, task(8))) == 1                                   # nothing waits any more
    finally:
        judge.go.set()
        gate.close()


def test_what_waits_is_bounded_and_the_excess_refused_in_its_turn(monkeypatch):
    judge = SlowJudge()
    gate = HelloGate(judge)
    monkeypatch.setattr(hellogate, "MAX_HELD_BYTES", 300)
    monkeypatch.setattr(hellogate, "MAX_PENDING", 1)
    try:
        assert gate.admit(A, hello(1, 7)) == []
        big = task(2) + [b"x" * 150]
        assert gate.admit(A, big) == [] and gate.admit(A, task(3) + [b"y" * 150]) == []
        [busy] = gate.admit(B, hello(4, 7))                                      # a second claim: over MAX_PENDING
        assert busy.refused is not None and busy.refused.code == errors.CoreBusy.code and busy.msg_id == 4
        judge.go.set()
        out: list = []
        while len(out) < 3:
            out += wait_ready(gate)
        assert out[0].meta.result() == 7
        assert out[1].refused is None and len(out[1].frames) == 3                 # within the bound: held
        assert out[2].refused is not None and out[2].msg_id == 3 and out[2].frames == []
        assert "send it again" in out[2].refused.message
    finally:
        judge.go.set()
        gate.close()


def test_ready_leaves_no_wake_byte_behind_once_every_verdict_is_out():
    """``ready()`` skips the wake pipe while no verdict byte can be in it (the firmware calls it
    before every task). A byte left in the pipe would make a loop that polls ``fileno()`` spin;
    a verdict not taken would leave its connection waiting: after each round of verdicts, taken
    in as many ``ready()`` calls as it needs, the pipe is empty again and nothing is held."""
    judge = SlowJudge()
    judge.go.set()
    gate = HelloGate(judge)
    try:
        assert gate.ready() == []                                    # nothing judged: nothing read, nothing out
        for round_ in range(20):
            assert gate.admit(A, hello(2 * round_ + 1, 7)) == []
            out: list = []
            while not out:
                out += wait_ready(gate)
            assert [wire.peek_msg_id(i.frames) for i in out] == [2 * round_ + 1]
            # the worker writes its byte after it queued the verdict: a byte may come in after
            # ready() took the verdict, and the next call must read it
            for _ in range(100):
                if not select.select([gate.fileno()], [], [], 0.05)[0]:
                    break
                assert gate.ready() == []
            assert not select.select([gate.fileno()], [], [], 0)[0], "a wake byte stays in the pipe: a poll loop spins"
        assert gate.held == {} and gate.pending == 0
    finally:
        gate.close()

"""vdsp_board.identity.hellogate: HELLO claims judged off the loop; the claiming connection's later
messages wait for the verdict in order, others pass; what waits is bounded and refused, not dropped.
The judge is a stand-in that blocks until the test lets it answer (one layer under test)."""
from __future__ import annotations

import os
import select
import threading
import time

from protocol import errors, messages, wire
from vdsp_board.identity import hellogate
from vdsp_board.identity.hellogate import HelloGate
from vdsp_board.identity.ownership import Claim, Ownership, Verdict

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
    on each turn it did not wait, and when its wait said ``fileno()`` fired). A byte left in the
    pipe would make a loop that polls ``fileno()`` spin; a verdict not taken would leave its
    connection waiting: after each round of verdicts, taken in as many ``ready()`` calls as it
    needs, the pipe is empty again and nothing is held."""
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


def ipc(pid: int) -> dict:
    """The properties of a frame from an ipc connection of process ``pid`` (what ZeroMQ tells)."""
    return {"Peer-Address": f"localhost:{os.getuid()}:{os.getgid()}:{pid}"}


def conn(n: int) -> bytes:
    return b"\x00" + n.to_bytes(4, "big")


def test_one_process_cannot_take_every_place_however_many_connections_it_opens(monkeypatch):
    """Before, 600 claims of one process on 600 connections took all 256 places and the next
    peer's claim was refused HB_DSP_BUSY. Now a peer (an ipc process, a CURVE key) has at most
    MAX_PENDING_PER_PEER places; beyond, its own claims are refused, not the others'."""
    judge = SlowJudge()
    gate = HelloGate(judge)
    try:
        per_peer = hellogate.MAX_PENDING_PER_PEER
        for n in range(per_peer):
            assert gate.admit(conn(n), hello(n + 1, 7), ipc(1000)) == []
        flood = [gate.admit(conn(100 + n), hello(1, 7), ipc(1000)) for n in range(600)]
        assert all(len(out) == 1 and out[0].refused is not None for out in flood)
        message = flood[0][0].refused.message
        assert flood[0][0].refused.code == errors.CoreBusy.code and "process 1000" in message and "of one peer" in message
        assert gate.admit(A, hello(9, 7), ipc(2000)) == []                      # another process: queued
        assert gate.admit(B, hello(10, 7), {}, "client:bob") == []              # a CURVE key: queued
        assert gate.pending == per_peer + 2
    finally:
        judge.go.set()
        gate.close()


def test_when_all_places_are_taken_a_peer_with_fewer_claims_takes_the_newest_of_the_greediest(monkeypatch):
    monkeypatch.setattr(hellogate, "MAX_PENDING", 4)
    judge = SlowJudge()
    gate = HelloGate(judge)
    try:
        for n in range(4):                                                       # process 1000 takes all 4
            assert gate.admit(conn(n), hello(n + 1, 7), ipc(1000)) == []
        [displaced] = gate.admit(A, hello(11, 7), ipc(2000))                     # 2000 has none: it gets one
        assert displaced.identity == conn(3) and displaced.msg_id == 4           # 1000's newest, refused
        assert displaced.refused.code == errors.CoreBusy.code and "process 1000" in displaced.refused.message
        assert gate.admit(conn(0), task(5), ipc(1000)) == []                     # its claims still wait
        [displaced] = gate.admit(A, hello(12, 7), ipc(2000))                     # 3 against 1 (+1): again
        assert displaced.identity == conn(2)
        [busy] = gate.admit(B, hello(13, 7), ipc(2000))                          # 2 against 2 (+1): no
        assert busy.identity == B and busy.refused is not None and "4 HELLOs are being verified" in busy.refused.message
        assert gate.pending == 4
        judge.go.set()
        out: list = []
        while len(out) < 5:
            out += wait_ready(gate)
        assert sorted(wire.peek_msg_id(i.frames) for i in out if i.refused is None) == [1, 2, 5, 11, 12]
        assert gate.pending == 0 and gate.held == {} and gate.shares == {}
    finally:
        judge.go.set()
        gate.close()


def test_claims_are_judged_in_turn_across_peers():
    """One peer's backlog delays another's claim by one verdict, not by the backlog."""
    judge = SlowJudge()
    gate = HelloGate(judge)
    try:
        for n in range(6):                   # process 1000: owners 100..105 (it holds none of them)
            assert gate.admit(conn(n), hello(n + 1, 100 + n), ipc(1000)) == []
        assert gate.admit(A, hello(50, 7), ipc(2000)) == []
        judge.go.set()
        out: list = []
        while len(out) < 7:
            out += wait_ready(gate)
        assert judge.judged.index(7) == 1, judge.judged       # right after the claim being judged when it came
        assert [i.meta.result() for i in out if i.identity == A] == [7]
    finally:
        judge.go.set()
        gate.close()


def test_held_bytes_are_shared_per_peer(monkeypatch):
    monkeypatch.setattr(hellogate, "MAX_HELD_BYTES", 1000)
    monkeypatch.setattr(hellogate, "MAX_HELD_BYTES_PER_PEER", 600)
    judge = SlowJudge()
    gate = HelloGate(judge)
    try:
        assert gate.admit(conn(1), hello(1, 7), ipc(1000)) == [] and gate.admit(conn(2), hello(1, 7), ipc(1000)) == []
        assert gate.admit(conn(1), task(2) + [b"x" * 250], ipc(1000)) == []
        assert gate.admit(conn(2), task(3) + [b"x" * 250], ipc(1000)) == []
        assert gate.admit(conn(2), task(4) + [b"x" * 250], ipc(1000)) == []    # over 600 of one peer: refused
        assert gate.admit(A, hello(5, 7), ipc(2000)) == [] and gate.admit(B, hello(6, 7), ipc(3000)) == []
        assert gate.admit(A, task(7) + [b"y" * 250], ipc(2000)) == []
        assert gate.admit(B, task(8) + [b"z" * 250], ipc(3000)) == []           # 1000 full: takes 1000's newest
        assert gate.held_bytes <= 1000
        judge.go.set()
        out: list = []
        while len(out) < 9:
            out += wait_ready(gate)
        refused = {i.msg_id for i in out if i.refused is not None}
        taken = {wire.peek_msg_id(i.frames) for i in out if i.refused is None}
        assert refused == {3, 4} and taken == {1, 2, 5, 6, 7, 8}, (refused, taken)
        assert gate.held_bytes == 0 and gate.shares == {}
    finally:
        judge.go.set()
        gate.close()


def test_protocol_md_states_the_gates_bounds():
    from pathlib import Path
    lines = (Path(__file__).resolve().parents[2] / "PROTOCOL.md").read_text().splitlines()
    claims = next(line for line in lines if line.startswith("| HELLO claims being verified"))
    assert f"{hellogate.MAX_PENDING_PER_PEER} of one peer" in claims and f"{hellogate.MAX_PENDING} in all" in claims
    held = next(line for line in lines if line.startswith("| bytes of messages waiting behind a connection's HELLO"))
    assert f"{hellogate.MAX_HELD_BYTES_PER_PEER >> 20} MiB of one peer" in held
    assert f"{hellogate.MAX_HELD_BYTES >> 20} MiB in all" in held


class CpuJudge(Ownership):
    """Verdicts that cost ``cpu_s`` of CPU for owner 100 (a process with many fds to read), none
    for others; records when each verdict began and ended (monotonic)."""

    def __init__(self, cpu_s: float) -> None:
        super().__init__("test")
        self.cpu_s = cpu_s
        self.spans: list[tuple[int, float, float]] = []

    def take(self, body: dict, frame: object = None, peer_name: str = "") -> Claim:
        return Claim(body, None, peer_name, "owner")

    def judge(self, claim: Claim) -> Verdict:
        began = time.monotonic()
        if claim.body["owner"] == 100:
            end = time.thread_time() + self.cpu_s
            while time.thread_time() < end:
                pass
        self.spans.append((claim.body["owner"], began, time.monotonic()))
        return Verdict(None, errors.ClaimRefused("no"))


def test_a_peer_whose_verdicts_take_long_gets_the_worker_at_most_a_quarter_of_the_time():
    """A process with 1,000 fds makes each verdict on its claims read 1,000 files: before, a flood
    of them kept the worker (and the server's CPU) busy all the time."""
    judge = CpuJudge(0.02)
    gate = HelloGate(judge)
    try:
        for n in range(4):
            assert gate.admit(conn(n), hello(n + 1, 100), ipc(1000)) == []
        assert gate.admit(A, hello(9, 7), ipc(2000)) == []
        out: list = []
        while len(out) < 5:
            out += wait_ready(gate)
        mine = [(began, ended) for owner, began, ended in judge.spans if owner == 100]
        rests = [(b[0] - a[1]) / (a[1] - a[0]) for a, b in zip(mine, mine[1:])]    # rest / verdict's time
        assert min(rests) >= hellogate.JUDGE_REST * 0.9, rests
        assert [owner for owner, _, _ in judge.spans].index(7) == 1        # the other peer's claim: no wait
    finally:
        gate.close()


class YoungJudge(CpuJudge):
    """As CpuJudge (no CPU cost), but owner 100's claims cannot be judged before ``not_before``
    (as a start-time claim of a process younger than two clock ticks, peerproof.ready_at)."""

    def take(self, body: dict, frame: object = None, peer_name: str = "") -> Claim:
        claim = super().take(body, frame, peer_name)
        if body.get("owner") == 100:
            claim.not_before = self.not_before
        return claim


def test_a_claim_that_cannot_be_judged_yet_rests_its_own_peer_only():
    """Before, the worker slept out a young process's clock tick (up to 20 ms a claim), every
    other peer's claim waiting behind it."""
    judge = YoungJudge(0.0)
    judge.not_before = time.monotonic() + 0.5
    gate = HelloGate(judge)
    try:
        assert gate.admit(conn(1), hello(1, 100), ipc(1000)) == []
        assert gate.admit(A, hello(9, 7), ipc(2000)) == []
        out: list = []
        while len(out) < 2:
            out += wait_ready(gate)
        assert [owner for owner, _, _ in judge.spans] == [7, 100]          # the other peer's went first
        assert judge.spans[1][1] >= judge.not_before                       # and the young one's not before its time
    finally:
        gate.close()

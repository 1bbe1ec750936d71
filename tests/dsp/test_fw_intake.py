"""What a firmware's I/O thread makes of what it takes in, without sockets or threads
(``dsp_side.intake``): the inbox's order and bounds, HELLO, CANCEL, refusals, and the run queue
the compute thread pops (here the test pops it, as the compute thread would)."""
from __future__ import annotations

import random

import pytest

from dsp_side.inbox import Inbox
from dsp_side.intake import Intake
from protocol import errors, messages, opids, wire
from protocol.constants import Command

A, B = b"\x00conn-a", b"\x00conn-b"
REFUSED_OWNER = 666


class Judge:
    """Every claim holds but owner REFUSED_OWNER's (the ownership proofs have their own tests)."""

    def claim(self, body, meta=None, peer=""):
        owner = body.get("owner", 0)
        if owner == REFUSED_OWNER:
            raise errors.ClaimRefused(f"owner {owner} is not yours")
        return owner or None


def make(run_ahead: int = 4, **inbox) -> Intake:
    return Intake("vdsp0", "1.2.3", Judge(), Inbox(**inbox) if inbox else None, run_ahead=run_ahead)  # type: ignore[arg-type]


def task(msg_id: int, priority: int = 0) -> list:
    return wire.encode(messages.task(msg_id, opids.PING, inputs=[], outputs=[], priority=priority))


def answers(intake: Intake) -> list[tuple[bytes, wire.Message]]:
    out = [(frames[0], wire.decode(frames[1:])) for frames in intake.out]
    intake.out.clear()
    return out


def started(intake: Intake) -> list[int]:
    """Pop the whole run queue, as the compute thread does: the msg_ids started, in order."""
    out = []
    while intake.runq:
        identity, frames, binding = intake.runq.popleft()
        out.append(wire.decode(frames).msg_id)
    return out


def test_a_task_is_queued_not_answered_and_handed_out_with_its_connection_s_binding():
    intake = make()
    intake.take(A, wire.encode(messages.hello(1, "client", owner=42)))
    [(who, ready)] = answers(intake)
    assert who == A and ready.command is Command.READY and ready.body["firmware_version"] == "1.2.3"
    intake.take(A, task(2))
    intake.take(B, task(3))
    assert answers(intake) == []
    assert intake.hand_out()
    assert [(identity, binding) for identity, _, binding in intake.runq] == [(A, 42), (B, None)]
    assert started(intake) == [2, 3]


def test_a_refused_hello_binds_nothing():
    intake = make()
    intake.take(A, wire.encode(messages.hello(1, "client", owner=42)))
    intake.take(A, wire.encode(messages.hello(2, "client", owner=REFUSED_OWNER)))
    assert [m.command for _, m in answers(intake)] == [Command.READY, Command.ERROR]
    intake.take(A, task(3))
    intake.hand_out()
    assert intake.runq[0][2] is None


def test_the_run_queue_holds_at_most_run_ahead_tasks_not_started():
    intake = make(run_ahead=3)
    for i in range(10):
        intake.take(A, task(i))
    intake.hand_out()
    assert len(intake.runq) == 3 and len(intake.inbox) == 7
    intake.runq.popleft()                   # the compute thread starts one
    intake.hand_out()
    assert len(intake.runq) == 3 and len(intake.inbox) == 6


def test_a_better_placed_task_goes_before_the_tasks_not_started():
    intake = make(run_ahead=4)
    for i in range(1, 6):
        intake.take(A, task(i))
    intake.hand_out()
    assert intake.runq.popleft()[1] == task(1)      # task 1 started: it stays started
    intake.take(B, task(99, priority=255))          # pre-emptive
    intake.hand_out()
    assert started(intake) == [99, 2, 3, 4]
    intake.hand_out()
    assert started(intake) == [5]


def test_cancel_of_a_waiting_task_releases_it_and_says_so():
    intake = make(run_ahead=1)
    for i in (1, 2, 3):
        intake.take(A, task(i))
    intake.hand_out()                       # 1 in the run queue, 2 and 3 in the inbox
    intake.take(A, wire.encode(messages.cancel(10, 3)))
    (_, released), (_, outcome) = answers(intake)
    assert released.command is Command.ERROR and released.msg_id == 3
    assert released.body["code"] == errors.TaskCancelled.code
    assert outcome.msg_id == 10 and outcome.body == {"state": "cancelled", "target": 3}
    intake.hand_out()
    assert started(intake) + started_after(intake) == [1, 2]


def started_after(intake: Intake) -> list[int]:
    intake.hand_out()
    return started(intake)


def test_cancel_of_a_task_in_the_run_queue_not_started_releases_it():
    intake = make(run_ahead=4)
    for i in (1, 2, 3):
        intake.take(A, task(i))
    intake.hand_out()
    intake.runq.popleft()                   # 1 runs
    intake.take(A, wire.encode(messages.cancel(10, 2)))
    assert [(m.command, m.msg_id) for _, m in answers(intake)] == [(Command.ERROR, 2), (Command.RESULT, 10)]
    intake.hand_out()
    assert started(intake) == [3]


def test_cancel_of_a_started_task_is_unknown_and_it_runs():
    intake = make()
    intake.take(A, task(1))
    intake.hand_out()
    intake.runq.popleft()                   # started
    intake.take(A, wire.encode(messages.cancel(10, 1)))
    [(_, outcome)] = answers(intake)
    assert outcome.body == {"state": "unknown", "target": 1}


def test_another_connection_cannot_cancel_my_task():
    intake = make()
    intake.take(A, task(1))
    intake.take(B, wire.encode(messages.cancel(10, 1)))
    [(_, outcome)] = answers(intake)
    assert outcome.body["state"] == "unknown"
    intake.hand_out()
    assert started(intake) == [1]


@pytest.mark.parametrize("bounds", [dict(max_waiting=10, max_per_peer=2), dict(max_waiting=2, max_per_peer=10)])
def test_tasks_handed_out_count_in_the_inbox_s_bounds_until_they_start(bounds):
    intake = make(run_ahead=4, **bounds)
    intake.take(A, task(1))
    intake.take(A, task(2))
    intake.hand_out()                       # both in the run queue, neither started: still A's two
    intake.take(A, task(3))
    [(_, refusal)] = answers(intake)
    assert refusal.msg_id == 3 and refusal.body["code"] == errors.CoreBusy.code
    intake.runq.popleft()                   # 1 starts: A has one waiting
    intake.take(A, task(4))
    assert answers(intake) == []
    intake.take(A, task(5))
    assert [m.msg_id for _, m in answers(intake)] == [5]


def test_what_is_not_a_task_is_answered_now():
    intake = make()
    intake.take(A, wire.encode(messages.heartbeat()))
    intake.take(A, wire.encode(messages.disconnect()))
    assert answers(intake) == []
    intake.take(A, wire.encode(messages.query(7, "stats")))
    [(_, refusal)] = answers(intake)
    assert refusal.msg_id == 7 and refusal.body["code"] == errors.ApiUseError.code
    head = wire.encode(messages.hello(8, "client"))[0]
    intake.take(A, [head, b"\xc1"])         # not msgpack: answered, its msg_id read from the header
    [(_, bad)] = answers(intake)
    assert bad.msg_id == 8 and bad.command is Command.ERROR
    intake.take(A, [b"garbage"])            # no msg_id to answer: nothing
    assert answers(intake) == []


def test_the_gate_s_refusals_are_answered_and_its_messages_taken():
    from vdsp_board.identity.hellogate import Item
    refused = Item(A, task(5), None, "")
    refused.refuse(errors.CoreBusy("too many HELLOs"))
    intake = make()
    intake.take_items([refused, Item(B, task(6), None, "")])
    [(who, refusal)] = answers(intake)
    assert who == A and refusal.msg_id == 5 and refusal.body["code"] == errors.CoreBusy.code
    intake.hand_out()
    assert started(intake) == [6]


@pytest.mark.parametrize("seed", range(20))
def test_every_task_gets_exactly_one_answer_whatever_the_interleaving(seed):
    """Tasks, cancels (of anything), refusals, hand-outs and starts in a random order: each
    task is answered once, by a refusal, a release, or by running (then never released)."""
    rng = random.Random(seed)
    intake = make(run_ahead=rng.randint(1, 5), max_waiting=12, max_per_peer=8)
    sent: dict[tuple[bytes, int], int] = {}       # (connection, task msg_id) -> answers
    ran: list[tuple[bytes, int]] = []
    next_id = 1
    for _ in range(400):
        action = rng.random()
        who = rng.choice((A, B))
        if action < 0.45:
            intake.take(who, task(next_id, priority=rng.choice((0, 0, 5, 255))))
            sent[(who, next_id)] = 0
            next_id += 1
        elif action < 0.6 and sent:
            target_who, target = rng.choice(list(sent))
            intake.take(who, wire.encode(messages.cancel(100000 + next_id, target)))
            next_id += 1
        elif action < 0.8:
            intake.hand_out()
        elif intake.runq:
            identity, frames, _ = intake.runq.popleft()
            ran.append((identity, wire.decode(frames).msg_id))
        for identity, msg in answers(intake):
            if msg.msg_id < 100000:             # a refusal or a release of a task
                sent[(identity, msg.msg_id)] += 1
    while intake.hand_out() or intake.runq:
        while intake.runq:
            identity, frames, _ = intake.runq.popleft()
            ran.append((identity, wire.decode(frames).msg_id))
    assert len(ran) == len(set(ran))
    for key in ran:
        sent[key] += 1
    assert all(n == 1 for n in sent.values()), {k: n for k, n in sent.items() if n != 1}
    assert len(intake.inbox) == 0 and not intake.lent


def test_next_task_starts_the_best_at_once():
    intake = make()
    intake.take(A, task(1))
    intake.take(A, task(2, priority=9))
    identity, frames, binding = intake.next_task()          # type: ignore[misc]
    assert wire.decode(frames).msg_id == 2 and identity == A
    intake.take(A, wire.encode(messages.cancel(10, 2)))
    assert answers(intake)[0][1].body["state"] == "unknown"

"""Replies that leave a firmware together (``dsp_side.replybatch``), with a hand-held clock."""
from __future__ import annotations

import pytest

from dsp_side.replybatch import HOLD_MAX, HOLD_S, HOLD_TASK_S, ReplyBatch

QUICK, SLOW = HOLD_TASK_S / 10, HOLD_TASK_S * 2


def r(n: int) -> list:
    return [b"peer", n]


def test_a_quick_task_s_reply_waits_for_the_next_and_they_leave_together():
    batch = ReplyBatch()
    assert batch.reply(r(1), QUICK, 10.0, more=True) == []
    assert batch.reply(r(2), QUICK, 10.0 + HOLD_S / 4, more=True) == []
    assert batch.reply(r(3), QUICK, 10.0 + HOLD_S / 2, more=False) == [r(1), r(2), r(3)]
    assert len(batch) == 0


def test_a_reply_is_not_held_when_no_task_follows_or_its_task_was_slow():
    batch = ReplyBatch()
    assert batch.reply(r(1), QUICK, 10.0, more=False) == [r(1)]
    assert batch.reply(r(2), SLOW, 10.0, more=True) == [r(2)]
    assert batch.reply(r(3), QUICK, 11.0, more=True) == []
    assert batch.reply(r(4), SLOW, 11.0, more=True) == [r(3), r(4)]       # a slow one takes the held ones along


def test_at_most_hold_max_replies_and_hold_s_of_waiting():
    batch = ReplyBatch()
    out = [batch.reply(r(i), QUICK, 10.0, more=True) for i in range(HOLD_MAX)]
    assert out[:-1] == [[]] * (HOLD_MAX - 1) and out[-1] == [r(i) for i in range(HOLD_MAX)]
    assert batch.reply(r(100), QUICK, 20.0, more=True) == []
    assert batch.due_in(20.0) == pytest.approx(HOLD_S)
    assert batch.due_in(20.0 + HOLD_S) == pytest.approx(0)
    assert batch.reply(r(101), QUICK, 20.0 + 2 * HOLD_S, more=True) == [r(100), r(101)]   # past HOLD_S
    assert batch.due_in(30.0) is None


def test_an_answer_leaves_at_once_after_the_held_replies():
    batch = ReplyBatch()
    batch.reply(r(1), QUICK, 10.0, more=True)
    assert batch.answer(r("refusal")) == [r(1), r("refusal")]
    assert batch.answer(r("cancelled")) == [r("cancelled")]


def test_take_empties_what_is_held():
    batch = ReplyBatch()
    batch.reply(r(1), QUICK, 10.0, more=True)
    assert batch.take() == [r(1)] and batch.take() == [] and batch.due_in(10.0) is None

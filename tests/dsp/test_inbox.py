"""The firmware's task inbox: scheduling order, cancel, and its bounds (pure, no sockets)."""
from __future__ import annotations

import logging
import struct

import pytest

from dsp_side.inbox import Inbox
from protocol import errors
from vdsp_board.observability.log import RateLimited


def task(msg_id: int, priority: int = 0, custom_id: int = 0) -> list:
    """A TASK header assembled by hand (magic, version 1, command 0x10) and an empty body."""
    return [struct.pack("<2sBBHBBQq", b"VD", 2, 0x10, 0, priority, 0, msg_id, custom_id), b"\x80"]


def drain(inbox: Inbox) -> list[tuple[bytes, int]]:
    out = []
    while len(inbox):
        peer, frames = inbox.pop()
        out.append((peer, struct.unpack_from("<Q", frames[0], 8)[0]))
    return out


def test_order_is_priority_then_custom_id_then_arrival():
    inbox = Inbox()
    for msg_id, prio, cid in [(1, 0, 5), (2, 9, 7), (3, 9, 1), (4, 0, 5), (5, 255, 100)]:
        assert inbox.offer(b"r", task(msg_id, prio, cid))
    assert [m for _, m in drain(inbox)] == [5, 3, 2, 1, 4]


def test_non_tasks_are_not_queued():
    inbox = Inbox()
    cancel = [struct.pack("<2sBBHBBQq", b"VD", 2, 0x13, 0, 0, 0, 9, 0), b"\x80"]
    assert not inbox.offer(b"r", cancel)
    assert not inbox.offer(b"r", [b"short", b"\x80"])
    assert len(inbox) == 0


def test_one_peer_cannot_fill_the_inbox():
    inbox = Inbox(max_waiting=10, max_per_peer=4)
    for i in range(4):
        inbox.offer(b"flood", task(i, 255))
    with pytest.raises(errors.CoreBusy) as exc:
        inbox.offer(b"flood", task(99, 255))
    assert exc.value.code == -6000293 and "4 of them yours" in exc.value.message
    assert len(inbox) == 4
    assert inbox.offer(b"relay", task(7))        # another peer still has room


def test_total_bound_and_room_comes_back_after_pop_and_cancel():
    inbox = Inbox(max_waiting=3, max_per_peer=3)
    for i in range(3):
        inbox.offer(b"a", task(i))
    with pytest.raises(errors.CoreBusy):
        inbox.offer(b"b", task(10))
    inbox.pop()
    assert inbox.offer(b"b", task(10))
    assert inbox.cancel(b"a", 2) is not None
    assert inbox.offer(b"a", task(11))
    assert sorted(m for _, m in drain(inbox)) == [1, 10, 11]
    for i in range(3):                           # every share is free again
        inbox.offer(b"a", task(20 + i))


def test_rate_limited_warnings(caplog):
    logger = logging.getLogger("test.ratelimit")
    rl = RateLimited(logger, interval_s=60)
    with caplog.at_level(logging.WARNING, logger="test.ratelimit"):
        results = [rl.warn("peer-a", "bad input %d", i) for i in range(1000)]
        rl.warn("peer-b", "bad input from b")
    assert results[0] and not any(results[1:])
    assert [r.getMessage() for r in caplog.records] == ["bad input 0", "bad input from b"]
    rl._last["peer-a"] = (rl._last["peer-a"][0] - 61, rl._last["peer-a"][1])   # the interval has passed
    with caplog.at_level(logging.WARNING, logger="test.ratelimit"):
        assert rl.warn("peer-a", "bad input again")
    assert "999 similar message(s) held back" in caplog.records[-1].getMessage()

"""The queue + eventfd between a firmware's threads (``dsp_side.handoff``): nothing put waits
unseen by a poll, nothing is lost or reordered."""
from __future__ import annotations

import select
import threading

from dsp_side.handoff import Mailbox


def readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def test_the_doorbell_is_readable_from_a_put_until_the_take():
    ch = Mailbox()
    try:
        assert not readable(ch.fileno()) and ch.take() == []
        ch.put(1)
        ch.put(2)
        assert readable(ch.fileno())
        assert ch.take() == [1, 2]
        assert not readable(ch.fileno())
    finally:
        ch.close()


def test_a_producer_thread_s_items_all_arrive_in_order_to_a_polling_consumer():
    ch = Mailbox()
    n = 20000
    poller = select.poll()
    poller.register(ch.fileno(), select.POLLIN)

    def produce() -> None:
        for i in range(n):
            ch.put(i)
    producer = threading.Thread(target=produce)
    producer.start()
    got: list[int] = []
    try:
        while len(got) < n:
            items = ch.take()
            if not items:       # empty: wait only on the doorbell (a lost ring would hang here)
                assert poller.poll(60_000), f"{len(got)} of {n} taken, then the doorbell stayed silent"
            got += items
    finally:
        producer.join()
        ch.close()
    assert got == list(range(n))

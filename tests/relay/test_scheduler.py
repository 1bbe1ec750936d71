"""relay_server.scheduler: task ordering, pinned vs ANY queues, lazy removal, bounds."""
from __future__ import annotations

import itertools

import pytest

from relay_server.scheduler import Job, Scheduler

ANY = None
_ids = itertools.count(1)


def job(priority=0, custom_id=0, core=ANY, name=None):
    rid = next(_ids)
    return Job(rid, "client", rid, priority, custom_id, core, name or f"j{rid}")


def drain(s, core):
    out = []
    while (j := s.pop_for(core)) is not None:
        out.append(j.payload)
    return out


@pytest.fixture
def s():
    return Scheduler(n_cores=2, max_queued=100)


def test_empty_scheduler(s):
    assert s.pop_for(0) is None and s.pop_for(1) is None
    assert s.peek_for(0) is None
    assert s.queued == 0 and not s.full()


def test_priority_descending(s):
    for p, name in [(0, "p0"), (200, "p200"), (5, "p5"), (254, "p254"), (1, "p1")]:
        s.push(job(priority=p, name=name))
    assert drain(s, 0) == ["p254", "p200", "p5", "p1", "p0"]


def test_custom_id_ascending_within_priority(s):
    for c, name in [(30, "c30"), (-5, "c-5"), (10, "c10"), (0, "c0")]:
        s.push(job(priority=7, custom_id=c, name=name))
    assert drain(s, 0) == ["c-5", "c0", "c10", "c30"]


def test_arrival_order_breaks_ties(s):
    for name in "abcde":
        s.push(job(priority=3, custom_id=1, name=name))
    assert drain(s, 1) == list("abcde")


def test_priority_beats_custom_id(s):
    s.push(job(priority=1, custom_id=-100, name="low-prio-small-id"))
    s.push(job(priority=2, custom_id=100, name="high-prio-big-id"))
    assert drain(s, 0) == ["high-prio-big-id", "low-prio-small-id"]


def test_full_ordering_mix(s):
    s.push(job(priority=5, custom_id=2, name="a"))
    s.push(job(priority=5, custom_id=1, name="b"))
    s.push(job(priority=9, custom_id=9, name="c"))
    s.push(job(priority=5, custom_id=1, name="d"))
    s.push(job(priority=0, custom_id=-9, name="e"))
    assert drain(s, 0) == ["c", "b", "d", "a", "e"]


def test_preemp_255_goes_ahead_of_everything_queued(s):
    for i in range(5):
        s.push(job(priority=254, custom_id=-1000 + i, name=f"q{i}"))
    s.push(job(priority=255, custom_id=10**9, name="preemp"))
    assert s.peek_for(0).payload == "preemp"
    assert drain(s, 0)[0] == "preemp"


def test_preemp_pinned_beats_any_queue_and_any_preemp_beats_pinned(s):
    s.push(job(priority=254, name="any254"))
    s.push(job(priority=255, core=0, name="pin255"))
    assert s.pop_for(0).payload == "pin255"
    s.push(job(priority=254, core=1, name="pin254"))
    s.push(job(priority=255, name="any255"))
    assert s.pop_for(1).payload == "any255"


def test_peek_does_not_take(s):
    s.push(job(name="x"))
    assert s.peek_for(0).payload == "x"
    assert s.peek_for(1).payload == "x"
    assert s.queued == 1
    assert s.pop_for(1).payload == "x"
    assert s.peek_for(0) is None


def test_pop_marks_running(s):
    j = job()
    s.push(j)
    assert j.state == "queued"
    assert s.pop_for(0) is j
    assert j.state == "running"


# --- pinned vs ANY ---------------------------------------------------------------------------

def test_core_never_gets_a_job_pinned_to_another_core(s):
    s.push(job(priority=255, core=0, name="for0"))
    assert s.peek_for(1) is None
    assert s.pop_for(1) is None
    assert s.pop_for(0).payload == "for0"


def test_any_job_is_taken_by_either_core(s):
    s.push(job(name="any1"))
    s.push(job(name="any2"))
    assert s.pop_for(1).payload == "any1"
    assert s.pop_for(0).payload == "any2"


def test_core_takes_better_head_of_own_and_any(s):
    s.push(job(priority=1, core=0, name="pin-low"))
    s.push(job(priority=9, name="any-high"))
    s.push(job(priority=5, core=1, name="pin1-mid"))
    # core 0: ANY head (9) is better than its own (1)
    assert s.pop_for(0).payload == "any-high"
    # core 1: its own (5) is all that is left for it
    assert s.pop_for(1).payload == "pin1-mid"
    assert s.pop_for(1) is None
    assert s.pop_for(0).payload == "pin-low"


def test_arrival_order_across_pinned_and_any_queues(s):
    s.push(job(priority=4, custom_id=0, name="any-first"))
    s.push(job(priority=4, custom_id=0, core=0, name="pin-second"))
    s.push(job(priority=4, custom_id=0, name="any-third"))
    assert drain(s, 0) == ["any-first", "pin-second", "any-third"]


def test_custom_id_across_pinned_and_any_queues(s):
    s.push(job(priority=4, custom_id=5, core=1, name="pin5"))
    s.push(job(priority=4, custom_id=2, name="any2"))
    s.push(job(priority=4, custom_id=3, core=1, name="pin3"))
    assert drain(s, 1) == ["any2", "pin3", "pin5"]


def test_each_queue_holds_its_own_jobs(s):
    for name, core in (("p0a", 0), ("p0b", 0), ("p1", 1), ("any", ANY)):
        s.push(job(core=core, name=name))
    assert s.queued == 4
    assert sorted(j.payload for j in s.drain_pinned(0)) == ["p0a", "p0b"]
    assert [j.payload for j in s.drain_pinned(1)] == ["p1"]
    assert [j.payload for j in s.drain_any()] == ["any"]
    assert s.queued == 0


# --- removal -----------------------------------------------------------------------------------

def test_removed_job_never_pops(s):
    a, b, c = job(priority=9, name="a"), job(priority=5, name="b"), job(priority=1, core=0, name="c")
    for j in (a, b, c):
        s.push(j)
    assert s.remove(a) is True
    assert a.state == "removed"
    assert s.queued == 2
    assert s.peek_for(0).payload == "b"
    assert drain(s, 0) == ["b", "c"]
    assert s.queued == 0


def test_removed_pinned_job_never_pops(s):
    j = job(priority=255, core=1, name="gone")
    s.push(j)
    s.push(job(core=1, name="stays"))
    assert s.remove(j)
    assert s.queued == 1
    assert drain(s, 1) == ["stays"]


def test_remove_is_not_repeatable_and_not_for_running_jobs(s):
    j = job()
    assert s.remove(j) is False  # never queued
    s.push(j)
    assert s.remove(j) is True
    assert s.remove(j) is False
    assert s.queued == 0
    k = job()
    s.push(k)
    assert s.pop_for(0) is k
    assert s.remove(k) is False
    assert k.state == "running"
    assert s.queued == 0


# --- bound ---------------------------------------------------------------------------------------

def test_full_bound_counts_queued_jobs_only():
    s = Scheduler(n_cores=2, max_queued=3)
    jobs = [job(), job(core=0), job(core=1)]
    for j in jobs[:2]:
        s.push(j)
        assert not s.full()
    s.push(jobs[2])
    assert s.full()
    s.pop_for(0)          # running jobs do not count
    assert not s.full()
    s.push(job())
    assert s.full()
    s.remove(jobs[2])     # neither do removed ones
    assert not s.full()
    assert s.queued == 2


def test_zero_bound_is_always_full():
    assert Scheduler(n_cores=2, max_queued=0).full()


# --- drain_pinned --------------------------------------------------------------------------------

def test_drain_pinned_returns_only_queued_jobs_of_that_core(s):
    p0a, p0b, gone = job(core=0, name="p0a"), job(core=0, name="p0b"), job(core=0, name="gone")
    p1, anyj = job(core=1, name="p1"), job(name="any")
    for j in (p0a, gone, p0b, p1, anyj):
        s.push(j)
    s.remove(gone)
    drained = s.drain_pinned(0)
    assert sorted(j.payload for j in drained) == ["p0a", "p0b"]
    assert all(j.state == "removed" for j in drained)
    assert s.queued == 2
    assert s.drain_pinned(0) == []
    # core 0 still serves ANY; core 1 keeps its own
    assert drain(s, 0) == ["any"]
    assert drain(s, 1) == ["p1"]


def test_drain_pinned_of_empty_core(s):
    s.push(job(name="any"))
    assert s.drain_pinned(1) == []
    assert s.queued == 1


# --- fair sharing between clients --------------------------------------------------------------

def cjob(client, name, priority=0, custom_id=0, core=ANY):
    rid = next(_ids)
    return Job(rid, client, rid, priority, custom_id, core, name)


def test_a_burst_of_one_client_does_not_hold_back_another(s):
    for i in range(30):
        s.push(cjob("greedy", f"g{i}"))
    s.push(cjob("late", "l0"))
    order = drain(s, 0)
    assert order.index("l0") <= 1          # the late client's first task runs at the next turn
    assert [n for n in order if n.startswith("g")] == [f"g{i}" for i in range(30)]   # own order kept


def test_clients_take_turns_within_a_priority(s):
    for i in range(3):
        s.push(cjob("a", f"a{i}"))
    for i in range(3):
        s.push(cjob("b", f"b{i}"))
    assert drain(s, 0) == ["a0", "b0", "a1", "b1", "a2", "b2"]


def test_fairness_never_overrides_priority_or_custom_id(s):
    for i in range(5):
        s.push(cjob("a", f"a{i}", priority=9))
    s.push(cjob("b", "b-low", priority=0))
    s.push(cjob("b", "b-pre", priority=255))
    s.push(cjob("c", "c-cid0", priority=9, custom_id=-1))
    assert drain(s, 1) == ["b-pre", "c-cid0", "a0", "a1", "a2", "a3", "a4", "b-low"]


def test_a_client_arriving_later_does_not_jump_ahead_of_work_already_served(s):
    for i in range(4):
        s.push(cjob("a", f"a{i}"))
    assert [s.pop_for(0).payload for _ in range(3)] == ["a0", "a1", "a2"]
    for i in range(3):                      # b's turns start at the turn now served (2), not at 0
        s.push(cjob("b", f"b{i}"))
    s.push(cjob("a", "a4"))
    assert drain(s, 0) == ["b0", "a3", "b1", "b2", "a4"]

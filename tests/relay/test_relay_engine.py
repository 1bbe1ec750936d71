"""The relay's conversation without sockets or processes: scheduling, credit, cancel, core
failure and liveness, driven through ``RelayEngine`` with a hand-held clock.

The ownership judge is a stand-in (every claim is taken, every handle allowed): ownership
has its own tests (tests/board/test_ownership.py, tests/integration/test_live_ownership.py)."""
from __future__ import annotations

import pytest

from protocol import acl, errors, header, messages, opids, wire
from protocol.constants import Command, Core
from protocol.core_state import CoreState
from protocol.liveness import ProcFact
from relay_server.effects import CloseFwLink, OpenFwLink, ToClient, ToCtl, ToFw
from relay_server.engine import RelayEngine
from vdsp_board.identity.ownership import Ownership

CORES = {"vdsp0": "ipc:///x/vdsp0.sock", "vdsp1": "ipc:///x/vdsp1.sock"}
A, B = b"\x00client-a", b"\x00client-b"


class TrustAll:
    def claim(self, body, meta=None, peer=""):
        return body.get("owner")

    def check_task(self, owner, body):
        pass


class Relay:
    """An engine and a clock; ``take()`` returns and clears the outputs."""

    def __init__(self, **kw) -> None:
        self.now = 100.0
        self.facts: dict[int, ProcFact] = {}     # what "the kernel" says of a pid
        self.asked: list[int] = []
        self.e = RelayEngine(CORES, self.now, ownership=TrustAll(), pid=4242, facts=self.fact, **kw)

    def fact(self, pid: int, now: float) -> ProcFact:
        self.asked.append(pid)
        return self.facts.get(pid, ProcFact.UNKNOWN)

    def take(self, kind: type | None = None) -> list:
        out, self.e.out = self.e.out, []
        return [o for o in out if kind is None or isinstance(o, kind)]

    def core_up(self, index: int, state: str = "running") -> None:
        name = list(CORES)[index]
        self.e.on_ctl(index, wire.encode(messages.ready(1, name, "core", state=state,
                                                        fw_endpoint=f"ipc:///x/{name}.fw.sock")), self.now)

    def both_up(self) -> None:
        self.e.tick(self.now)
        self.core_up(0)
        self.core_up(1)
        self.take()

    def task(self, client: bytes, msg_id: int, *, core: int = Core.ANY, priority: int = 0, custom_id: int = 0,
             op: int = opids.PING) -> None:
        msg = messages.task(msg_id, op, inputs=[], outputs=[], priority=priority, core=core, custom_id=custom_id)
        self.e.on_client(client, wire.encode(msg), self.now)

    def send(self, client: bytes, msg) -> None:
        self.e.on_client(client, wire.encode(msg), self.now)

    def fw_reply(self, index: int, frames: list, values: dict | None = None) -> None:
        relay_id = header.msg_id_of(frames[0])
        self.e.on_fw(index, wire.encode(messages.result(relay_id, values or {"ok": 1})), self.now)


def decode(frames) -> wire.Message:
    return wire.decode(frames)


def replies(outs, client=None) -> list[wire.Message]:
    return [decode(o.frames) for o in outs if isinstance(o, ToClient) and (client is None or o.identity == client)]


def tasks_sent(outs, index=None) -> list[wire.Message]:
    return [decode(o.frames) for o in outs if isinstance(o, ToFw) and (index is None or o.index == index)
            and header.command_of(o.frames[0]) == Command.TASK]


def test_cores_are_greeted_and_a_running_core_gets_a_firmware_link_and_the_relays_hello():
    r = Relay()
    r.e.tick(r.now)
    hellos = [decode(o.frames) for o in r.take(ToCtl)]
    assert [m.command for m in hellos] == [Command.HELLO, Command.HELLO] and hellos[0].body["role"] == "relay"
    r.core_up(0)
    out = r.take()
    assert out[0] == OpenFwLink(0, "ipc:///x/vdsp0.fw.sock")
    greet = decode(out[1].frames)
    assert isinstance(out[1], ToFw) and out[1].index == 0 and greet.command is Command.HELLO and greet.body["pid"] == 4242
    r.now += 0.2
    r.e.tick(r.now)          # vdsp1 has not answered: HELLO again, only to it, every 0.5 s
    assert [o.index for o in r.take(ToCtl) if decode(o.frames).command is Command.HELLO] == []
    r.now += 0.4
    r.e.tick(r.now)
    assert [o.index for o in r.take(ToCtl) if decode(o.frames).command is Command.HELLO] == [1]


def test_a_firmware_that_answers_the_relays_hello_busy_is_greeted_again_at_the_next_tick():
    """Before, the relay stayed unbound at that firmware: every task with buffers it forwarded was
    refused there (HB_DSP_FOREIGN_HANDLE) until the firmware restarted."""
    r = Relay()
    r.e.tick(r.now)
    r.core_up(0)
    (greet,) = [decode(o.frames) for o in r.take(ToFw)]
    busy = errors.CoreBusy("256 HELLOs are being verified; send HELLO again later")
    r.e.on_fw(0, wire.encode(messages.error(greet.msg_id, busy)), r.now)
    assert r.take(ToFw) == []
    r.now += 0.1
    r.e.tick(r.now)
    (again,) = [decode(o.frames) for o in r.take(ToFw)]
    assert again.command is Command.HELLO and again.body["role"] == "relay" and again.msg_id != greet.msg_id
    r.e.on_fw(0, wire.encode(messages.ready(again.msg_id, "vdsp0", "firmware")), r.now)
    r.now += 0.1
    r.e.tick(r.now)
    assert r.take(ToFw) == []                   # answered READY: greeted once and for all


def test_the_firmwares_answer_to_the_relays_hello_is_in_the_core_description():
    """What ``vdsp up`` waits for, and what it fails on at once: each firmware accepted the relay's
    HELLO (``fw_link`` ready), or refused it (``refused``, with the firmware's reason)."""
    r = Relay()
    r.e.tick(r.now)
    r.core_up(0, "offline")
    r.take()
    assert r.e.query("cores")["cores"][0]["fw_link"] == "closed"
    r.core_up(0)
    greet = decode(r.take(ToFw)[0].frames)
    assert r.e.query("cores")["cores"][0]["fw_link"] == "greeting"
    why = "process 4242 claims the role relay, but /rt/relay.pid names no live process"
    r.e.on_fw(0, wire.encode(messages.error(greet.msg_id, errors.ClaimRefused(why))), r.now)
    desc = r.e.query("cores")["cores"][0]
    assert (desc["fw_link"], desc["fw_refused"]) == ("refused", why)
    # the core restarts its firmware (a new one, a new link): the relay says HELLO again
    r.e.on_ctl(0, wire.encode(messages.event("vdsp0", "crashed", reason="crash: exception")), r.now)
    assert r.e.query("cores")["cores"][0]["reason"] == "crash: exception"
    assert r.e.query("cores")["cores"][0]["fw_link"] == "closed"
    r.core_up(0)
    greet = decode(r.take(ToFw)[0].frames)
    r.e.on_fw(0, wire.encode(messages.ready(greet.msg_id, "vdsp0", "firmware", state="running")), r.now)
    desc = r.e.query("cores")["cores"][0]
    assert (desc["fw_link"], desc["fw_refused"]) == ("ready", "")


def test_a_client_hello_is_answered_ready_once_every_core_is_known():
    r = Relay()
    r.send(A, messages.hello(5, "client", owner=7, pid=1))
    assert replies(r.take()) == []          # cores not heard yet
    r.core_up(0)
    r.core_up(1, "offline")
    (ready,) = replies(r.take(), A)
    assert ready.command is Command.READY and ready.msg_id == 5
    assert [(c["name"], c["state"]) for c in ready.body["cores"]] == [("vdsp0", "running"), ("vdsp1", "offline")]
    assert r.e.clients[A].owner == 7


def test_a_task_goes_to_a_firmware_under_the_relays_id_and_comes_back_under_the_clients():
    r = Relay()
    r.both_up()
    r.task(A, 77, core=Core.CORE_1, custom_id=3)
    (sent,) = tasks_sent(r.take(), 1)
    assert sent.msg_id != 77 and sent.custom_id == 3
    r.now += 0.25
    r.fw_reply(1, wire.encode(sent), {"core": "vdsp1"})
    (reply,) = replies(r.take(), A)
    assert (reply.command, reply.msg_id, reply.body) == (Command.RESULT, 77, {"core": "vdsp1"})
    assert reply.core == 0b10                    # the core that ran it, as a bit
    assert reply.custom_id == 0                  # queued for 0 us: it was sent at once
    assert r.e.query("stats")["completed"] == 1


def test_credit_bounds_the_tasks_sent_ahead_to_each_core():
    r = Relay(credit=2)
    r.both_up()
    for i in range(1, 6):
        r.task(A, i, core=Core.CORE_0)
    first = tasks_sent(r.take(), 0)
    assert len(first) == 2 and r.e.query("stats")["queued"] == 3
    r.fw_reply(0, wire.encode(first[0]))
    out = r.take()
    assert [m.msg_id for m in replies(out, A)] == [1] and len(tasks_sent(out, 0)) == 1
    assert r.e.query("stats")["inflight"] == {"vdsp0": 2, "vdsp1": 0}


def test_queue_order_among_waiting_tasks():
    r = Relay(credit=1)
    r.both_up()
    r.task(A, 1, core=Core.CORE_0)
    (running,) = tasks_sent(r.take(), 0)
    r.task(A, 2, core=Core.CORE_0, priority=10, custom_id=5)
    r.task(B, 3, core=Core.CORE_0, priority=10, custom_id=1)
    r.task(A, 4, core=Core.CORE_0, priority=255)
    r.task(B, 5, core=Core.CORE_0)
    ran = []
    sent = running
    for _ in range(4):
        r.fw_reply(0, wire.encode(sent))
        out = r.take()
        ran += [m.msg_id for m in replies(out)]
        (sent,) = tasks_sent(out, 0)
    r.fw_reply(0, wire.encode(sent))
    ran += [m.msg_id for m in replies(r.take())]
    assert ran == [1, 4, 3, 2, 5]     # PREEMP first, then priority 10 by custom_id, then 0


def test_cancel_of_a_queued_task_removes_it_and_of_a_task_sent_ahead_asks_the_firmware():
    r = Relay(credit=1)
    r.both_up()
    r.task(A, 1, core=Core.CORE_0)
    (ahead,) = tasks_sent(r.take(), 0)
    r.task(A, 2, core=Core.CORE_0)
    r.send(A, messages.cancel(10, 2))
    (answer,) = replies(r.take(), A)
    assert answer.msg_id == 10 and answer.body == {"state": "cancelled", "target": 2}
    r.send(A, messages.cancel(11, 1))            # in the firmware's hands: it decides
    out = r.take()
    (cancel,) = [decode(o.frames) for o in out if isinstance(o, ToFw)]
    assert cancel.command is Command.CANCEL and cancel.body["target"] == ahead.msg_id and replies(out) == []
    r.e.on_fw(0, wire.encode(messages.result(cancel.msg_id, {"state": "unknown", "target": ahead.msg_id})), r.now)
    (answer,) = replies(r.take(), A)
    assert answer.msg_id == 11 and answer.body["state"] == "running"    # not waiting there: it runs
    r.fw_reply(0, wire.encode(ahead))
    assert replies(r.take()) == []               # its result is discarded
    r.send(A, messages.cancel(12, 999))
    assert replies(r.take(), A)[0].body["state"] == "unknown"


def test_a_cancel_the_firmware_does_not_answer_is_answered_running_at_its_deadline():
    """PROTOCOL.md §5.5: a CANCEL forwarded to a firmware is answered when it answers, and at
    most CANCEL_WAIT_S after it arrived in any case (`running`: the task may run, unseen)."""
    from relay_server.engine import CANCEL_WAIT_S
    r = Relay(credit=1)
    r.both_up()
    r.task(A, 1, core=Core.CORE_0)
    (ahead,) = tasks_sent(r.take(), 0)
    r.send(A, messages.cancel(11, 1))
    (cancel,) = [decode(o.frames) for o in r.take(ToFw)]
    r.send(A, messages.cancel(12, 1))           # asked again meanwhile: one question per task, answered at once
    out = r.take()
    assert [o for o in out if isinstance(o, ToFw)] == []
    (again,) = replies(out, A)
    assert again.msg_id == 12 and again.body["state"] == "running"
    r.now += CANCEL_WAIT_S * 0.9
    r.e.tick(r.now)
    assert [m for m in replies(r.take(), A) if m.command is Command.RESULT] == []    # not yet
    r.now += CANCEL_WAIT_S * 0.2
    r.e.tick(r.now)
    (answer,) = [m for m in replies(r.take(), A) if m.command is Command.RESULT]
    assert answer.msg_id == 11 and answer.body["state"] == "running"
    late = messages.result(cancel.msg_id, {"state": "cancelled", "target": ahead.msg_id})
    r.e.on_fw(0, wire.encode(late), r.now)      # the firmware's late verdict: nobody is told twice
    assert replies(r.take(), A) == []
    assert r.e.cancels == {}


def test_a_core_that_crashes_fails_its_tasks_with_its_code_and_any_tasks_move_on():
    r = Relay(credit=1)
    r.both_up()
    r.task(A, 1, core=Core.CORE_0)
    r.task(A, 2, core=Core.CORE_0)      # pinned, queued
    r.task(A, 3)                        # ANY: goes to vdsp1
    r.task(A, 4)                        # ANY: queued (credit 1 on each core)
    r.take()
    r.e.on_ctl(0, wire.encode(messages.event("vdsp0", "crashed", reason="crash: exception")), r.now)
    out = r.take()
    assert CloseFwLink(0) in out
    failed = {m.msg_id: m.body["code"] for m in replies(out, A) if m.command is Command.ERROR}
    assert failed == {1: errors.CoreCrashed.code, 2: errors.CoreCrashed.code}
    assert any(decode(o.frames).command is Command.EVENT for o in out if isinstance(o, ToClient))   # relayed
    r.task(A, 5, core=Core.CORE_0)
    (refused,) = replies(r.take(), A)
    assert refused.body["code"] == errors.CoreCrashed.code
    assert r.e.query("stats")["queued"] == 1     # task 4 waits for vdsp1, not failed


def test_a_silent_core_is_declared_dead_and_no_core_left_fails_the_waiting_tasks():
    r = Relay(credit=1)
    r.both_up()
    r.e.on_ctl(1, wire.encode(messages.event("vdsp1", "offline", reason="stopped")), r.now)
    r.task(A, 1)
    r.task(A, 2)
    r.take()
    r.now += 20.5        # vdsp0 silent past the hung deadline (20 s), its process not seen (no pid)
    r.e.tick(r.now)
    out = r.take()
    assert r.e.cores[0].state is CoreState.DEAD
    codes = {m.msg_id: m.body["code"] for m in replies(out, A) if m.command is Command.ERROR}
    assert codes == {1: errors.CoreDead.code, 2: errors.CoreOffline.code}
    events = [decode(o.frames) for o in out if isinstance(o, ToClient) and header.command_of(o.frames[0]) == Command.EVENT]
    assert events and events[0].body["state"] == "dead"


@pytest.mark.parametrize("case, code", [
    ("bad core", errors.InvalidCore.code), ("too many", errors.TaskNumExceedLimit.code),
    ("duplicate", errors.InvalidArgument.code), ("core offline", errors.CoreOffline.code),
])
def test_tasks_that_cannot_be_taken_get_coded_errors(case, code):
    r = Relay(max_tasks_per_client=2, credit=1)
    r.both_up()
    if case == "bad core":
        r.task(A, 1, core=7)
    elif case == "too many":
        for i in (1, 2, 3):
            r.task(A, i)
    elif case == "duplicate":
        r.task(A, 1, core=Core.CORE_0)
        r.task(A, 1, core=Core.CORE_0)
    else:
        r.e.on_ctl(1, wire.encode(messages.event("vdsp1", "offline")), r.now)
        r.task(A, 1, core=Core.CORE_1)
    errs = [m for m in replies(r.take(), A) if m.command is Command.ERROR]
    assert len(errs) == 1 and errs[0].body["code"] == code


def test_a_departed_client_s_queued_tasks_never_run_and_those_sent_ahead_are_cancelled():
    r = Relay(credit=1)
    r.both_up()
    r.task(A, 1, core=Core.CORE_0)
    r.task(A, 2, core=Core.CORE_0)
    (ahead,) = tasks_sent(r.take(), 0)
    r.send(A, messages.disconnect())
    out = r.take()
    (cancel,) = [decode(o.frames) for o in out if isinstance(o, ToFw)]
    assert cancel.command is Command.CANCEL and cancel.body["target"] == ahead.msg_id
    assert A not in r.e.clients and r.e.query("stats")["queued"] == 0
    r.fw_reply(0, wire.encode(ahead))
    assert tasks_sent(r.take()) == []            # task 2 never went anywhere


def test_a_client_gone_silent_is_dropped_and_undeliverable_replies_are_counted():
    r = Relay()
    r.both_up()
    r.send(A, messages.hello(1, "client"))
    r.take()
    r.e.reply_dropped(A)
    assert r.e.query("stats")["dropped_replies"] == 1
    r.now += 20.5
    r.e.tick(r.now)
    assert A not in r.e.clients


def test_a_core_replaced_between_two_heartbeats_fails_what_the_old_one_had_and_is_greeted_afresh():
    """vdsp up restarts a killed core at once: its READY (another pid) came before the liveness
    window ended, and tasks went to the new firmware unannounced (refused: foreign handles)."""
    r = Relay()
    r.e.tick(r.now)
    r.e.on_ctl(0, wire.encode(messages.ready(1, "vdsp0", "core", state="running", pid=100, fw_pid=101,
                                             fw_endpoint="ipc:///x/vdsp0.fw.sock")), r.now)
    r.core_up(1)
    r.take()
    r.task(A, 1, core=Core.CORE_0)
    r.take()
    # the new core's READY (an answer to a HELLO) comes before anything told of the old one's end
    r.e.on_ctl(0, wire.encode(messages.ready(7, "vdsp0", "core", state="running", pid=200, fw_pid=201,
                                             fw_endpoint="ipc:///x/vdsp0.fw.sock")), r.now)
    out = r.take()
    (failed,) = [m for m in replies(out, A) if m.command is Command.ERROR]
    assert failed.msg_id == 1 and failed.body["code"] == errors.CoreDead.code and "restarted" in failed.body["message"]
    kinds = [(type(o), o.index) for o in out if isinstance(o, (CloseFwLink, OpenFwLink, ToFw))]
    assert kinds[:3] == [(CloseFwLink, 0), (OpenFwLink, 0), (ToFw, 0)]   # the new link's first message: our HELLO
    assert decode(next(o for o in out if isinstance(o, ToFw)).frames).command is Command.HELLO


def up_with_pids(r: Relay) -> None:
    """Both cores running, announced with their processes (vdsp0: pid 100, vdsp1: pid 110)."""
    r.e.tick(r.now)
    for index, name in enumerate(CORES):
        pid = 100 + 10 * index
        r.e.on_ctl(index, wire.encode(messages.ready(1, name, "core", state="running", pid=pid, fw_pid=pid + 1,
                                                     fw_endpoint=f"ipc:///x/{name}.fw.sock")), r.now)
    r.take()


def test_a_silent_core_is_not_dead_before_the_hung_deadline_however_many_beats_it_missed():
    """A starved core on a busy host misses beats: 10 s of silence (20 intervals) is not death."""
    r = Relay()
    up_with_pids(r)
    r.task(A, 1, core=Core.CORE_0)
    (ahead,) = tasks_sent(r.take(), 0)
    for _ in range(40):
        r.now += 0.25
        r.e.tick(r.now)
    out = r.take()
    assert r.e.cores[0].state is CoreState.RUNNING
    assert [m for m in replies(out, A) if m.command is Command.ERROR] == []
    assert r.asked == []               # nothing to ask the kernel before the deadline
    r.fw_reply(0, wire.encode(ahead))  # the core's firmware answers late: the client gets its result
    (result,) = replies(r.take(), A)
    assert result.command is Command.RESULT and result.msg_id == 1


@pytest.mark.parametrize("fact, dead", [(ProcFact.STOPPED, True), (ProcFact.IDLE, True), (ProcFact.UNKNOWN, True),
                                        (ProcFact.PROGRESSING, False), (ProcFact.PENDING, False)])
def test_past_the_deadline_a_silent_core_is_dead_unless_its_process_makes_progress(fact, dead):
    r = Relay()
    up_with_pids(r)
    r.facts[100] = fact
    r.task(A, 1, core=Core.CORE_0)
    r.take()
    r.now += 21
    r.e.tick(r.now)
    out = r.take()
    assert 100 in r.asked              # vdsp0's pid (ipc: the relay can see it)
    assert (r.e.cores[0].state is CoreState.DEAD) is dead
    errs = [m for m in replies(out, A) if m.command is Command.ERROR]
    if dead:
        assert [(m.msg_id, m.body["code"]) for m in errs] == [(1, errors.CoreDead.code)]
        assert fact.value in errs[0].body["message"] and "hung" in errs[0].body["message"]
    else:
        assert errs == []
        r.now += 40                    # past 3 x the deadline even a spinning process is hung
        r.e.tick(r.now)
        assert r.e.cores[0].state is CoreState.DEAD


def test_a_core_whose_control_connection_closes_is_dead_at_once_and_its_tasks_fail():
    """The kernel closes a dead process's sockets: no heartbeat window to wait for."""
    r = Relay(credit=1)
    up_with_pids(r)
    r.task(A, 1, core=Core.CORE_0)             # sent ahead to vdsp0's firmware
    r.task(A, 2, core=Core.CORE_0)             # queued, pinned to vdsp0
    r.task(A, 3)                               # queued for ANY: vdsp1 takes it
    r.take()
    r.e.ctl_lost(0, r.now)                     # no time passes
    out = r.take()
    assert r.e.cores[0].state is CoreState.DEAD
    codes = {m.msg_id: m.body["code"] for m in replies(out, A) if m.command is Command.ERROR}
    assert codes == {1: errors.CoreDead.code, 2: errors.CoreDead.code}
    events = [decode(o.frames) for o in out if isinstance(o, ToClient) and header.command_of(o.frames[0]) == Command.EVENT]
    assert events[0].body["state"] == "dead" and "pid 100" in events[0].body["reason"]
    assert CloseFwLink(0) in out
    assert [decode(o.frames).command for o in out if isinstance(o, ToCtl)] == [Command.HELLO]   # for its successor


def test_a_client_is_dropped_when_its_connection_closes_not_when_it_is_silent_for_a_while():
    r = Relay(credit=1)
    up_with_pids(r)
    r.send(A, messages.hello(1, "client", pid=555))
    r.send(B, messages.hello(1, "client", pid=666))
    r.e.clients[A].kernel_pid, r.e.clients[B].kernel_pid = 555, 666   # as the adapter learns them
    r.task(A, 2, core=Core.CORE_0)
    r.task(A, 3, core=Core.CORE_0)
    r.take()
    r.now += 10                                 # a starved client misses 20 beats: kept
    r.e.tick(r.now)
    assert A in r.e.clients and r.e.query("stats")["queued"] == 1
    r.facts[555], r.facts[666] = ProcFact.GONE, ProcFact.IDLE
    r.e.client_disconnected(r.now)              # a connection closed: A's process exited, B's lives
    assert A not in r.e.clients and r.e.query("stats")["queued"] == 0
    assert B in r.e.clients


def test_a_closed_connection_looks_up_each_client_process_once_however_many_connections_it_has():
    # issue 40's flood: one process held 1,024 connections, and each connection that closed (the
    # flood's reconnects refused at the limit, ~10 a second) read /proc/<pid>/stat once per client:
    # 1,024 reads of the same file, most of the relay's loop, and opens of other clients took seconds
    r = Relay(credit=1)
    up_with_pids(r)
    flood = [b"\x00flood-%d" % i for i in range(50)]
    for identity in flood:
        r.send(identity, messages.hello(1, "client", pid=777))
        r.e.clients[identity].kernel_pid = 777
    r.send(A, messages.hello(1, "client", pid=555))
    r.e.clients[A].kernel_pid = 555
    r.facts[555], r.facts[777] = ProcFact.GONE, ProcFact.IDLE
    r.asked.clear()
    r.e.client_disconnected(r.now)
    assert sorted(r.asked) == [555, 777]
    assert A not in r.e.clients and all(identity in r.e.clients for identity in flood)
    r.facts[777] = ProcFact.GONE                 # the flood's process exits: all its clients go, on one look
    r.asked.clear()
    r.now += 0.5
    r.e.tick(r.now)
    assert r.asked.count(777) == 1 and not any(identity in r.e.clients for identity in flood)


def test_silent_clients_of_one_busy_process_cost_one_look_at_it_a_tick():
    r = Relay(credit=1, hung_ms=1000)
    up_with_pids(r)
    flood = [b"\x00flood-%d" % i for i in range(50)]
    for identity in flood:
        r.send(identity, messages.hello(1, "client", pid=777))
        r.e.clients[identity].kernel_pid = 777
    r.facts[777] = ProcFact.PROGRESSING          # busy, silent on all its connections: reprieved
    r.now += 1.5
    r.asked.clear()
    r.e.tick(r.now)
    assert r.asked.count(777) == 1 and all(identity in r.e.clients for identity in flood)
    r.facts[777] = ProcFact.GONE
    r.now += 0.1
    r.e.tick(r.now)
    assert not any(identity in r.e.clients for identity in flood)


def test_a_client_whose_process_is_still_exiting_at_its_disconnect_is_dropped_when_it_has_exited():
    # a dying process closes its sockets before the kernel shows it as exited (a zombie)
    r = Relay(credit=1)
    up_with_pids(r)
    r.send(A, messages.hello(1, "client", pid=555))
    r.e.clients[A].kernel_pid = 555
    r.task(A, 2, core=Core.CORE_0)
    r.task(A, 3, core=Core.CORE_0)
    r.take()
    r.facts[555] = ProcFact.PROGRESSING          # still in exit(2) when the close is seen
    r.e.client_disconnected(r.now)
    assert A in r.e.clients
    r.facts[555] = ProcFact.GONE
    r.now += 0.5
    r.e.tick(r.now)                              # looked at again shortly after
    assert A not in r.e.clients and r.e.query("stats")["queued"] == 0


def test_ready_tells_clients_the_relay_s_pid_and_hung_deadline():
    r = Relay(hung_ms=7000)
    up_with_pids(r)
    r.send(A, messages.hello(1, "client"))
    (ready,) = replies(r.take(), A)
    assert ready.body["hung_ms"] == 7000 and ready.body["pid"] == 4242


# --- ownership verdicts remembered per body: never past a change ---------------------------------

ME, OTHER = 0x000123, 0x000456


def handle(owner: int, offset: int = 0x1000, size: int = 64) -> list:
    return [(owner << acl.OFFSET_BITS) | offset, size, 0]


class Grants:
    """The access lists the judge reads (``acl.Reader``'s part): changed by the test at will."""

    def __init__(self) -> None:
        self.of: dict[int, tuple] = {}

    def grants(self, owner: int) -> tuple:
        return self.of.get(owner, ())


def judged_relay() -> tuple[Relay, Grants]:
    """A relay whose tasks the real judge (``vdsp_board.identity.ownership.Ownership``) checks, its client
    A bound to owner ME by HELLO."""
    r = Relay()
    lists = Grants()
    r.e.ownership = Ownership("relay", reader=lists)
    r.both_up()
    r.e.on_client(A, wire.encode(messages.hello(1, "client", owner=ME)), r.now)
    r.e.clients[A].owner = ME          # as a verified claim would bind it (the judge's claim needs a real peer)
    r.take()
    return r, lists


def outcome(r: Relay, msg_id: int, body_frames: list) -> int:
    """0 if the task was taken (sent to a core), else the code it was refused with."""
    r.e.on_client(A, [header.pack(Command.TASK, msg_id, opids.CHECKSUM), *body_frames[1:]], r.now)
    out = r.take()
    if tasks_sent(out):
        for o in out:          # answer it: the client's slots free again
            if isinstance(o, ToFw):
                r.fw_reply(o.index, o.frames)
        r.take()
        return 0
    (reply,) = replies(out, A)
    return reply.body["code"]


def test_a_revoked_grant_is_refused_on_the_very_next_task_with_the_same_body():
    r, lists = judged_relay()
    foreign = wire.encode(messages.task(0, opids.CHECKSUM, inputs=[handle(OTHER)], outputs=[]))
    assert outcome(r, 10, foreign) == errors.ForeignHandle.code
    lists.of[OTHER] = (acl.AclEntry(0x1000, 64, ME),)
    assert [outcome(r, 11 + i, foreign) for i in range(3)] == [0, 0, 0]      # the same bytes, again and again
    lists.of[OTHER] = ()                                                      # revoked (or OTHER died)
    assert outcome(r, 20, foreign) == errors.ForeignHandle.code
    lists.of[OTHER] = (acl.AclEntry(0x1000, 32, ME),)                         # narrowed below the handle
    assert outcome(r, 21, foreign) == errors.ForeignHandle.code


def test_a_body_of_the_clients_own_memory_is_judged_again_for_another_binding():
    r, lists = judged_relay()
    own = wire.encode(messages.task(0, opids.CHECKSUM, inputs=[handle(ME)], outputs=[handle(ME, 0x2000)]))
    assert [outcome(r, 10 + i, own) for i in range(3)] == [0, 0, 0]
    r.e.clients[A].owner = None                  # a refused new claim leaves the connection unbound
    assert outcome(r, 20, own) == errors.ForeignHandle.code
    r.e.clients[A].owner = OTHER
    assert outcome(r, 21, own) == errors.ForeignHandle.code
    r.e.clients[A].owner = ME
    assert outcome(r, 22, own) == 0


def test_a_bad_body_is_refused_every_time():
    r, _ = judged_relay()
    bad = wire.encode(messages.task(0, opids.CHECKSUM, inputs=[[1, 2, 0x80]], outputs=[]))
    assert [outcome(r, 10 + i, bad) for i in range(2)] == [errors.InvalidArgument.code] * 2


def test_a_firmware_link_that_takes_no_messages_fails_its_tasks_and_is_opened_afresh():
    """The server could not queue a message on vdsp1's firmware link (the firmware denied the
    relay's CURVE key: libzmq ended that connection for good). What was sent ahead there fails
    HB_DSP_CORE_OFFLINE at once, the link is opened again and greeted, and the next task goes on it."""
    r = Relay()
    r.both_up()
    r.task(A, 7, core=Core.CORE_1)
    assert len(tasks_sent(r.take(), 1)) == 1
    r.e.fw_link_stuck(1, r.now)
    out = r.take()
    (reply,) = replies(out, A)
    assert (reply.command, reply.msg_id, reply.body["code"]) == (Command.ERROR, 7, errors.CoreOffline.code)
    assert "takes no messages" in reply.body["message"]
    links = [(type(o), o.index) for o in out if isinstance(o, (CloseFwLink, OpenFwLink))]
    assert links == [(CloseFwLink, 1), (OpenFwLink, 1)]
    assert [decode(o.frames).command for o in out if isinstance(o, ToFw) and o.index == 1] == [Command.HELLO]
    r.task(A, 8, core=Core.CORE_1)
    (sent,) = tasks_sent(r.take(), 1)
    r.fw_reply(1, wire.encode(sent), {"core": "vdsp1"})
    (reply,) = replies(r.take(), A)
    assert (reply.command, reply.msg_id) == (Command.RESULT, 8)
    r.e.fw_link_stuck(0, r.now)     # vdsp0's link, nothing in flight there: opened afresh, nobody failed
    out = r.take()
    links = [(type(o), o.index) for o in out if isinstance(o, (CloseFwLink, OpenFwLink))]
    assert replies(out) == [] and links == [(CloseFwLink, 0), (OpenFwLink, 0)]

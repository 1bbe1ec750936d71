"""A firmware's I/O thread (``dsp_side.fwio``) on a real socket, in this process: the test plays
the compute thread (it takes the tasks handed over and decides when each ends), so "while a
task runs" is exact, not a matter of timing. The processes, end to end, are in
tests/integration/test_live_busy_firmware.py; how soon the answers come, in ``vdsp bench answers``."""
from __future__ import annotations

import select
import sys
import threading
import time

import pytest
import zmq

from dsp_side import fwio
from dsp_side.fwio import FirmwareIO
from dsp_side.inbox import Inbox
from dsp_side.intake import Intake
from protocol import errors, messages, opids, wire
from protocol.constants import MAX_RAW_FRAME, Command
from vdsp_board.identity.admission import Admission
from vdsp_board.identity.ownership import Ownership

PER_PEER = 4
WAIT_MS = 30_000        # a bound on waiting for what must come (a loaded host is slow, not dead)


class Served:
    """A bound ROUTER served by a FirmwareIO (``runner``: its quick path), and a client DEALER connected to it."""

    def __init__(self, where, runner=None) -> None:
        self.ctx = zmq.Context()
        sock = self.ctx.socket(zmq.ROUTER)
        sock.linger = 0
        admission = Admission(sock, "test firmware", max_frame=MAX_RAW_FRAME)
        url = f"ipc://{where}/fw.sock"
        sock.bind(url)
        intake = Intake("vdsp0", "1.0.0", Ownership("test firmware", accept_relay=True),
                        Inbox(max_per_peer=PER_PEER), run_ahead=2)
        self.io = FirmwareIO(sock, admission, intake, tcp=False, name="test", runner=runner)
        self.io.start()
        self.client = self.ctx.socket(zmq.DEALER)
        self.client.linger = 0
        self.client.connect(url)
        self.waiter = select.poll()
        self.waiter.register(self.io.jobs.fileno(), select.POLLIN)

    def send(self, msg: wire.Message) -> None:
        self.client.send_multipart(wire.encode(msg))

    def recv(self) -> wire.Message:
        assert self.client.poll(WAIT_MS), "no answer"
        return wire.decode(self.client.recv_multipart())

    def start_task(self) -> tuple[bytes, list, int | None]:
        """What the compute thread does: pop the next task handed over (waiting for one)."""
        jobs = self.io.jobs
        deadline = time.monotonic() + WAIT_MS / 1000
        while True:
            try:
                return jobs.items.popleft()
            except IndexError:
                jobs.bell.clear()
                if not jobs.items:
                    assert time.monotonic() < deadline, "no task was handed over"
                    self.waiter.poll(100)

    def end_task(self, job: tuple[bytes, list, int | None]) -> None:
        identity, frames, _ = job
        msg_id = wire.decode(frames).msg_id
        self.io.done.put((identity, wire.encode(messages.result(msg_id, {"ran": msg_id})), 0.0))

    def close(self) -> None:
        self.io.stop()
        self.client.close(0)
        self.ctx.term()


@pytest.fixture
def served(short_dir):
    s = Served(short_dir)
    yield s
    s.close()


def ping(msg_id: int) -> wire.Message:
    return messages.task(msg_id, opids.PING, inputs=[], outputs=[])


def test_cancel_hello_and_refusals_are_answered_while_a_task_runs_and_every_task_once(served):
    served.send(ping(1))
    running = served.start_task()                       # task 1 computes until the end of this test
    for i in range(2, 2 + PER_PEER + 3):                # PER_PEER wait, 3 are refused
        served.send(ping(i))
    served.send(messages.cancel(50, 3))                 # 3 waits (in the run queue or the inbox)
    served.send(messages.hello(51, "client"))
    got = {}
    while len(got) < 3 + 2 + 1:
        msg = served.recv()
        got[msg.msg_id] = msg
    assert [got[i].body["code"] for i in range(2 + PER_PEER, 2 + PER_PEER + 3)] == [errors.CoreBusy.code] * 3
    assert got[3].body["code"] == errors.TaskCancelled.code
    assert got[50].body == {"state": "cancelled", "target": 3}
    assert got[51].command is Command.READY
    served.end_task(running)
    ran = [1]
    assert served.recv().msg_id == 1
    for _ in range(PER_PEER - 1):                       # 2, 4, 5: each once, in order
        job = served.start_task()
        served.end_task(job)
        ran.append(served.recv().msg_id)
    assert ran == [1, 2, 4, 5]
    assert not served.client.poll(200), "a request was answered twice"


def test_answers_come_while_a_task_holds_the_gil(served):
    """The compute thread loops in pure Python (as a pure-Python operator does): the I/O thread
    still answers, at the interpreter's own switch interval (nothing changes it)."""
    served.send(ping(1))
    served.send(ping(2))
    job = served.start_task()
    answered = threading.Event()
    interval = sys.getswitchinterval()
    seen = set()

    def spin() -> None:         # the operator: holds the GIL but at the interpreter's switch interval
        deadline = time.monotonic() + WAIT_MS / 1000
        while not answered.is_set() and time.monotonic() < deadline:
            seen.add(sys.getswitchinterval())
    compute = threading.Thread(target=spin)
    compute.start()
    served.send(messages.cancel(10, 2))
    try:
        first, second = served.recv(), served.recv()
    finally:
        answered.set()
        compute.join()
    assert (first.msg_id, second.body) == (2, {"state": "cancelled", "target": 2})
    assert seen == {interval}
    served.end_task(job)
    assert served.recv().msg_id == 1


class QuickRunner:
    """The firmware's side of the quick path (``Firmware.computing``, ``quick``, ``run_job``):
    the tasks whose msg_id is in ``quick`` are quick; ``ran`` records (msg_id, thread name)."""

    def __init__(self, quick: set[int]) -> None:
        self.computing = threading.Lock()
        self.quick_ids = quick
        self.ran: list[tuple[int, str]] = []

    def quick(self, frames: list) -> bool:
        return wire.decode(frames).msg_id in self.quick_ids

    def run_job(self, job: tuple, idle: bool = False) -> tuple[list, float]:
        msg_id = wire.decode(job[1]).msg_id
        self.ran.append((msg_id, threading.current_thread().name))
        return wire.encode(messages.result(msg_id, {"ran": msg_id})), 0.0


def test_a_quick_task_alone_is_run_and_answered_by_the_io_thread(short_dir):
    runner = QuickRunner({1, 2})
    s = Served(short_dir, runner)
    try:
        for i in (1, 2):
            s.send(ping(i))
            assert s.recv().body == {"ran": i}
        assert runner.ran == [(1, "test-io"), (2, "test-io")]
        assert not s.io.jobs.items and s.io.intake.running == 0      # nothing was handed to a compute thread
    finally:
        s.close()


def test_a_quick_task_waits_for_the_task_that_computes_one_task_at_a_time(short_dir):
    """Task 1 (not quick) is handed out and computes: quick task 2 is handed out after it, not
    run beside it; with the compute thread between tasks (holding ``computing``), quick task 3
    is handed out too."""
    runner = QuickRunner({2, 3})
    s = Served(short_dir, runner)
    try:
        s.send(ping(1))
        first = s.start_task()
        s.send(ping(2))
        second = s.start_task()                     # handed over while 1 computes
        assert runner.ran == []
        s.end_task(first)
        s.end_task(second)
        assert [s.recv().msg_id for _ in range(2)] == [1, 2]
        with runner.computing:
            s.send(ping(3))
            third = s.start_task()
        s.end_task(third)
        assert s.recv().msg_id == 3
        assert runner.ran == []
    finally:
        s.close()


@pytest.mark.parametrize("turn_s", [fwio.QUICK_TURN_S, 0.0])
def test_a_flood_of_quick_tasks_is_run_in_order_by_the_io_thread(short_dir, monkeypatch, turn_s):
    """As many as the inbox takes, arriving together, and however short a turn of the quick path (0: one task a
    turn, the next one left for the next turn), none is handed to the compute thread. Holds PROTOCOL.md's
    scheduling line "while it runs tasks that ran under 50 µs before itself, one after another (one slower run in a
    row forgiven: a preemption on a busy host)"."""
    monkeypatch.setattr(fwio, "QUICK_TURN_S", turn_s)
    runner = QuickRunner(set(range(1, PER_PEER + 1)))
    s = Served(short_dir, runner)
    try:
        for i in range(1, PER_PEER + 1):
            s.send(ping(i))
        assert [s.recv().msg_id for _ in range(PER_PEER)] == list(range(1, PER_PEER + 1))
        assert runner.ran == [(i, "test-io") for i in range(1, PER_PEER + 1)]
        assert s.io.intake.running == 0
    finally:
        s.close()

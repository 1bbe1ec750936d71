"""The liveness rule (``protocol.liveness``: silence makes a peer hung only past a deadline, and
then only if its process makes no progress) and the kernel facts it rests on
(``vdsp_board.processes.procfacts``, read from real processes: running, stopped, busy, exited)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from protocol.liveness import Liveness, ProcFact
from tests.conftest import wait_until
from vdsp_board.processes.procfacts import ProcFacts, exited


@pytest.mark.parametrize("silent, fact, hung", [
    (1.6, ProcFact.UNKNOWN, False),     # three missed beats: not even a question
    (19.9, ProcFact.GONE, True),        # an exited process is dead whenever we learn it
    (19.9, ProcFact.STOPPED, False),    # within the deadline nothing is decided by silence
    (20.1, ProcFact.UNKNOWN, True),     # a tcp peer: silence past the deadline decides
    (20.1, ProcFact.STOPPED, True),
    (20.1, ProcFact.IDLE, True),
    (20.1, ProcFact.PROGRESSING, False),
    (20.1, ProcFact.PENDING, False),
    (60.1, ProcFact.PROGRESSING, True),  # a live-lock: past 3 x the deadline
])
def test_the_hung_rule(silent, fact, hung):
    live = Liveness(0.0, 500, 20_000)
    assert live.overdue(silent) is (silent > 20)
    assert live.hung(silent, fact) is hung


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


def test_facts_of_a_sleeping_a_stopped_a_busy_and_an_exited_process():
    facts = ProcFacts()
    sleeper = _child("import time; time.sleep(60)")
    busy = _child("while True: pass")
    try:
        assert wait_until(lambda: facts.fact(busy.pid, 0.0) is ProcFact.PROGRESSING, 10)
        # a sleeping process: undecided at the first look, idle once a second passed without CPU
        assert wait_until(lambda: facts.fact(sleeper.pid, 0.0) is ProcFact.PENDING, 10)
        assert facts.fact(sleeper.pid, 0.2) is ProcFact.PENDING
        assert wait_until(lambda: facts.fact(sleeper.pid, 5.0) is ProcFact.IDLE, 10)
        os.kill(busy.pid, signal.SIGSTOP)
        assert wait_until(lambda: facts.fact(busy.pid, 6.0) is ProcFact.STOPPED, 10)
        os.kill(busy.pid, signal.SIGCONT)
        sleeper.kill()
        assert wait_until(lambda: facts.fact(sleeper.pid, 7.0) is ProcFact.GONE, 10)   # a zombie counts
        assert exited(sleeper.pid) and not exited(busy.pid)
        sleeper.wait()
        assert facts.fact(sleeper.pid, 8.0) is ProcFact.GONE and exited(sleeper.pid)
        assert facts.fact(None, 8.0) is ProcFact.UNKNOWN
    finally:
        for p in (sleeper, busy):
            p.kill()
            p.wait()


class _Pending:
    def __init__(self, msg_id: int) -> None:
        self.msg_id, self.error = msg_id, None

    def _complete(self, body, error, *rest) -> None:
        self.error = error


def _relay_session(hung_ms: int):
    from arm_side.session import PeerState, Session
    session = Session("relay", 0)
    peer = PeerState("relay", 0.0)
    session.peers.append(peer)
    session.connected(peer, {"heartbeat_ms": 500, "hung_ms": hung_ms, "pid": 4242, "cores": []}, 0.0)
    req = _Pending(7)
    session.track(req)
    return session, peer, req


def test_the_sdk_takes_a_silent_relay_for_hung_only_past_its_announced_deadline():
    from protocol import errors
    session, peer, req = _relay_session(8000)
    assert peer.pid == 4242
    session.tick(5.0, facts=lambda p: ProcFact.IDLE)            # 10 missed beats: nothing decided
    session.tick(8.5, facts=lambda p: ProcFact.PROGRESSING)     # past it, but the relay runs (starved)
    assert peer.alive and req.error is None
    session.tick(8.6, facts=lambda p: ProcFact.STOPPED)
    assert not peer.alive and isinstance(req.error, errors.RelayUnavailable)
    assert "hung" in req.error.message and "stopped" in req.error.message


def test_the_sdk_takes_a_relay_whose_connection_closed_for_dead_at_once():
    from protocol import errors
    session, peer, req = _relay_session(20_000)
    session.tick(0.1, closed=lambda p: True)
    assert not peer.alive and isinstance(req.error, errors.RelayUnavailable)
    assert "connection closed" in req.error.message


def test_a_direct_client_whose_tcp_firmware_connection_closed_fails_its_tasks_there_once_and_keeps_the_core():
    """Direct mode over tcp (issue 40, point 6): the firmware's replies to the tasks in flight
    went to the closed connection; each fails CoreOffline at once (before: its 300 s timeout),
    the core stays alive, HELLO goes to the firmware again; the control connection: HELLO again."""
    from protocol import errors, wire
    from protocol.constants import Command
    from arm_side.session import PeerState, Session
    from arm_side.steps import HelloFw, Send
    session = Session("direct", 0)
    peer = PeerState("vdsp0", 0.0)
    session.peers.append(peer)
    peer.fw_endpoint = "tcp://127.0.0.1:7001"
    tasks = [_Pending(msg_id) for msg_id in (3, 4)]
    for task in tasks:
        session.track(task)
        peer.inflight.add(task.msg_id)
    assert session.fw_closed(peer) == [HelloFw(peer)]
    assert all(isinstance(t.error, errors.CoreOffline) and "closed with task" in t.error.message for t in tasks)
    assert not session.pending and not peer.inflight and peer.alive
    assert session.fw_closed(peer) == [HelloFw(peer)]      # nothing in flight: nothing more fails
    [send] = session.control_closed(peer)
    assert isinstance(send, Send) and send.peer is peer and wire.decode(send.frames).command == Command.HELLO
    assert peer.alive


def test_a_process_start_time_names_it_until_it_is_gone():
    from vdsp_board.processes import procfacts
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        first = procfacts.start_time(child.pid)
        assert isinstance(first, int) and first >= procfacts.start_time(os.getpid())
        assert procfacts.start_time(child.pid) == first         # the same process, the same start
    finally:
        child.kill()
        child.wait()
    assert procfacts.start_time(child.pid) is None              # reaped: no entry (nor a start to match)

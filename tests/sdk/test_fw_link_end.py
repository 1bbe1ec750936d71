"""Direct mode: a core killed under a task takes its firmware (its child) with it, and the client
can hear the firmware's ipc connection close, and the link it makes afresh fail to connect, before
it hears the core's control connection close. The task reached the firmware: its end is the core's
word (PROTOCOL.md §10: HB_DSP_CORE_DEAD for a dead core), never the later link's failure — before,
that failure failed it HB_DSP_CORE_OFFLINE (seen under load in test_capi_hb_native). The session's
events in that order, as the reader hands them over (``Links._tick``)."""
from __future__ import annotations

from arm_side.session import PeerState, Session
from arm_side.steps import OpenFw
from arm_side.task import Request
from protocol import errors
from protocol.task_options import DEFAULT

ENDPOINT = "ipc:///x/vdsp0.fw.sock"


def running_core() -> tuple[Session, PeerState]:
    session = Session("direct", owner=0x1234)
    peer = PeerState("vdsp0", 0.0)
    session.peers.append(peer)
    session.connected(peer, {"heartbeat_ms": 500, "pid": 4242}, 0.0)
    session.core_state(peer, "running", {"fw_endpoint": ENDPOINT})
    return session, peer


def sent(session: Session, msg_id: int) -> Request:
    """A task in flight on the core's firmware link (``Links.submit``'s steps)."""
    session.task_link(msg_id, DEFAULT, has_buffers=False)
    task = Request(None, msg_id)
    session.track(task)
    return task


def test_a_task_whose_firmware_connection_closed_fails_with_the_cores_word_not_a_new_links_failure():
    session, peer = running_core()
    task = sent(session, 1)
    assert session.fw_link_dead(peer, "ended", ENDPOINT) == [OpenFw(peer, ENDPOINT)]   # made afresh
    assert session.fw_link_dead(peer, "failed", ENDPOINT) == [OpenFw(peer, ENDPOINT)]  # no firmware there
    assert not task.done(), task.error
    session.fw_link_dead(peer, "failed", ENDPOINT)           # and again, at each tick
    assert not task.done(), task.error
    session.peer_dead(peer, "its connection closed")           # the core's control connection
    assert isinstance(task.error, errors.CoreDead) and "vdsp0" in task.error.message, task.error
    assert not peer.inflight and not peer.fw_ended


def test_a_crashed_firmware_fails_it_as_the_core_says():
    session, peer = running_core()
    task = sent(session, 1)
    session.fw_link_dead(peer, "ended", ENDPOINT)
    session.fw_link_dead(peer, "failed", ENDPOINT)
    session.core_state(peer, "crashed", {"reason": "crash: killed by SIGKILL"})
    assert isinstance(task.error, errors.CoreCrashed), task.error


def test_a_task_sent_on_the_link_that_failed_never_arrived_and_fails_offline():
    session, peer = running_core()
    before = sent(session, 1)
    session.fw_link_dead(peer, "ended", ENDPOINT)
    after = sent(session, 2)                                   # on the link made afresh
    session.fw_link_dead(peer, "failed", ENDPOINT)
    assert isinstance(after.error, errors.CoreOffline) and "could not connect" in after.error.message, after.error
    assert not before.done() and peer.inflight == {1} and peer.fw_ended == {1}
    session.fw_link_dead(peer, "ended", ENDPOINT)              # a later link connected, then closed too
    assert peer.fw_ended == {1}

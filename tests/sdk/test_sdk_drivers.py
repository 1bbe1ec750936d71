"""One session, two drivers, by composition (issue 33, point 2), and the transport split into a
link factory and a discovery policy (point 4).

- The connect sequence lives in the sans-I/O ``Session``: driven here step by step, without a
  socket, as both drivers drive it (HELLO, READY, HB_DSP_BUSY then HELLO again, a refused key, a
  core that does not answer).
- The asyncio driver is no subclass of the blocking one; both hold a Session.
- The blocking client reads its links from one thread at a time: a waiting thread reads its own
  reply when no other reads, the background thread while none waits; and a reply that arrives
  while no thread waits completes its task at once (before: only when the background thread next
  took a look, up to a quarter heartbeat later).
- A transport is a link factory (open, release, lost, refused); where the servers are and how to
  wait for them is its ``discovery``; the loopback SoC keeps working as a user's testing aid.
"""
from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
import time

import pytest

from arm_side import CORE_0, CORE_1, Soc, opids
from arm_side import async_client, client, discovery, peer as peer_mod, session as session_mod, steps as steps_mod, transport
from arm_side.connect_wait import CoreWait, RelayWait
from arm_side.session import Session
from arm_side.steps import Act, Forget, Hello, HelloFw, Open, Pause, Refused, Release, Wait
from arm_side.task import Request
from protocol import errors

BUSY = errors.CoreBusy("256 HELLOs are being verified; send HELLO again later")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _fields(step) -> list:
    """A step's first two fields (None for a missing one)."""
    return ([getattr(step, f.name) for f in dataclasses.fields(step)] + [None, None])[:2]


def drive(steps, answer):
    """Carry out ``steps`` as a driver does, ``answer(kind, subject, arg)`` standing for the I/O
    (``kind``: the step's class, ``subject`` and ``arg``: its fields); the steps seen (kind,
    subject's name or msg_id)."""
    seen = []
    sent = None
    try:
        step = next(steps)
        while True:
            kind, (subject, arg) = type(step), _fields(step)
            seen.append((kind, getattr(subject, "name", None) or getattr(subject, "msg_id", None)))
            sent = answer(kind, subject, arg)
            step = steps.send(sent)
    except StopIteration:
        return seen


def test_the_session_connects_to_the_relay_by_steps_and_says_hello_again_after_busy():
    clock, sess = Clock(), Session("relay", owner=0x1234)
    hellos: list[Request] = []

    def answer(kind, subject, arg):
        if kind is Hello:
            hellos.append(Request(None, arg.msg_id))
            sess.pending[arg.msg_id] = hellos[-1]       # tracked, as a driver's send does
            return hellos[-1]
        if kind is Wait:
            clock.now += arg
            if len(hellos) == 1:
                subject._complete(None, BUSY)
            else:
                subject._complete({"cores": [{"name": "vdsp0", "state": "running"}], "heartbeat_ms": 500}, None)
        if kind is Pause:
            clock.now += arg
        return None
    seen = drive(sess.connect(discovery.Servers("relay", {"relay": "ipc:///nowhere/relay"}), 20.0, clock), answer)
    assert [k for k, _ in seen] == [Open, Hello, Refused, Wait, Pause, Hello, Refused, Wait, Forget, Act]
    assert sess.peers[0].connected and sess.core_states == {"vdsp0": "running"}
    assert not sess.pending                        # both HELLOs forgotten once answered


def test_a_refused_key_ends_the_connect_sequence_at_once():
    sess = Session("relay", owner=0x1234)

    def answer(kind, subject, arg):
        if kind is Hello:
            return Request(None, arg.msg_id)
        return "the server did not accept this client key" if kind is Refused else None
    with pytest.raises(errors.KeyRefused, match="did not accept"):
        drive(sess.connect(discovery.Servers("relay", {"relay": "tcp://10.0.0.1:1"}), 20.0, Clock()), answer)
    assert not sess.peers[0].alive


def test_direct_mode_marks_a_core_that_does_not_answer_unreachable_and_goes_on():
    clock, sess = Clock(), Session("direct", owner=0x1234)
    servers = discovery.Servers("direct", {"vdsp0": "ipc:///x/vdsp0.sock", "vdsp1": "ipc:///x/vdsp1.sock"})

    def answer(kind, subject, arg):
        if kind is Hello:
            return Request(None, arg.msg_id)
        if kind is Wait:
            clock.now += arg
            if subject.msg_id > 1:       # vdsp0's HELLOs are never answered; vdsp1's READY comes
                subject._complete({"state": "offline", "heartbeat_ms": 500}, None)
        return None
    seen = drive(sess.connect(servers, 2.0, clock), answer)
    assert (Release, "vdsp0") in seen and seen[-1] == (Act, "vdsp1")
    assert sess.core_states["vdsp0"] == "unreachable" and [p.alive for p in sess.peers] == [False, True]


def test_no_core_answering_is_core_offline():
    clock, sess = Clock(), Session("direct", owner=0x1234)

    def answer(kind, subject, arg):
        if kind is Wait:
            clock.now += arg
        return Request(None, arg.msg_id) if kind is Hello else None
    with pytest.raises(errors.CoreOffline, match="no DSP core answers"):
        drive(sess.connect(discovery.Servers("direct", {"vdsp0": "ipc:///x/0"}), 1.0, clock), answer)


def test_the_drivers_share_the_session_by_composition_not_inheritance():
    for name, cls in inspect.getmembers(async_client, inspect.isclass):
        if cls.__module__ == async_client.__name__:
            assert not issubclass(cls, client.Client), name
            assert not any(base.__module__ == client.__name__ for base in cls.__mro__), name
    for driver in (client.Client, async_client.AsyncClient):
        assert driver.__mro__ == (driver, object)
        assert "Session(" in inspect.getsource(driver.__init__)


def test_a_transport_is_a_link_factory_and_its_discovery_a_separate_policy(short_dir):
    public = {n for n, v in vars(transport.Transport).items() if not n.startswith("_") and callable(v)}
    assert public == {"open", "open_async", "release", "lost", "refused", "dead", "linked", "close"}
    zmq_transport = transport.ZmqTransport("direct", rt=short_dir, autostart_relay=False)
    try:
        policy = zmq_transport.discovery
        assert isinstance(policy, discovery.RuntimeDir) and policy.rt == short_dir and not policy.may_autostart
        assert zmq_transport.mode == "direct" and set(policy.servers()) == {"vdsp0", "vdsp1"}
        assert isinstance(policy.ready_wait("vdsp0", "ipc:///x", 1.0, 0.0), CoreWait)
        relay = discovery.RuntimeDir("relay", short_dir).ready_wait("relay", "tcp://127.0.0.1:1", 1.0, 0.0)
        assert isinstance(relay, RelayWait) and relay.local is None      # tcp: nothing local to start
    finally:
        zmq_transport.close()
    with pytest.raises(errors.InvalidArgument, match="relay or direct"):
        discovery.Servers("both", {})


def test_the_loopback_soc_still_serves_a_users_tests():
    from vdsp_sim.soc.loopback import LoopbackTransport
    for mode in ("relay", "direct"):
        loop = LoopbackTransport(mode)
        try:
            assert loop.mode == mode and isinstance(loop.discovery, discovery.Servers)
            with Soc(transport=loop) as soc:
                buf = soc.mem.alloc(64)
                assert soc.rpc(opids.FILL, outputs=[buf], params={"value": 3}, core=CORE_1).wait(5000) == {"bytes": 64}
                assert (buf.array() == 3).all()

                async def main():
                    return await asyncio.wrap_future(_done(soc.rpc(opids.PING, core=CORE_0)))
                assert asyncio.run(main()) == {"core": "vdsp0"}
        finally:
            loop.close()


def _done(task):
    """A concurrent future resolved by the task's done-callback (fired by the reader)."""
    import concurrent.futures
    fut: concurrent.futures.Future = concurrent.futures.Future()
    task.add_done_callback(lambda t: fut.set_result(t.values) if t.error is None else fut.set_exception(t.error))
    return fut


# --- live: the blocking client's one reader ---------------------------------------------------------

@pytest.mark.live
def test_the_blocking_client_reads_by_turns_a_waiting_thread_its_own_reply(shared_soc, monkeypatch):
    """One thread at a time reads the links (``arm_side.reading``): a thread that waits while no
    other reads reads its own reply (before: the background thread read every reply and woke the
    waiter, a second thread woken per task); several waiters take turns; a reply nobody waits for
    still fires its callback at once."""
    from arm_side.channel import Channel
    readers: set[str] = set()
    outside: list[str] = []             # threads that read a link without holding the turn
    drain = Channel.drain
    with Soc() as soc:
        reading = soc.client.reading

        def spy_drain(self):
            me = threading.current_thread()
            if reading.reader != me.ident or not reading.turn.locked():
                outside.append(me.name)
            readers.add(me.name)
            return drain(self)
        monkeypatch.setattr(Channel, "drain", spy_drain)

        def work():
            for _ in range(40):
                soc.rpc(opids.PING).wait(10000)
        solo = threading.Thread(target=work, name="solo")
        solo.start()
        solo.join()
        assert "solo" in readers, readers
        threads = [threading.Thread(target=work, name=f"waiter{i}") for i in range(3)]
        for t in threads:
            t.start()
        fired = _done(soc.rpc(opids.SLEEP, params={"ms": 5}, core=CORE_1))    # nobody waits for it
        for t in threads:
            t.join()
        assert fired.result(timeout=10) == {"slept_ms": 5.0}
        assert outside == []                # every read by the one thread that holds the turn


@pytest.mark.live
@pytest.mark.parametrize("mode", ["relay", "direct"])
def test_the_blocking_clients_session_is_changed_by_its_one_owner_only(shared_soc, mode, monkeypatch):
    """Callers' threads submit while a thread reads: each call that changes the session (track,
    route, a reply, the clock, a release) happens under ``Links.owned``, one owner at a time
    (before: none; the order of a caller's ``track`` and the reader's ``receive`` rested on
    argument)."""
    from arm_side.session import Session
    outside: list[str] = []
    watched: dict[int, object] = {}
    for name in ("track", "unsent", "task_frames", "task_link", "receive", "tick", "cancelled", "fail_all",
                 "cancel_link"):
        def spy(self, *args, _orig=getattr(Session, name), _name=name, **kwargs):
            owner = watched.get(id(self))
            if owner is not None and not owner._is_owned():
                outside.append(_name)
            return _orig(self, *args, **kwargs)
        monkeypatch.setattr(Session, name, spy)
    with Soc(mode=mode) as soc:
        watched[id(soc.client.session)] = soc.client.links.owned

        def work():
            for _ in range(20):
                soc.rpc(opids.PING, core=CORE_0).wait(10000)
        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        fired = _done(soc.rpc(opids.SLEEP, params={"ms": 5}, core=CORE_1))
        slow = soc.rpc(opids.SLEEP, params={"ms": 300}, core=CORE_1)
        slow.release()
        for t in threads:
            t.join()
        assert fired.result(timeout=10) == {"slept_ms": 5.0}
    assert not outside, sorted(set(outside))


@pytest.mark.live
@pytest.mark.parametrize("mode", ["relay", "direct"])
def test_a_reply_no_thread_waits_for_completes_its_task_at_once(shared_soc, mode, monkeypatch):
    """Nobody waits and no callback asks: the task is done as soon as its reply is in (before, only
    when the background thread next looked, a quarter heartbeat later: with the heartbeat made
    10 minutes here, 150 s)."""
    from arm_side import reading
    monkeypatch.setattr(reading, "HEARTBEAT_INTERVAL_MS", 600_000)
    with Soc(mode=mode) as soc:
        assert soc.rpc(opids.PING, core=CORE_0).wait(10000) == {"core": "vdsp0"}
        task = soc.rpc(opids.SLEEP, params={"ms": 5}, core=CORE_0)
        deadline = time.monotonic() + 10
        while not task.done() and time.monotonic() < deadline:
            time.sleep(0.002)
        assert task.done() and task.values == {"slept_ms": 5.0}


@pytest.mark.live
def test_a_done_callback_that_waits_is_told_why_it_cannot(shared_soc):
    with Soc() as soc:
        seen: list = []

        def callback(task):
            try:
                soc.rpc(opids.PING).wait(1000)
            except errors.ApiUseError as exc:
                seen.append(exc.message)
        # a task whose reply cannot come before its callback is added (one added to a task already
        # done runs at once in the caller's thread, which reads nothing and may wait); it ends while
        # this thread waits for the next, so the reply is read, and the callback run, by this thread
        soc.rpc(opids.SLEEP, params={"ms": 300}).add_done_callback(callback)
        assert soc.rpc(opids.SLEEP, params={"ms": 900}).wait(10000) == {"slept_ms": 900.0}
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen and "reader thread" in seen[0]


def test_session_module_does_no_io():
    """Nor do its vocabulary (the steps and actions) and its peers' state."""
    for module in (session_mod, steps_mod, peer_mod):
        source = inspect.getsource(module)
        for word in ("import zmq", "import asyncio", "import threading", "import socket", "time.sleep", "open("):
            assert word not in source, (module.__name__, word)


def _reply_error(msg_id: int, exc: errors.VdspError) -> list:
    from protocol import messages, wire
    return wire.encode(messages.error(msg_id, exc))


def test_a_server_that_forgot_our_hello_is_a_lost_relay_not_a_foreign_handle():
    """A relay that answered READY, then says this connection has no verified owner, is a new
    relay our link reached on its own (CI: relay killed under load): every request fails
    RelayUnavailable and the relay is to be connected again. A ForeignHandle of another kind
    (memory not granted) is the caller's own error and changes nothing."""
    sess = Session("relay", owner=0x1234)
    drive(sess.connect(discovery.Servers("relay", {"relay": "ipc:///x/relay"}), 20.0, Clock()),
          lambda kind, subject, arg: (Request(None, arg.msg_id) if kind is Hello else
                                      subject._complete({"cores": [], "heartbeat_ms": 500}, None) if kind is Wait
                                      else None))
    relay = sess.peers[0]
    granted, lost, other = (Request(None, i) for i in (100, 101, 102))
    for req in (granted, lost, other):
        sess.track(req)
    sess.receive(relay, _reply_error(100, errors.ForeignHandle("memory of owner 0x000002 is not granted")), 1.0)
    assert isinstance(granted.error, errors.ForeignHandle) and relay.alive
    unbound = errors.ForeignHandle("this connection has no verified DDR owner", unbound=True)
    assert sess.receive(relay, _reply_error(101, unbound), 1.0) == []
    assert not relay.alive and not sess.pending
    assert isinstance(lost.error, errors.RelayUnavailable) and "HELLO" in lost.error.message
    assert isinstance(other.error, errors.RelayUnavailable)


def _direct_session():
    """A direct-mode session connected to vdsp0, whose firmware runs: (session, vdsp0's peer)."""
    sess = Session("direct", owner=0x1234)
    servers = discovery.Servers("direct", {"vdsp0": "ipc:///x/vdsp0.sock"})
    drive(sess.connect(servers, 2.0, Clock()),
          lambda kind, subject, arg: (Request(None, arg.msg_id) if kind is Hello else
                                      subject._complete({"state": "running", "fw_endpoint": "ipc:///x/fw0",
                                                         "heartbeat_ms": 500}, None) if kind is Wait else None))
    return sess, sess.peers[0]


def test_a_firmware_that_forgot_our_hello_is_greeted_again():
    sess, core = _direct_session()
    unbound = errors.ForeignHandle("this connection has no verified DDR owner", unbound=True)
    hello = Request(None, 49)
    sess.fw_hello_sent(core, hello)          # not answered yet: the firmware has verified nothing
    early = Request(None, 48)
    sess.track(early)
    assert sess.receive(core, _reply_error(48, unbound), 1.0) == []
    assert isinstance(early.error, errors.ForeignHandle)
    hello._complete({"name": "vdsp0"}, None)    # READY: bound from now on
    task = Request(None, 50)
    sess.track(task)
    assert sess.receive(core, _reply_error(50, unbound), 1.0) == [HelloFw(core)]
    assert isinstance(task.error, errors.CoreBusy) and "send the task again" in task.error.message and core.alive


def test_a_task_right_behind_a_hello_answered_busy_is_busy_not_a_foreign_handle():
    """Direct mode sends tasks right behind the firmware's HELLO. A HELLO answered HB_DSP_BUSY
    (the firmware verifies many claims) binds nothing, so a task behind it with buffers is refused
    as unbound (PROTOCOL.md §5.4): it did not run, and the caller is told to send it again, not
    that its memory is foreign. The clock, not this reply, says the HELLO again."""
    sess, core = _direct_session()
    hello = Request(None, 49)
    sess.fw_hello_sent(core, hello)
    task = Request(None, 50)
    sess.track(task)
    hello._complete(None, errors.CoreBusy("8 HELLO claims of this peer are being verified"))
    unbound = errors.ForeignHandle("this connection has no verified DDR owner", unbound=True)
    assert sess.receive(core, _reply_error(50, unbound), 1.0) == []
    assert isinstance(task.error, errors.CoreBusy) and "send the task again" in task.error.message, task.error
    assert core.alive


def test_a_firmware_that_refused_our_hello_says_foreign_handle_as_before():
    """The claim of another owner is refused at the firmware (tests/integration/test_live_ownership.py, which
    failed under QEMU's slow CPU: the task went before the refusal came back): the refusal
    comes first on that link, and the task's ForeignHandle stays the caller's error."""
    sess, core = _direct_session()
    hello = Request(None, 49)
    sess.fw_hello_sent(core, hello)
    hello._complete(None, errors.ClaimRefused("process 1 does not hold owner 0x001234's lock"))
    task = Request(None, 50)
    sess.track(task)
    unbound = errors.ForeignHandle("this connection has no verified DDR owner", unbound=True)
    assert sess.receive(core, _reply_error(50, unbound), 1.0) == []
    assert isinstance(task.error, errors.ForeignHandle) and task.error.unbound


@pytest.mark.parametrize("when", ["chosen", "tracked"])
def test_a_task_sent_as_its_relay_is_declared_dead_fails_instead_of_being_lost(when):
    """The reader may declare the relay dead (and fail every request in flight) between the moment
    a caller chose the relay's link and the moment it tracks its task: that task was then sent on
    the dead link, tracked after the failing, and never answered (a loadtest with the relay
    killed under load counted it lost). Now the caller finds the relay dead and raises
    (``chosen``: the way through ``relay()``, which may connect again); a task whose link was
    chosen and tracked in one step (the blocking driver's, ``Links.straight``) is failed with the
    others when the relay is declared dead before it is sent (``tracked``)."""
    from vdsp_sim.soc.loopback import LoopbackTransport
    loop = LoopbackTransport("relay")
    try:
        with Soc(transport=loop) as soc:
            cl = soc.client
            links = cl.links
            choose = links.link
            link = links["relay"]
            send = link.send

            def chosen_then_dead(key):
                chosen = choose(key)
                cl.session.peer_dead(cl.session.peers[0], "killed in this test")   # what the reader does
                return chosen

            def dead_then_sent(frames):
                if cl.session.peers[0].alive:
                    cl.session.peer_dead(cl.session.peers[0], "killed in this test")
                return send(frames)
            if when == "chosen":
                links.straight = False
                links.link = chosen_then_dead
            else:
                link.send = dead_then_sent
            try:
                with pytest.raises(errors.RelayUnavailable):
                    soc.rpc(opids.PING, core=CORE_0).wait(2000)
            finally:
                links.link, links.straight = choose, True
                link.send = send
            assert not cl.session.pending
    finally:
        loop.close()


class _Links:
    """What ``Reading`` reads: one link, what it dispatches (and in which thread)."""

    def __init__(self, link) -> None:
        from arm_side import tracing
        self.version, self.by_key, self.owned = 0, {"relay": link}, threading.RLock()
        self.dispatched: list = []
        self.client = type("Client", (), {"tracer": tracing.sdk_tracer()})()

    def dispatch(self, link, incoming, now=None) -> None:   # as Links.dispatch: heard at now
        self.dispatched.append((threading.current_thread().name, incoming))

    def tick(self, now) -> None:
        pass


class _Link:
    closed = False

    def __init__(self) -> None:
        import os
        self.fd = os.eventfd(0, os.EFD_NONBLOCK)
        self.peer = peer_mod.PeerState("relay", 0.0)
        self.waiting: list = []

    def drain(self) -> list:
        out, self.waiting = self.waiting, []
        return out


@pytest.mark.parametrize("mode", ["relay", "direct"])
@pytest.mark.parametrize("loop", ["as built", "python"])
def test_a_waiting_thread_reads_its_reply_and_a_rounds_error_does_not_end_its_wait(loop, mode, monkeypatch, caplog):
    """The waiting thread's loop (``Reading._lead``; with the compiled build ``arm_side/taskpath.c``
    reads the links, "as built" here; "python": the loop as written in reading.py): woken by its
    link's fd it completes its request from the RESULT that came (its body, header and raw
    frames; in direct mode it is no longer counted in flight on its core), and an Exception in a
    round (here the session's receive, on a message it chokes on) is logged and the wait goes on
    to the reply that comes next."""
    import os
    from arm_side import reading as reading_mod
    from protocol import header, wire
    from protocol.constants import Command
    if loop == "python":
        monkeypatch.setattr(reading_mod, "_C", None)
    link = _Link()
    links = _Links(link)
    session = Session(mode, 0x3FFFFF)
    links.session, links.carry_out = session, lambda actions: None
    if mode == "direct":
        session.peers.append(link.peer)
        link.peer.inflight.add(7)
    receive, choked = session.receive, []

    def choking(peer, frames, now):
        if frames == [b"choke"]:
            choked.append(frames)
            raise RuntimeError("a bug in receive")
        return receive(peer, frames, now)
    session.receive = choking           # type: ignore[method-assign]
    reading = reading_mod.Reading(links, lambda: False)
    req = Request(None, 7)
    session.pending[7] = req
    waited = threading.Thread(target=reading.wait, args=(req, 10.0), name="waiter")
    try:
        with caplog.at_level("ERROR", logger="vdsp.sdk"):
            waited.start()
            time.sleep(0.1)
            link.waiting = [[b"choke"]]
            os.eventfd_write(link.fd, 1)
            time.sleep(0.1)
            link.waiting = [[header.pack(int(Command.RESULT), 7), wire.pack_body({"ok": 1}), b"raw"]]
            os.eventfd_write(link.fd, 1)
            waited.join(10)
        assert not waited.is_alive() and req.done()
        assert req.body == {"ok": 1} and req.error is None and req.raw == [b"raw"], (req.body, req.raw)
        assert req.header[0] is Command.RESULT and req.header[4] == 7 and 7 not in session.pending
        assert 7 not in link.peer.inflight
        assert choked == [[b"choke"]]
        assert (reading._lane_made is not None) == (loop == "as built" and reading_mod._C is not None)   # C read it
        errors_logged = [r for r in caplog.records if r.getMessage() == "SDK reader error"]
        assert len(errors_logged) == 1 and "a bug in receive" in str(errors_logged[0].exc_info[1])
        assert reading.reader == 0 and reading.turn.acquire(blocking=False)     # the turn given up
        reading.turn.release()
    finally:
        reading.close()
        os.close(link.fd)


def test_a_send_that_took_in_a_replys_signal_reads_it_itself_when_no_thread_reads(monkeypatch):
    """``Channel.send`` says a message waits that the reader, asleep on the link's fd, would miss
    (the send took in its signal). While no thread holds the turn the sending thread reads it
    itself (before: it kicked the background thread awake, which in a pipelined loop was a thread
    switch and a GIL hand-over for ~40 % of the tasks); while a thread reads, that one is kicked."""
    import os
    from arm_side import reading as reading_mod
    monkeypatch.setattr(reading_mod, "_C", None)    # who reads is the turn's (Python in both builds);
    link = _Link()                                  # what is read is seen through the fake's dispatch
    links = _Links(link)
    reading = reading_mod.Reading(links, lambda: False)
    try:
        link.waiting = [[b"reply 1"]]
        reading.missed()
        assert links.dispatched == [(threading.current_thread().name, [[b"reply 1"]])]
        assert reading.reader == 0 and reading.turn.acquire(blocking=False)     # given up again
        link.waiting = [[b"reply 2"]]
        reading.missed()            # the turn is held (here, as by a thread that reads): kicked instead
        assert links.dispatched[1:] == [] and link.waiting == [[b"reply 2"]]
        assert os.eventfd_read(reading.kick_lead) == 1 and os.eventfd_read(reading.kick_idle) == 1
        reading.turn.release()
    finally:
        reading.close()
        os.close(link.fd)

"""The links of one SoC connection, and what both SDK drivers do alike with them.

A connection's links are keyed as the session routes (``arm_side.session``): ``relay`` in relay
mode; in direct mode each core's control link by the core's name and its firmware's as
``<core>.fw``. :class:`Links` sends a request on the link the session chose, feeds the session
what a link brought and the clock's ticks, carries out the session's actions (heartbeats, a
firmware link to open or close) and the steps of its connect sequence (:meth:`Links.run`: one
step runner, the waits left to each driver). The blocking client (``arm_side.client``) and the
asyncio one (``arm_side.async_client``) each hold one, with their own way to open and release a link
(the asyncio driver starts a reader coroutine per link) and to reach the relay (connected again
after it died: by blocking, or by keeping what is sent meanwhile).

One owner: the session, the link table and the requests' completion change only under ``owned``,
held by one thread at a time: the blocking driver's is a reentrant lock (its callers' threads
submit while a thread reads: ``arm_side.reading``), the asyncio driver's is a no-op (everything
runs on its event loop's thread, the one owner). Every method here takes it where it touches the
session; nothing waits under it (a wait needs the thread that reads to take it), so a connect
sequence (:meth:`Links.run`) holds it for each step and lets go of it for the driver's waits.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, ContextManager, Generator, NoReturn, assert_never

from protocol import errors, wire
from protocol.task_options import DEFAULT, TaskOptions
from arm_side.session import PeerState, Session, fw_key
from arm_side.steps import (Act, Action, CloseFw, Dead, Forget, Hello, HelloFw, Linked, Open, OpenFw, Pause, Refused,
                            Release, Send, Step, Steps, Wait, Waiting)
from arm_side.task import Request, Task
from vdsp_board.processes.procfacts import ProcFacts


class Links:
    """``client``: the driver (what its Requests wait through); ``opener(endpoint, name, watch)`` /
    ``releaser(link)``: the driver's link life; ``relay()``: the relay's link to send on;
    ``wake()``: the blocking reader must look again (the links changed); ``missed(link)``: a send
    on ``link`` found a message the reader sleeps past (default: ``wake()``); ``owned``: the session's owner
    (module docstring; default: none needed, one thread); ``straight``: a TASK goes straight to the
    open link of a live peer, tracked in the step that chose it (the blocking driver: ``relay()``
    would give that link; the asyncio one keeps what is sent while its relay is connected again,
    to send in order after the new HELLO)."""

    def __init__(self, client: Any, session: Session, transport: Any, discovery: Any,
                 opener: Callable[[str, str, bool, str], Any], releaser: Callable[[Any], None],
                 relay: Callable[[], Any], wake: Callable[[], None] | None = None,
                 owned: ContextManager[Any] | None = None, missed: Callable[[Any], None] | None = None,
                 straight: bool = False) -> None:
        self.client, self.session, self.transport, self.discovery = client, session, transport, discovery
        self._opener, self._releaser, self._relay, self._wake = opener, releaser, relay, wake
        self._missed = missed if missed is not None else None if wake is None else lambda link: wake()
        self.straight = straight
        self.owned: ContextManager[Any] = owned if owned is not None else contextlib.nullcontext()
        self.by_key: dict[str, Any] = {}
        self.version = 0        # changes when a link opens or is released
        self._facts = ProcFacts()    # what the kernel says of a local server's process (liveness)

    def get(self, key: str) -> Any:
        return self.by_key.get(key)

    def __getitem__(self, key: str) -> Any:
        return self.by_key[key]

    def values(self) -> list:
        return list(self.by_key.values())

    def __len__(self) -> int:
        return len(self.by_key)

    # --- a link's life --------------------------------------------------------------------
    def open(self, key: str, endpoint: str, peer: PeerState, watch: bool = False, server_key: str = "") -> Any:
        """A link to ``endpoint`` for ``peer``, as ``key`` (one open there before is released);
        ``server_key``: the server's own CURVE key on tcp (a firmware's, as its core announced it)."""
        self.release(key)
        link = self._opener(endpoint, key, watch, server_key)
        link.peer = peer
        self.by_key[key] = link
        self.version += 1
        if self._wake is not None:
            self._wake()            # the reader sleeps on its fd from now on
        return link

    def release(self, key: str) -> None:
        link = self.by_key.pop(key, None)
        if link is not None:
            self.version += 1
            self._releaser(link)
            if self._wake is not None:
                self._wake()        # the reader stops sleeping on its fd

    def release_peer(self, peer: PeerState) -> None:
        self.release(peer.name)
        self.release(fw_key(peer.name))

    def release_all(self) -> None:
        for key in list(self.by_key):
            self.release(key)

    # --- sending --------------------------------------------------------------------------
    def send(self, link: Any, frames: list, req: Request, live: bool = False) -> None:
        """Track ``req`` and send its ``frames`` on ``link``. Raises RelayUnavailable if the
        transport cannot send (the request is then not in flight). ``live``: first make sure the
        link's peer was not declared dead since the caller chose the link (declaring it dead fails
        every request tracked by then; one tracked after would go out on a dead link, never
        answered): RelayUnavailable / CoreOffline then. Tracking and check are one step of the
        session's owner, and so wholly before or after a declaration."""
        msg_id = req.msg_id
        with self.owned:
            self.session.track(req)
            peer = link.peer
            if live and peer is not None and not peer.alive:
                self.session.unsent(msg_id)
                if peer.name == "relay":
                    raise errors.RelayUnavailable(f"the relay's connection closed as task {msg_id} was sent; send "
                                                  "it again")
                raise errors.CoreOffline(f"{peer.name} was declared dead as task {msg_id} was sent")
        self._send_tracked(link, frames, msg_id)

    def _send_tracked(self, link: Any, frames: list, msg_id: int) -> None:
        """Send ``frames`` of the tracked request ``msg_id`` on ``link``; not in flight if that
        raises (RelayUnavailable, or the transport's VdspError)."""
        try:
            missed = link.send(frames)
        except Exception as exc:
            self._send_failed(link, msg_id, exc)
        if missed and self._missed is not None:
            self._missed(link)

    def _send_failed(self, link: Any, msg_id: int, exc: Exception) -> NoReturn:
        """The tracked request ``msg_id`` was not sent: ``link.send`` raised ``exc`` (the compiled
        submit, which sends on a Channel's socket itself, hands it what Channel.send would have
        raised). Not in flight now; raises ``exc`` if a VdspError, else RelayUnavailable (the
        transport's own failure: a ZMQError)."""
        self._unsent(msg_id, link)
        if isinstance(exc, errors.VdspError):
            raise exc
        raise errors.RelayUnavailable(f"cannot send to {link.name}: {exc}") from exc

    def _unsent(self, msg_id: int, link: Any) -> None:
        with self.owned:
            self.session.unsent(msg_id)
            self._gone(link)

    def _gone(self, link: Any) -> None:
        """A send found ``link`` taking no messages. The relay's link whose connection closed (an
        ipc link is not connected again: ``Transport.dead``) means the relay is lost now, as the
        reader finds at its next tick: so the next request connects again, not onto this link.
        Not while its READY is awaited (``connected`` false, as the tick's own check): the connect
        sequence makes the next link itself (``Session._ready``), for the same peer, whose links
        are read only while it is alive: declared dead there, the relay's READY on that next
        link was never read, and the connect waited out its timeout."""
        peer = getattr(link, "peer", None)
        if (peer is not None and peer.name == "relay" and peer.alive and peer.connected
                and self.transport.dead(link)):
            self.carry_out(self.session.peer_dead(peer, "its connection closed"))

    def request(self, link: Any, msg: wire.Message) -> Request:
        req = Request(self.client, msg.msg_id)
        self.send(link, wire.encode(msg), req)
        return req

    def link(self, key: str) -> Any:
        """The link of ``key`` to send on (the relay's: ``relay()``). Raises CoreOffline if a
        firmware link is not open yet."""
        if key == "relay":
            return self._relay()
        link = self.by_key.get(key)
        if link is None:    # the reader is opening it this very moment (the core just came up)
            raise errors.CoreOffline(f"{key.removesuffix('.fw')}: its firmware link is not open yet; try again")
        return link

    def submit(self, op: int, inputs: list, outputs: list, params: dict, options: TaskOptions = DEFAULT, *,
               out_mems: list | None = None, raw: list | None = None) -> Task:
        """Send a TASK. Raises InvalidArgument / InvalidCore / TaskNumExceedLimit / CoreOffline /
        RelayUnavailable."""
        # (the blocking client's compiled build runs this in arm_side/taskpath.c, submit, with the
        # Task made as Task.__init__ makes it: a change here is made there too; tests/tools/test_native.py
        # compares both on a SoC)
        session = self.session
        with self.owned:
            msg_id, frames = session.task_frames(op, inputs, outputs, params, options, raw=raw)
            if session.mode == "relay":     # task_link's own answer there, without its call
                key, core = "relay", ""
            else:
                key, core = session.task_link(msg_id, options, bool(inputs or outputs))
            task = Task(self.client, msg_id, op, out_mems or [], core, options=options)
            # the link is open and its peer alive: tracked now, in the same step (as ``send``
            # with ``live`` does: wholly before or after a declaration of death)
            link = self.by_key.get(key) if self.straight else None
            peer = link.peer if link is not None else None
            ready = peer is not None and peer._alive       # PeerState.alive, without the property's call
            if ready:
                session.pending[msg_id] = task      # session.track(task), without its call
        rec = self.client.tracer.rec        # tracer.submit_task's own test, without its call
        if rec.poll():
            self.client.tracer.submit_task(msg_id, op, options, inputs, outputs)
        if ready:
            self._send_tracked(link, frames, msg_id)
            return task
        return self._send_later(key, frames, task)

    def _send_later(self, key: str, frames: list, task: Task) -> Task:
        """Submit's end where the link of ``key`` was not open with its peer alive when the task
        was made (``task`` not tracked yet): the link found (or connected again), then tracked
        and sent."""
        try:
            link = self.link(key)       # not owned: the relay's may be connected again (it waits)
        except BaseException:
            with self.owned:
                self.session.unsent(task.msg_id)
            raise
        self.send(link, frames, task, live=True)
        return task

    # --- the connect sequence: one step runner for both drivers ---------------------------
    def run(self, steps: Steps) -> Generator[Waiting, None, None]:
        """Carry out a connect sequence of the session (``Session.connect``) but its waits: each
        :class:`Wait` and :class:`Pause` is yielded to the driver, which performs it its own way
        (blocking, or awaiting) and resumes this, or throws in what the wait raised. What each
        step gave goes back to the session; what it raised is thrown into the session. The
        session is owned while it runs and a step is carried out, not during a wait."""
        sent: Any = None
        failed: BaseException | None = None
        while True:
            try:
                with self.owned:
                    step = steps.throw(failed) if failed is not None else steps.send(sent)
            except StopIteration:
                return
            sent, failed = None, None
            try:
                match step:
                    case Wait() | Pause():
                        yield step          # the driver's: what its wait raises is thrown in here
                    case _:
                        with self.owned:
                            sent = self.step(step)
            except GeneratorExit:           # the driver dropped the sequence: so does the session
                with self.owned:
                    steps.close()
                raise
            except BaseException as exc:
                failed = exc

    def step(self, step: Step) -> Any:
        """Carry out a step of ``Session.connect`` other than Wait and Pause (the driver's);
        returns what the session is told."""
        match step:
            case Hello(peer, msg):
                return self.request(self.by_key[peer.name], msg)
            case Refused(peer):
                return self.transport.refused(self.by_key[peer.name])
            case Dead(peer):
                return self.transport.dead(self.by_key[peer.name])
            case Linked(peer):
                return self.transport.linked(self.by_key[peer.name])
            case Open(peer, endpoint):
                self.open(peer.name, endpoint, peer, watch=True)     # watched: a server that exits is known at once
            case Release(peer):
                self.release_peer(peer)
            case Forget(peer):
                self.transport.lost(self.by_key[peer.name])
            case Act(_, actions):
                self.carry_out(actions)
            case Wait() | Pause():
                raise ValueError(f"{step!r} is the driver's to perform (Links.run yields it)")
            case _:
                assert_never(step)
        return None

    # --- what arrives, the clock ----------------------------------------------------------
    def dispatch(self, link: Any, incoming: list, now: float | None = None) -> None:
        """What ``link`` brought (heard at ``now``, default: now), to the session (owned: its
        requests complete here, their done-callbacks run here)."""
        receive, peer = self.session.receive, link.peer
        if now is None:
            now = time.monotonic()
        with self.owned:
            for frames in incoming:
                actions = receive(peer, frames, now)
                if actions:
                    self.carry_out(actions)

    def tick(self, now: float) -> None:
        with self.owned:
            self._tick(now)

    def _tick(self, now: float) -> None:
        session = self.session
        direct = session.mode == "direct"

        def closed(peer: PeerState) -> bool:
            link = self.by_key.get(peer.name)
            return link is not None and not (direct and _tcp(link)) and self.transport.lost(link)
        actions = self._tcp_closes() if direct else []
        actions += session.tick(now, closed, self._fact)
        if actions:
            self.carry_out(actions)
        self._firmware_links_again()

    def _firmware_links_again(self) -> None:
        """Direct mode: a firmware link that will carry nothing more (``Transport.dead``) is
        replaced as the session says (``Session.fw_link_dead``)."""
        for peer in self.session.peers:
            link = self.by_key.get(fw_key(peer.name))
            if link is None:
                continue
            dead = self.transport.dead(link)
            if dead:
                self.carry_out(self.session.fw_link_dead(peer, dead, link.endpoint))

    def _tcp_closes(self) -> list:
        """Direct mode: the session's actions for tcp links whose connection closed after its
        handshake had succeeded (``arm_side.channel.Watch``): no sign over tcp that a core died."""
        actions: list = []
        for peer in self.session.peers:
            if not peer.alive:
                continue
            fw, ctl = self.by_key.get(fw_key(peer.name)), self.by_key.get(peer.name)
            if fw is not None and _tcp(fw) and self.transport.lost(fw):
                actions += self.session.fw_closed(peer)
            if ctl is not None and _tcp(ctl) and self.transport.lost(ctl):
                actions += self.session.control_closed(peer)
        return actions

    def _fact(self, peer: PeerState):
        """What the kernel says of ``peer``'s process, when it runs on this host (an ipc link)."""
        link = self.by_key.get(peer.name)
        local = link is not None and str(getattr(link, "endpoint", "")).startswith("ipc://")
        return self._facts.fact(peer.pid if local else None, time.monotonic())

    def carry_out(self, actions: list[Action]) -> None:
        """Do what the session asked: send, open or close a firmware link (direct mode)."""
        session = self.session
        for action in actions:
            match action:
                case Send(peer, frames):
                    link = self.by_key.get(peer.name)
                    if link is not None:
                        try:
                            if link.send(frames) and self._missed is not None:
                                self._missed(link)
                        except Exception:      # a heartbeat that cannot go: liveness will tell
                            pass
                case CloseFw(peer):
                    self.release(fw_key(peer.name))
                case OpenFw(peer, announced):
                    endpoint = self.discovery.firmware_endpoint(announced, self.by_key[peer.name].endpoint)
                    link = self.open(fw_key(peer.name), endpoint, peer, watch=endpoint.startswith("tcp://"),
                                     server_key=peer.info.get("fw_server_key", ""))
                    session.fw_hello_sent(peer, self.request(link, session.hello()))
                case HelloFw(peer):      # the firmware answered our HELLO HB_DSP_BUSY, or forgot it: again
                    link = self.by_key.get(fw_key(peer.name))
                    if link is not None:
                        session.fw_hello_sent(peer, self.request(link, session.hello()))
                case _:
                    assert_never(action)


def resume(runner: Generator[Waiting, None, None], failed: BaseException | None = None) -> Waiting | None:
    """Resume the step runner (:meth:`Links.run`) after a driver's wait, throwing in what the wait
    raised (``failed``): its next wait, or None once the connect sequence ended."""
    try:
        return runner.throw(failed) if failed is not None else next(runner)
    except StopIteration:
        return None


def _tcp(link: Any) -> bool:
    return str(getattr(link, "endpoint", "")).startswith("tcp://")

"""The SDK's side of the conversation, without sockets, threads or a clock of its own.

Like h11's ``Connection``: :class:`Session` knows the requests in flight (msg_id → Request),
the servers it talks to (the relay, or each core's control link and firmware link in direct
mode), their liveness and the cores' states, and how a reply becomes a result or one of the
exception tree's errors. Two drivers carry it out, each holding a session (composition, not a
class hierarchy): the blocking client (``arm_side.client``: threads that read by turns) and the
asyncio one (``arm_side.async_client``: coroutines of the event loop).

Invariant: a session has one owner at a time, and only its owner calls it or completes its
requests: the holder of the driver's ``Links.owned`` (``arm_side.links``: the blocking driver's
lock, taken by the thread that submits as by the one that reads; the asyncio driver's event
loop thread). Its requests' done-callbacks run in its owner's hands. A transport (``arm_side.transport``)
owns the sockets. The drivers feed the session what arrives and carry out what it returns:

- :meth:`connect` (opening) → the connect sequence as steps (``arm_side.steps``): open a
  link, say HELLO, wait for its READY so long, pause after HB_DSP_BUSY...; the driver sends
  back what each step gave;
- :meth:`task_link` / :meth:`request_link` / :meth:`cancel_link` → which link (by key: ``relay``,
  a core's name, ``<core>.fw``) a request goes on;
- :meth:`receive` (a message from a peer) → actions (``arm_side.steps``) ``OpenFw`` and
  ``CloseFw`` (direct mode: a core's firmware came up or went away);
- :meth:`tick` (the clock) → ``Send`` heartbeats; peers that fell silent, or whose connection
  closed, are declared dead and their requests fail; ``HelloFw`` (direct mode): say HELLO again
  to a firmware that answered the last one HB_DSP_BUSY.
"""
from __future__ import annotations

import functools
import itertools
import logging
import os
from typing import Any, Callable, Generator

from protocol import errors, header, messages, wire
from protocol.cancel import CancelOutcome
from protocol.constants import MAX_TASKS_PER_CLIENT, Command, Core
from protocol.core_state import CoreState, error_for
from protocol.liveness import ProcFact
from protocol.task_options import TaskOptions
from arm_side.busy_retry import BusyRetry
from arm_side.connect_wait import Tries
from arm_side.peer import PeerState
from arm_side.steps import (Act, Action, CloseFw, Dead, Forget, Hello, HelloFw, Linked, Open, OpenFw, Pause, Refused,
                            Release, Send, Step, Steps, Wait)

log = logging.getLogger("vdsp.sdk")
_TASK = int(Command.TASK)   # a plain int: struct packs it without an IntEnum's __index__ call
_ANY = int(Core.ANY)
# the commands a reply is told by, as module names: an enum member's lookup on its class costs
# ~0.2 µs a time (``Command.RESULT``), and receive() is every task's path
_ERROR, _EVENT, _HEARTBEAT = Command.ERROR, Command.EVENT, Command.HEARTBEAT
# what a connect's wait (``arm_side.connect_wait``) raises when it gives up on the server's READY
_WAIT_ENDED: tuple[type[errors.VdspError], ...] = (errors.RelayUnavailable, errors.CoreOffline, errors.TaskTimeout)
REFUSAL_GRACE_S = 1.0   # a HELLO that could not be sent: how long the link's monitor may take to tell a refusal


def _where(discovery, name: str) -> str:
    """Where server ``name`` is now, as ``discovery`` finds it (a runtime dir's checks its
    sockets' directory again: ``vdsp_board.processes.rundir``)."""
    return discovery.servers()[name]


def fw_key(name: str) -> str:
    """The key of a core's firmware link (direct mode); its control link's is its name."""
    return f"{name}.fw"


class Session:
    """``mode``: ``relay`` (one peer, the relay) or ``direct`` (one peer per core)."""

    def __init__(self, mode: str, owner: int, lock_fd: int | None = None) -> None:
        """``lock_fd``: our fd holding ``owner``'s lock, named in HELLO so the check reads one file."""
        if mode not in ("relay", "direct"):
            raise errors.InvalidArgument(f"VDSP_RPC_MODE must be relay or direct, got {mode!r}")
        self.mode, self.owner, self.lock_fd = mode, owner, lock_fd
        self.ids = itertools.count(1)
        self.pending: dict[int, Any] = {}      # msg id -> Request
        self.peers: list[PeerState] = []
        self.core_states: dict[str, str] = {}
        self.event_callbacks: list[Callable[[dict], None]] = []

    # --- what we send ---------------------------------------------------------------------
    def hello(self) -> wire.Message:
        pid = os.getpid()
        return messages.hello(next(self.ids), "client", pid=pid, owner=self.owner, name=f"pid{pid}",
                              lock_fd=self.lock_fd)

    def task(self, op: int, inputs: list, outputs: list, params: dict, options: TaskOptions,
             raw: list | None = None) -> wire.Message:
        """A TASK message with ``options`` (checked when it was made). Raises InvalidArgument for
        an operator id no server would take."""
        if not isinstance(op, int) or not 0 <= op <= 0xFFFE:
            raise errors.InvalidArgument(f"cmd must be an operator id in 0x0000..0xfffe, got {op!r}")
        return messages.task(next(self.ids), op, inputs=inputs, outputs=outputs, params=params, owner=self.owner,
                             raw=raw, **options.header())

    def task_frames(self, op: int, inputs: list, outputs: list, params: dict, options: TaskOptions,
                    raw: list | None = None) -> tuple[int, list]:
        """``(msg_id, wire.encode(self.task(...)))`` without the Message in between (the SDK's
        per-task path): the same frames, checks and errors as :meth:`task`."""
        if not isinstance(op, int) or not 0 <= op <= 0xFFFE:
            raise errors.InvalidArgument(f"cmd must be an operator id in 0x0000..0xfffe, got {op!r}")
        msg_id = next(self.ids)
        priority, core, custom_id = options.wire
        frames = [header.pack(_TASK, msg_id, op, priority, core, custom_id),
                  wire.pack_body({"inputs": inputs, "outputs": outputs, "params": params or {}, "owner": self.owner})]
        if raw:
            frames.extend(raw)
        return msg_id, frames

    def track(self, req) -> None:
        """``req`` is in flight: its reply completes it."""
        self.pending[req.msg_id] = req

    def forget(self, msg_id: int) -> None:
        self.pending.pop(msg_id, None)

    # --- the connect sequence -------------------------------------------------------------
    def connect(self, discovery, timeout_s: float, clock: Callable[[], float]) -> Steps:
        """HELLO the relay, or each core (direct mode), as ``discovery`` (``arm_side.discovery``)
        names them, as steps for a driver. A core that does not answer is marked unreachable.
        Raises RelayUnavailable / CoreOffline (none answers), KeyRefused, CoreBusy (busy until the
        ``timeout_s``), or the error a server answered with."""
        discovery.prepare(self.owner)
        if self.mode == "relay":
            yield from self.connect_relay(discovery, timeout_s, clock)
            return
        for name, endpoint in discovery.servers().items():
            peer = PeerState(name, clock())
            self.peers.append(peer)
            yield Open(peer, endpoint)            # watched: a core that exits is known at once
            try:
                info = yield from self._ready(peer, discovery.ready_wait(name, endpoint, timeout_s, clock()),
                                              functools.partial(_where, discovery, name), timeout_s, clock)
            except errors.KeyRefused:
                peer.alive = False      # no DISCONNECT on a link the server refused (a send would block)
                raise
            except (errors.TaskTimeout, errors.CoreOffline) as exc:     # CoreOffline: its directory went away
                log.warning("core %s does not answer at %s: %s", name, endpoint, exc.message)
                peer.alive = False
                self.core_states[name] = "unreachable"
                yield Release(peer)
                continue
            yield Act(peer, self.connected(peer, info, clock()))
        if not any(p.alive for p in self.peers):
            raise errors.CoreOffline("no DSP core answers: is the SoC up? (vdsp up -d)")

    def connect_relay(self, discovery, timeout_s: float, clock: Callable[[], float]) -> Steps:
        """Relay mode: HELLO the relay (again, after it died: a restarted relay answers at the same
        endpoint). Raises RelayUnavailable saying which process and why, KeyRefused, CoreBusy, or the
        error the relay answered with; the peer is then dead, its links for the driver to close."""
        endpoint = discovery.servers()["relay"]
        peer = PeerState("relay", clock())
        self.peers[:] = [peer]
        yield Open(peer, endpoint)
        try:
            info = yield from self._ready(peer, discovery.ready_wait("relay", endpoint, timeout_s, clock()),
                                          functools.partial(_where, discovery, "relay"), timeout_s, clock)
        except BaseException:
            peer.alive = False
            raise
        yield Forget(peer)        # a connection that closed before this READY came
        yield Act(peer, self.connected(peer, info, clock()))

    def _ready(self, peer: PeerState, wait, where: Callable[[], str], timeout_s: float,
               clock: Callable[[], float]) -> Generator[Step, Any, dict]:
        """Say HELLO to ``peer`` (on its open link); its READY body, waited for in the slices ``wait``
        (``arm_side.connect_wait``) gives until it raises. A HELLO answered HB_DSP_BUSY is said again
        after a pause (``arm_side.busy_retry``) within ``timeout_s``. A link that will carry nothing
        more (an ipc link is connected once: nothing listened at that moment, or the connection
        closed; over tcp libzmq does not connect again after a denied handshake) is replaced: KeyRefused
        if the server refused our key, else a new link to where ``where()`` says now (the discovery
        checks the sockets' directory again, as at first connect), and HELLO again on it. An error
        that ends the wait (RelayUnavailable, CoreOffline, TaskTimeout) also says what the tries
        came to (``arm_side.connect_wait.Tries``)."""
        busy = BusyRetry(clock() + timeout_s)
        tries = Tries(clock())
        while True:
            try:
                req = yield Hello(peer, self.hello())
            except errors.RelayUnavailable as exc:
                tries.not_sent()
                dead = yield Dead(peer)       # ipc: no key to refuse, no grace to wait
                refusal = None if dead else (yield from self._refusal(peer, clock))
                if refusal:
                    raise errors.KeyRefused(refusal) from None
                if busy.deadline is not None and clock() >= busy.deadline:
                    raise (yield from self._unanswered(peer, exc, tries, clock)) from None
                (log.warning if tries.unsent == 1 else log.debug)("%s: a HELLO could not be sent (%s); connecting again",
                                                                  peer.name, exc.message)
                if dead:        # the server closed it at once (it is full, say): a pause, the wait's own
                    try:
                        pause = wait.next_slice(clock())
                    except _WAIT_ENDED as why:
                        raise (yield from self._unanswered(peer, why, tries, clock)) from None
                    yield Pause(peer, pause)
                tries.relinked()
                yield from self._relink(peer, where)
                continue
            tries.sent(clock())
            relink = False
            try:
                while not req.done():
                    refusal = yield Refused(peer)
                    if refusal:
                        raise errors.KeyRefused(refusal)
                    try:
                        slice_s = wait.next_slice(clock())
                    except _WAIT_ENDED as why:
                        # the deadline passed while a HELLO said again after BUSY answers waited:
                        # the server runs and is busy, not absent
                        if (not isinstance(why, errors.TaskTimeout) and busy.last is not None
                                and busy.deadline is not None and clock() >= busy.deadline):
                            raise busy.expired() from None
                        raise (yield from self._unanswered(peer, why, tries, clock)) from None
                    yield Wait(req, slice_s)
                    if not req.done() and (yield Dead(peer)):
                        relink = True       # the HELLO waits on a link that will never carry it
                        break
                if not relink:
                    if req.error is not None:
                        raise req.error
                    return req.body
            except errors.CoreBusy as exc:
                wait.answered()
                yield Pause(peer, busy.pause(exc, clock()))
            finally:
                self.forget(req.msg_id)
            if relink:
                tries.relinked()
                yield from self._relink(peer, where)

    @staticmethod
    def _unanswered(peer: PeerState, why: errors.VdspError, tries: Tries,
                    clock: Callable[[], float]) -> Generator[Step, Any, errors.VdspError]:
        """``why`` the wait for ``peer``'s READY ends, with what this connect's tries came to."""
        connection = yield Linked(peer)
        return type(why)(f"{why.message}; {tries.describe(connection, clock())}")

    @staticmethod
    def _relink(peer: PeerState, where: Callable[[], str]) -> Steps:
        """Close ``peer``'s link and open a new one to where ``where()`` names it now."""
        yield Release(peer)
        yield Open(peer, where())

    def _refusal(self, peer: PeerState, clock: Callable[[], float]) -> Generator[Step, Any, str | None]:
        """Why ``peer``'s server refused our key, or None. The link's monitor tells a refusal a
        moment after the connection ended: it is looked at for REFUSAL_GRACE_S."""
        deadline = clock() + REFUSAL_GRACE_S
        while True:
            refusal = yield Refused(peer)
            if refusal or clock() >= deadline:
                return refusal
            yield Pause(peer, 0.02)

    # --- which link a request goes on -----------------------------------------------------
    def task_link(self, msg_id: int, options: TaskOptions, has_buffers: bool) -> tuple[str, str]:
        """The key of the link a TASK goes on, and the core it goes to ("" in relay mode: the relay
        chooses); direct mode: counted in flight there. Raises as :meth:`route`."""
        if self.mode == "relay":
            return "relay", ""
        peer = self.route(options.core, has_buffers)
        peer.inflight.add(msg_id)
        return fw_key(peer.name), peer.name

    def request_link(self, peer_name: str | None) -> str:
        """The key of the link a QUERY or CONTROL to core ``peer_name`` goes on (the relay's, in
        relay mode). Raises InvalidCore."""
        if self.mode == "relay":
            return "relay"
        peer = next((p for p in self.peers if p.name == peer_name), None)
        if peer is None or not peer.alive:
            raise errors.InvalidCore(f"no reachable core named {peer_name!r}")
        return peer.name

    def cancel_link(self, task) -> str | None:
        """The key of the link a CANCEL of ``task`` goes on; None: nowhere to send it."""
        if self.mode == "relay":
            return "relay" if self.peers and self.peers[0].alive else None
        peer = next((p for p in self.peers if task.msg_id in p.inflight), None)
        return fw_key(peer.name) if peer is not None else None

    def unsent(self, msg_id: int) -> None:
        """The request ``msg_id`` could not be sent: not in flight."""
        self.pending.pop(msg_id, None)
        for peer in self.peers:
            peer.inflight.discard(msg_id)

    def route(self, core: int, has_buffers: bool) -> PeerState:
        """Direct mode: the core a task goes to (the least busy running one for CORE_ANY).

        Raises TaskNumExceedLimit, CoreOffline / CoreCrashed / CoreDead, InvalidCore, ClaimRefused."""
        # one pass (every task's path): the count in flight, and the first running core with the
        # fewest in flight (for CORE_ANY); PeerState.alive read without the property's call
        in_flight = best_n = 0
        best: PeerState | None = None
        for p in self.peers:
            n = len(p.inflight)
            in_flight += n
            if p.fw_endpoint is not None and p._alive and (best is None or n < best_n):
                best, best_n = p, n
        if in_flight >= MAX_TASKS_PER_CLIENT:
            raise errors.TaskNumExceedLimit(f"{in_flight} tasks already in flight (limit {MAX_TASKS_PER_CLIENT})")
        if core == _ANY:
            if best is None:
                raise errors.CoreOffline(f"no running core ({self.core_states})")
            peer = best
        else:
            index = Core(core).index
            if index is None or index >= len(self.peers):
                raise errors.InvalidCore(f"this SoC has {len(self.peers)} cores")
            peer = self.peers[index]
            if peer.fw_endpoint is None or not peer.alive:
                raise error_for(CoreState.of(self.core_states.get(peer.name, "offline")), peer.name)
        if peer.fw_refused is not None and has_buffers:
            if isinstance(peer.fw_refused, errors.CoreBusy):
                raise errors.CoreBusy(f"{peer.name}: our HELLO is to be said again to its firmware, which answered "
                                      f"the last one: {peer.fw_refused.message}; send the task again shortly")
            raise errors.ClaimRefused(f"{peer.name}: {peer.fw_refused.message}")
        return peer

    def fw_hello_sent(self, peer: PeerState, req) -> None:
        """Direct mode: our HELLO went to ``peer``'s firmware. Not waited for (a firmware running
        a long task answers only after it, and one link keeps order); a refusal is kept, and
        later tasks with buffers to that firmware raise it. HB_DSP_BUSY (it verifies many HELLOs
        now) is kept until :meth:`tick` has it said again, after a pause (``arm_side.busy_retry``)."""
        peer.fw_refused, peer.fw_hello, peer.fw_again_at = None, req, None

        def answered(r, peer: PeerState = peer) -> None:
            if peer.fw_hello is not r:
                return
            if isinstance(r.error, errors.ClaimRefused):
                peer.fw_refused = r.error
                log.error("the firmware of %s refused our HELLO: %s", peer.name, r.error)
            elif isinstance(r.error, errors.CoreBusy):
                peer.fw_busy = peer.fw_busy or BusyRetry()      # first: the clock looks at fw_refused
                peer.fw_refused = r.error
            elif r.error is None:
                peer.fw_busy = None
        req.add_done_callback(answered)

    def _forget_fw_hello(self, peer: PeerState) -> None:
        req, peer.fw_hello = peer.fw_hello, None
        peer.fw_busy = peer.fw_again_at = None
        if req is not None and self.pending.pop(req.msg_id, None) is not None:
            req._complete({}, None)

    # --- what arrives ---------------------------------------------------------------------
    def connected(self, peer: PeerState, info: dict, now: float) -> list[Action]:
        """``peer`` answered our HELLO with READY ``info``."""
        peer.connect(info, now)
        if self.mode == "relay":
            for core in info.get("cores", []):
                self.core_states[core["name"]] = core["state"]
            return []
        return self.core_state(peer, info.get("state", "offline"), info)

    def receive(self, peer: PeerState | None, frames: list, now: float) -> list[Action]:
        """One message from ``peer``'s links (completes the request it answers). Returns actions.
        (The compiled build's reading loop, ``arm_side/taskpath.c``, completes a RESULT as this does,
        in both modes, and hands every other message here: a change to that case is made there too.)"""
        if peer is not None:
            peer.liveness.last_heard = now
        try:
            hdr = header.Header.parse(frames[0])
        except (errors.VdspError, IndexError) as exc:
            log.warning("dropped malformed message from %s: %s", peer.name if peer else "?", exc)
            return []
        cmd, msg_id = hdr[0], hdr[4]
        if cmd is _HEARTBEAT:
            return []
        try:
            body = wire.unpack_body(bytes(frames[1])) if len(frames) > 1 else {}
        except errors.VdspError as exc:
            body, cmd = exc.to_wire(), _ERROR
        if cmd is _EVENT:
            return self._on_event(peer, body)
        req = self.pending.pop(msg_id, None)
        if req is None:
            return []  # released, or timed out and forgotten
        if self.mode == "direct":
            if peer is not None and msg_id in peer.inflight:    # the usual case: the core it went to answered
                peer.inflight.discard(msg_id)       # (a msg_id is counted on one core only)
            else:
                for p in self.peers:
                    p.inflight.discard(msg_id)
        if cmd is not _ERROR:       # the usual case: RESULT
            req._complete(body, None, hdr, frames[2:])
            return []
        error = errors.from_wire(body)
        if isinstance(error, errors.ForeignHandle) and error.unbound and peer is not None:
            if self._bound(peer):
                return self._binding_lost(peer, req, error)
            if self.mode == "direct" and isinstance(peer.fw_refused, errors.CoreBusy):
                # sent right behind our HELLO, which was answered BUSY (its answer came first on
                # the link): it did not run, and the clock says the HELLO again (PROTOCOL.md §5.4)
                error = errors.CoreBusy(f"{peer.name}: its firmware answered our HELLO {peer.fw_refused.message}; "
                                        "the task did not run: the HELLO is said again, send the task again")
                req._complete(None, error)
                return []
        req._complete(body, error, hdr, frames[2:])
        return []

    def _bound(self, peer: PeerState) -> bool:
        """Did ``peer``'s server verify our HELLO: the relay's READY (relay mode), or the firmware's
        own READY on its link (direct mode: a HELLO there is not waited for; a refused or
        unanswered one leaves the connection without an owner, as PROTOCOL.md §6.6 says)."""
        if self.mode == "relay":
            return peer.connected
        hello = peer.fw_hello
        return hello is not None and hello.done() and hello.error is None and peer.fw_refused is None

    def _binding_lost(self, peer: PeerState, req, error: errors.ForeignHandle) -> list[Action]:
        """``peer`` answered READY to our HELLO, yet says this connection has no verified owner:
        the process that verified it is gone and our link reached its successor (ZeroMQ
        reconnects a tcp link on its own, never an ipc one (``vdsp_board.sockets.ipclink``); a task sent
        before we heard of the close went to the new one),
        or it forgot the binding (PROTOCOL.md §5.2). Relay mode: the relay is declared gone, its
        requests fail with RelayUnavailable and the next one says HELLO again. Direct mode: HELLO
        goes to the firmware again and the task fails with CoreBusy (it did not run: send it again),
        as one sent while a HELLO is to be said again does."""
        why = f"no longer knows this connection's HELLO (a new {peer.name} process?): {error.message}"
        if self.mode == "relay":
            self.pending[req.msg_id] = req      # failed with the others
            return self.peer_dead(peer, why)
        log.warning("core %s: its firmware %s; saying HELLO to it again", peer.name, why)
        req._complete(None, errors.CoreBusy(f"{peer.name}: its firmware {why}; our HELLO is said again: send the "
                                            "task again"))
        return [HelloFw(peer)] if peer.fw_endpoint is not None else []

    def _on_event(self, peer: PeerState | None, body: dict) -> list[Action]:
        actions: list[Action] = []
        if self.mode == "direct" and peer is not None:
            actions = self.core_state(peer, body.get("state", "?"), body)
        else:
            self.core_states[body.get("core", "?")] = body.get("state", "?")
        for cb in list(self.event_callbacks):
            try:
                cb(body)
            except Exception:
                log.exception("event callback raised")
        return actions

    def core_state(self, peer: PeerState, state: str, body: dict) -> list[Action]:
        """Direct mode: follow a core's state; tasks in flight on a core that stops fail."""
        self.core_states[peer.name] = state
        if state == "running":
            endpoint = body.get("fw_endpoint", "")
            actions: list[Action] = []
            # a new firmware on tcp has a key of its own (fw_server_key): a new link
            if peer.fw_endpoint != endpoint or peer.info.get("fw_server_key", "") != body.get("fw_server_key", ""):
                self._forget_fw_hello(peer)
                peer.fw_endpoint = endpoint
                actions = [OpenFw(peer, endpoint)]
            peer.info.update({k: v for k, v in body.items() if k != "state"})
            return actions
        actions = []
        if peer.fw_endpoint is not None:
            peer.fw_endpoint = None
            self._forget_fw_hello(peer)
            actions = [CloseFw(peer)]
        self._fail_inflight(peer, lambda: error_for(CoreState.of(state), peer.name, str(body.get("reason", ""))))
        return actions

    def fw_link_dead(self, peer: PeerState, why: str, endpoint: str) -> list[Action]:
        """Direct mode: ``peer``'s firmware link (to ``endpoint``) will carry nothing more (an ipc
        link is connected once): ``why`` ``failed`` (no connection was made: the tasks sent on it
        never arrived, they fail with CoreOffline) or ``ended`` (the firmware's connection closed:
        its tasks are the core's to end, as its state says). Returns the actions: while the core
        runs, a new link (its directory checked again) and HELLO on it. A task sent on a link that
        ended stays in flight through the failures of the links made after it (``PeerState.fw_ended``):
        the firmware's connection closes before the core's own word arrives (its process exits
        with its core, whose control connection we may hear of later), and that word decides."""
        if why == "ended":
            peer.fw_ended = set(peer.inflight)
        elif why == "failed":
            self._fail_inflight(peer, lambda: errors.CoreOffline(
                f"{peer.name}: the link to its firmware at {endpoint} could not connect; send the task again"),
                keep=peer.fw_ended)
        if not peer.alive or peer.fw_endpoint is None:
            return []
        self._forget_fw_hello(peer)
        return [OpenFw(peer, peer.fw_endpoint)]

    def _fail_inflight(self, peer: PeerState, error: Callable[[], errors.VdspError],
                       keep: set[int] | frozenset[int] = frozenset()) -> None:
        """Every task in flight to ``peer`` but those in ``keep`` fails with an ``error()`` of its own."""
        for msg_id in list(peer.inflight - keep):
            req = self.pending.pop(msg_id, None)
            if req is not None:
                req._complete(None, error())
        peer.inflight.intersection_update(keep)
        peer.fw_ended.intersection_update(peer.inflight)

    def cancelled(self, task, reply: dict | None) -> str:
        """``task`` was released and ``reply`` is the server's answer to our CANCEL (None: none came).
        Completes the task unless it had already ended; returns the CancelOutcome's value."""
        outcome = CancelOutcome.of(reply.get("state")) if reply is not None else CancelOutcome.RUNNING
        if outcome is CancelOutcome.UNKNOWN:   # not waiting there; it was in flight when released
            outcome = CancelOutcome.RUNNING     # (Task.release answers for finished ones): it ran, unseen
        if self.pending.pop(task.msg_id, None) is not None or outcome is CancelOutcome.CANCELLED:
            task._complete(None, errors.TaskCancelled(f"task {task.msg_id} released"))
        for peer in self.peers:
            peer.inflight.discard(task.msg_id)
        return outcome.value

    # --- the clock ------------------------------------------------------------------------
    def tick(self, now: float, closed: Callable[[PeerState], bool] = lambda p: False,
             facts: Callable[[PeerState], ProcFact] = lambda p: ProcFact.UNKNOWN) -> list[Action]:
        """Heartbeats due; a peer whose connection ``closed`` (the transport heard it: its process
        exited) is dead at once; one silent past its hung deadline is dead unless ``facts`` (what the
        kernel says of its process, where we can see it) shows progress (``protocol.liveness``)."""
        actions: list[Action] = []
        for peer in list(self.peers):
            if not peer.alive or not peer.connected:
                continue
            if isinstance(peer.fw_refused, errors.CoreBusy):
                actions += self._fw_hello_again(peer, now)
            live = peer.liveness
            if closed(peer):
                actions += self.peer_dead(peer, "its connection closed")
            elif live.overdue(now) and live.hung(now, fact := facts(peer)):
                actions += self.peer_dead(peer, f"hung: silent for {live.silent(now):.1f} s (process {fact.value})")
            elif live.send_due(now):
                actions.append(Send(peer, wire.encode(messages.heartbeat())))
        return actions

    def _fw_hello_again(self, peer: PeerState, now: float) -> list[Action]:
        """Direct mode: the firmware answered our HELLO HB_DSP_BUSY: say it again once the pause is over."""
        busy, refusal = peer.fw_busy, peer.fw_refused
        if busy is None or not isinstance(refusal, errors.CoreBusy):   # said again meanwhile (another thread)
            return []
        if peer.fw_again_at is None:
            peer.fw_again_at = now + busy.pause(refusal, now)     # no deadline: it does not raise
            return []
        if now < peer.fw_again_at or peer.fw_endpoint is None:
            return []
        peer.fw_again_at = None
        return [HelloFw(peer)]

    def fw_closed(self, peer: PeerState) -> list[Action]:
        """Direct mode, tcp: the connection of ``peer``'s firmware link closed after its handshake
        had succeeded (ZeroMQ connects again by itself; the core may well be alive). The firmware's
        replies to the tasks in flight there went to the closed connection: each fails now,
        CoreOffline (it may have run), instead of waiting out its timeout; HELLO goes to the
        firmware again (the new connection has proven no owner)."""
        for msg_id in sorted(peer.inflight):
            req = self.pending.pop(msg_id, None)
            if req is not None:
                req._complete(None, errors.CoreOffline(
                    f"{peer.name}: the connection to its firmware closed with task {msg_id} in flight (it may "
                    "have run); connected again: send it again if running it twice is harmless"))
        peer.inflight.clear()
        peer.fw_ended.clear()
        self._forget_fw_hello(peer)
        log.warning("core %s: the connection to its firmware closed; connected again, saying HELLO", peer.name)
        return [HelloFw(peer)] if peer.fw_endpoint is not None else []

    def control_closed(self, peer: PeerState) -> list[Action]:
        """Direct mode, tcp: ``peer``'s control connection closed after its handshake had succeeded
        (ZeroMQ connects again by itself). Over tcp that is no proof the core died: HELLO goes
        again on the new connection (the core sends EVENTs and heartbeats to peers that said it),
        and the heartbeats judge its liveness."""
        log.warning("core %s: its control connection closed; connected again, saying HELLO", peer.name)
        return [Send(peer, wire.encode(self.hello()))]

    def peer_dead(self, peer: PeerState, why: str) -> list[Action]:
        peer.alive = False
        if self.mode == "direct":
            log.error("core %s: %s: declared dead", peer.name, why)
            return self.core_state(peer, "dead", {"reason": why})
        log.error("relay %s: failing %d request(s)", why, len(self.pending))
        self.fail_all(errors.RelayUnavailable(f"relay server stopped answering: {why}"))
        return []

    def fail_all(self, exc: errors.VdspError) -> None:
        for msg_id in list(self.pending):
            req = self.pending.pop(msg_id, None)
            if req is not None:
                req._complete(None, exc)

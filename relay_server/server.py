"""The relay's ZeroMQ adapter: it polls the sockets, feeds :class:`RelayEngine` and sends what
the engine returns. All the conversation (scheduling, ownership, liveness, core states,
cancels) is in ``relay_server.engine``; this module holds only sockets.

Clients talk to a ROUTER; each core has a control DEALER (always) and a firmware DEALER
(while it runs: the engine opens and closes it). A client that does not read its replies
can make the relay hold at most ``CLIENT_SNDHWM`` of them; the excess is dropped, counted
and logged (rate-limited).
"""
from __future__ import annotations

import logging
import os
import math
import time
from typing import assert_never

import zmq
from zmq.backend import zmq_poll

from protocol import errors, messages, wire
from protocol.constants import HEARTBEAT_INTERVAL_MS, HUNG_AFTER_MS, MAX_RAW_FRAME, MAX_TASKS_PER_CLIENT
from relay_server.effects import CloseFwLink, Effect, OpenFwLink, ToClient, ToCtl, ToFw
from relay_server.engine import CREDIT, RelayEngine
from relay_server.observe import RelayObserver
from vdsp_board.processes import proc, rundir
from vdsp_board.observability import trace
from vdsp_board.memory import ddr
from vdsp_board.identity import curve, peercred, peerproof
from vdsp_board.sockets import ipclink
from vdsp_board.identity.admission import Admission
from vdsp_board.identity.hellogate import HelloGate
from vdsp_board.identity.ownership import Ownership
from vdsp_board.processes.procfacts import ProcFacts
from vdsp_board.sockets.zsock import readable, recv_frames, recv_next, recv_routed, send_frames, send_routed

log = logging.getLogger("vdsp.relay")
REAP_EVERY_S = 1.0
# The loop's turn when nothing arrives: heartbeats (every 500 ms), HELLO retries (0.5 s), the
# exited-client recheck (0.1 s) and the control links' backstop drain. At 20 ms an idle relay
# spent 10 ms of CPU a second (54 turns of ~190 µs, cold); at 100 ms, under 3 ms.
TICK_MS = 100
FRONT_TURN_S = 0.004            # the longest a loop turn reads the front before it serves the firmware links:
#                                 a burst of HELLO claims (each taken apart: syscalls) delays others' replies
#                                 by this much a turn, not by the burst (issue 40 point 4: 1.5-2.2 s beside
#                                 300 processes x 12 HELLOs, with the whole 256-message turn)
CLIENT_SNDHWM = 4096            # replies waiting for one client before the next is dropped (1000 lost some
#                                 of a 2,000-refusal flood read late on a busy host)
RELINK_FIRST_S = 0.01           # a dead ipc control link is made again after this, doubling while nothing
RELINK_MOST_S = 0.5             # listens there, up to this (the cores' HELLO retry: cores.HELLO_RETRY_S).
#                                 Not on the 100 ms tick: at `vdsp up` the relay often starts before a core
#                                 listens, and the first HELLO then waited for the next tick (+0.1 s per up)
_NOBLOCK = int(zmq.NOBLOCK)
_POLLIN = int(zmq.POLLIN)


class RelayServer:
    def __init__(self, bind: str, cores: dict[str, str], *, heartbeat_ms: int = HEARTBEAT_INTERVAL_MS,
                 hung_ms: int = HUNG_AFTER_MS, credit: int = CREDIT, max_queued: int = 8192,
                 max_tasks_per_client: int = MAX_TASKS_PER_CLIENT, metrics=None, wake_fd: int | None = None) -> None:
        """``metrics``: a ``relay_server.metrics.RelayMetrics`` to feed (--metrics-port). ``wake_fd``: a
        pipe a signal makes readable (``proc.signal_wake_fd``): the loop polls it, so that a SIGTERM's
        handler clearing ``running`` ends it at once, not at the end of its tick."""
        self.ctx = zmq.Context()
        self.front = self.ctx.socket(zmq.ROUTER)
        self.front.linger = 0
        self.front.router_mandatory = True
        self.front.sndhwm = CLIENT_SNDHWM        # per client: a client that never reads cannot grow us
        self.front.rcvhwm = 10000
        # a larger frame closes that connection before it is read; unauthenticated peers are bounded
        accepted = peerproof.accept_records()    # who opened each ipc connection (kernels without SO_PEERPIDFD)
        self.admission = Admission(self.front, "relay", max_frame=MAX_RAW_FRAME, accepted=accepted)
        self.gate = curve.Gate(self.ctx, curve.keys_dir()) if curve.is_tcp(bind) else None
        curve.secure_server(self.front, bind)
        self.front.bind(bind)
        self.bind = bind
        # on while `vdsp trace` (or Soc(trace=...)) runs: see vdsp_board.observability.trace
        self.trace = trace.Recorder("relay", "relay", meta={"cores": list(cores)})
        self.metrics = metrics
        ownership = Ownership("relay", gate=self.gate, accepted=accepted)
        self.hellos = HelloGate(ownership, "relay-hello")   # HELLO claims judged off this loop
        self.engine = RelayEngine(cores, time.monotonic(), ownership=ownership,
                                  pid=os.getpid(), heartbeat_ms=heartbeat_ms, hung_ms=hung_ms, credit=credit,
                                  max_queued=max_queued, max_tasks_per_client=max_tasks_per_client,
                                  admin_only_writes=self.gate is not None, is_admin=curve.is_admin,
                                  observer=RelayObserver(self.trace, metrics), facts=ProcFacts().fact)
        self.engine.identity = peerproof.describe(ownership.proof)
        self.cores = self.engine.cores            # read by main's --exit-without-cores watch
        for core in self.cores:
            log.info("Connect to vdsp core%d...", core.index)
        # Links to the cores are connected as vdsp_board.sockets.ipclink says: over ipc once, through their
        # checked directory (the LinkDirs, closed with their sockets), and made again by us when dead.
        self._pins: dict[zmq.Socket, ipclink.LinkDir] = {}
        # a core process that dies closes our control connection: we hear it at once (the monitor)
        self.ctl: list[zmq.Socket] = []
        self.ctl_monitors: list[zmq.Socket] = []
        for core in self.cores:
            sock, monitor = self._ctl_link(core.endpoint)
            self.ctl.append(sock)
            self.ctl_monitors.append(monitor)
        self.ctl_state = [ipclink.LinkState(ipclink.is_ipc(c.endpoint)) for c in self.cores]
        self._ctl_again = [0.0] * len(self.cores)                 # a dead control link is made again then
        self._ctl_pause = [RELINK_FIRST_S] * len(self.cores)
        self._relink_due = math.inf     # the earliest _ctl_again of a dead control link (the loop wakes then)
        # a client connection that closes: the engine looks at once which clients' processes exited
        # (the front's one monitor is the admission's, which counts the closes: self._closes)
        self._closes = 0
        self.fw: list[zmq.Socket | None] = [None] * len(self.cores)
        self.fw_monitors: list[zmq.Socket | None] = [None] * len(self.cores)    # ipc: did it connect?
        self.fw_state: list[ipclink.LinkState | None] = [None] * len(self.cores)
        self._verdict_s = 2 * hung_ms / 1000     # a firmware link gone: its core's word awaited so long at most
        # What the loop polls: the busy sockets (front, firmware links) as sockets, the wake pipe
        # of the HELLO gate, and the quiet ones (control links, their monitors) by their ZMQ_FD
        # (see _drain_quiet). A ZeroMQ socket costs zmq_poll two ZMQ_EVENTS queries per call;
        # an fd costs only its pollfd. Rebuilt when a link opens or closes.
        self._quiet: list[tuple] = []
        self._quiet_fds: list[int] = []
        self._find_quiet()
        self._quiet_due = True            # a quiet socket may hold messages its fd no longer signals
        self._items: list[tuple] = []
        self._handlers: dict = {}
        self._wake_fd = wake_fd
        self._rebuild_poll()
        self._spare: list[Effect] = []         # the engine's other output list (two, swapped: none allocated per turn)
        self.running = True

    def _find_quiet(self) -> None:
        self._quiet = [(self._drain_ctl(i, sock), sock) for i, sock in enumerate(self.ctl)] + \
            [(self._drain_monitor(i, sock), sock) for i, sock in enumerate(self.ctl_monitors)]
        self._quiet_fds = [int(sock.get(zmq.FD)) for _, sock in self._quiet]

    def _rebuild_poll(self) -> None:
        front_in = [(self.front, _POLLIN)]
        handlers: dict = {self.front: self._drain_front, self.hellos.fileno(): self._hellos_ready}
        for index, sock in enumerate(self.fw):
            if sock is not None:
                front_in.append((sock, _POLLIN))
                handlers[sock] = self._drain_fw(index, sock)
        for fd in self._quiet_fds:
            handlers[fd] = self._mark_quiet
        fds = [self.hellos.fileno(), *self._quiet_fds]
        if self._wake_fd is not None:
            wake = self._wake_fd
            handlers[wake] = lambda: proc.drain_wake_fd(wake)
            fds.append(wake)
        self._items = front_in + [(fd, _POLLIN) for fd in fds]
        self._handlers = handlers

    def _dealer(self, endpoint: str, server_key: str = "",
                events: int = ipclink.EVENTS) -> tuple[zmq.Socket, zmq.Socket | None]:
        """A DEALER connected to ``endpoint``: a core's control endpoint, or a firmware's, whose own
        CURVE key (``server_key``, announced by its core) it authenticates on tcp; and its monitor
        of ``events`` (None for 0), made before it connects so that it hears how the attempt ended.
        Over ipc it is connected once, through its directory checked (``vdsp_board.sockets.ipclink``):
        CoreOffline when that directory is gone or refused."""
        sock = self.ctx.socket(zmq.DEALER)
        monitor = None
        try:
            sock.linger = 0
            sock.sndhwm = sock.rcvhwm = 100000
            sock.maxmsgsize = MAX_RAW_FRAME
            curve.secure_client(sock, endpoint, key_file=curve.keys_dir() / "relay.key_secret", server_key=server_key)
            monitor = sock.get_monitor_socket(events) if events else None
            pin = ipclink.connect(sock, endpoint, errors.CoreOffline)
        except BaseException:
            self._close_link(sock, monitor)
            raise
        if pin is not None:
            self._pins[sock] = pin
        return sock, monitor

    def _ctl_link(self, endpoint: str) -> tuple[zmq.Socket, zmq.Socket]:
        """A control link to the core at ``endpoint``, and its monitor."""
        sock, monitor = self._dealer(endpoint)
        assert monitor is not None      # asked for ipclink.EVENTS
        return sock, monitor

    def _close_link(self, sock: zmq.Socket, monitor: zmq.Socket | None) -> None:
        """Close a link's socket, its monitor and the directory its connection went through."""
        if monitor is not None and not sock.closed:
            try:
                sock.disable_monitor()
            except zmq.ZMQError:
                pass
            monitor.close(0)
        sock.close(0)
        pin = self._pins.pop(sock, None)
        if pin is not None:
            pin.close()

    def _relink_ctl(self, index: int, now: float) -> bool:
        """A new control link to core ``index`` in place of its dead one (over ipc a link connects
        once: nothing listened then, or the core's connection closed), its directory checked again.
        False (tried again later, after a doubling pause) when it cannot be made."""
        pause = self._ctl_pause[index]
        self._ctl_again[index], self._ctl_pause[index] = now + pause, min(pause * 2, RELINK_MOST_S)
        core = self.cores[index]
        try:
            sock, monitor = self._ctl_link(core.endpoint)
        except errors.VdspError as exc:
            self.engine.warn.warn(("relink", index), "%s: cannot connect to %s again: %s", core.name, core.endpoint,
                                  exc.message)
            return False
        self._close_link(self.ctl[index], self.ctl_monitors[index])
        self.ctl[index], self.ctl_monitors[index] = sock, monitor
        self.ctl_state[index] = ipclink.LinkState(True)
        self._find_quiet()
        self._rebuild_poll()
        return True

    def _ctl_links_again(self, now: float) -> None:
        """Dead control links whose pause is over are made again; ``_relink_due`` is then the
        earliest pause still running (the loop's poll waits no longer than that)."""
        due = math.inf
        for index, state in enumerate(self.ctl_state):
            if state.dead and now >= self._ctl_again[index] and self._relink_ctl(index, now):
                self.engine.ctl_relinked(index)
            if self.ctl_state[index].dead:
                due = min(due, self._ctl_again[index])
        self._relink_due = due

    def _ctl_heard(self, index: int, frames: list, now: float) -> None:
        """A monitor event of core ``index``'s control link. Its connection closed: the core's
        process exited (``RelayEngine.ctl_lost``); over ipc a new link first, which the HELLO
        said then goes out on once the core listens again."""
        event = ipclink.decode(frames)
        self.ctl_state[index].heard(event)
        if self.ctl_state[index].dead:
            self._relink_due = min(self._relink_due, self._ctl_again[index])
        if event == zmq.EVENT_CONNECTED:
            self._ctl_pause[index] = RELINK_FIRST_S
        elif event == zmq.EVENT_DISCONNECTED:
            if self.ctl_state[index].dead:
                self._relink_ctl(index, now)
            self.engine.ctl_lost(index, now)

    def _links_again(self, now: float) -> None:
        """On each tick: dead ipc control links are made again when due (HELLO on each new one); a
        firmware link whose one connection attempt failed has its tasks failed and is opened
        afresh (``RelayEngine.fw_link_stuck``). A firmware link whose connection closed is the
        core's to report (its firmware exited); a task sent there meanwhile finds no pipe and
        waits for that word, for ``_verdict_s`` at most (``_fw_send_failed``)."""
        self._ctl_links_again(now)
        for index, fw in enumerate(self.fw_state):
            self._hear_fw(index)
            if fw is not None and (fw.dead == "failed" or fw.gone_at is not None and now - fw.gone_at > self._verdict_s):
                self.engine.fw_link_stuck(index, now)
        self.flush()

    def _hear_fw(self, index: int) -> None:
        """What firmware link ``index``'s monitor said since it was last asked."""
        fw, monitor = self.fw_state[index], self.fw_monitors[index]
        while fw is not None and monitor is not None:
            try:
                fw.heard(ipclink.decode(monitor.recv_multipart(_NOBLOCK)))
            except zmq.Again:
                break

    def _fw_send_failed(self, index: int) -> None:
        """A message for firmware link ``index`` found no connection to go to. On an ipc link whose
        connection was up, that connection closed: its firmware exited (or closed it), a kernel
        fact, and its core reports why (EVENT ``crashed``/``offline``), which fails the tasks sent
        there with the code of that state (PROTOCOL.md §10: the code follows the new state) —
        a busy host can deliver that EVENT after this. So the tasks stay in flight, never sent
        anywhere else, until the core's word, or until ``_verdict_s`` passes without it (twice the
        hung deadline: a silent core is declared dead before that): then, as for any other link
        that takes no messages (never connected; a tcp link whose firmware refused our key), they
        fail HB_DSP_CORE_OFFLINE and the link is made afresh (``RelayEngine.fw_link_stuck``)."""
        self._hear_fw(index)
        fw = self.fw_state[index]
        if fw is not None and fw.gone:
            if fw.gone_at is None:
                fw.gone_at = time.monotonic()
                log.info("%s: its firmware's connection closed; its tasks wait for the core's word",
                         self.cores[index].name)
            return
        self.engine.fw_link_stuck(index, time.monotonic())

    def _open_fw(self, index: int, endpoint: str) -> None:
        state = ipclink.LinkState(ipclink.is_ipc(endpoint))
        try:
            sock, monitor = self._dealer(endpoint, self.engine.cores[index].fw_key, ipclink.EVENTS if state.once else 0)
        except errors.VdspError as exc:     # its directory is gone or refused: failed, tried again at a tick
            log.warning("%s: cannot connect to its firmware at %s: %s", self.cores[index].name, endpoint, exc.message)
            state.failed = True
            self.fw_state[index] = state
            return
        self.fw[index], self.fw_monitors[index], self.fw_state[index] = sock, monitor, state

    # --- the engine's outputs ---------------------------------------------------------------
    def flush(self) -> None:
        engine = self.engine
        out = engine.out
        if not out:
            return
        engine.out = self._spare
        stuck: set[int] = set()     # firmware links found taking no messages in this flush
        # The common ones first (a match tries its cases in order), each a bare class pattern and
        # its fields read in the case: a positional capture costs a lookup of __match_args__ more.
        for effect in out:
            match effect:
                case ToClient():
                    try:
                        send_routed(self.front, effect.identity, effect.frames, _NOBLOCK)
                    except zmq.ZMQError as exc:
                        self._not_sent(effect.identity, exc)
                case ToFw():
                    index = effect.index
                    sock = self.fw[index]
                    if sock is not None and index not in stuck:
                        try:        # never blocks: a link whose firmware denied our key takes no message, ever
                            send_frames(sock, effect.frames, _NOBLOCK)
                        except zmq.Again:       # no connection: _fw_send_failed says what of its tasks
                            stuck.add(index)
                            self._fw_send_failed(index)
                case ToCtl():
                    index = effect.index
                    # a send takes in the socket's pending commands: a message announced by one
                    # no longer wakes the control link's fd, so the quiet sockets are looked at
                    self._quiet_due = True
                    if self.ctl_state[index].dead:      # HELLO is said on the new link that replaces it
                        continue
                    try:
                        self.ctl[index].send_multipart(effect.frames, _NOBLOCK)
                    except zmq.Again:
                        log.warning("%s: control queue full, dropped a message", self.cores[index].name)
                case OpenFwLink(index, endpoint):
                    stuck.discard(index)
                    self._close_fw(index)
                    self._open_fw(index, endpoint)
                    self._rebuild_poll()
                case CloseFwLink(index):
                    stuck.discard(index)
                    self._close_fw(index)
                case _:
                    assert_never(effect)
        out.clear()
        self._spare = out
        if stuck and engine.out:    # the failed tasks' errors and the new link: now, not at the next turn
            self.flush()

    def _not_sent(self, identity: bytes, exc: zmq.ZMQError) -> None:
        """A message for client ``identity`` was not sent (``exc``): dropped, counted, logged."""
        if isinstance(exc, zmq.Again):
            self.engine.reply_dropped(identity)
            self.engine.warn.warn(("slow", identity), "client %s is not reading its replies (%d waiting); dropped "
                                  "a message", identity.hex(), CLIENT_SNDHWM)
        else:   # EHOSTUNREACH: the client is gone
            self.engine.warn.warn(("gone", identity), "client %s unreachable (%s)", identity.hex(), exc.strerror)

    def _close_fw(self, index: int) -> None:
        sock, monitor, self.fw[index], self.fw_monitors[index] = self.fw[index], self.fw_monitors[index], None, None
        self.fw_state[index] = None
        if sock is not None:
            self._close_link(sock, monitor)
            self._rebuild_poll()

    # --- the loop -------------------------------------------------------------------------
    def run(self) -> None:
        log.info("Init relay server on %s", self.bind)
        engine = self.engine
        monotonic = time.monotonic
        next_reap = next_tick = 0.0
        while self.running:
            wait_ms = 0 if self._quiet_due else TICK_MS
            if self._relink_due != math.inf:
                wait_ms = min(wait_ms, max(0, math.ceil((self._relink_due - monotonic()) * 1000)))
            for sock, _ in zmq_poll(self._items, wait_ms):
                handler = self._handlers.get(sock)
                if handler is not None:     # None: a firmware link closed earlier in this turn
                    handler()
            now = monotonic()
            if self.admission.closes != self._closes:
                self._closes = self.admission.closes
                engine.client_disconnected(now)
            if now >= next_tick:
                engine.tick(now)
                self._links_again(now)
                next_tick = now + TICK_MS / 1000
                self._quiet_due = True      # and every tick, whatever their fds said
                # the trace switch: looked at every CHECK_EVERY_S (0.25 s) at most, so on a tick, not each turn
                self.trace.poll()
            elif now >= self._relink_due:
                self._ctl_links_again(now)
            if self._quiet_due:
                self._drain_quiet()
            self.flush()
            if now >= next_reap:
                ddr.reap()
                next_reap = now + REAP_EVERY_S
                if self.metrics is not None:
                    self.metrics.refresh(engine)
        self.close()

    def _mark_quiet(self) -> None:
        self._quiet_due = True

    def _drain_quiet(self) -> None:
        """Read every waiting message of the control links and their monitors. Their ZMQ_FDs
        signal only news (ZeroMQ's edge-triggered fd): after the fd woke us, after a send on a
        control link and on every tick they are read until ZMQ_EVENTS shows nothing more, which
        re-arms the fd."""
        self._quiet_due = False
        for drain, sock in self._quiet:
            if not sock.closed and readable(sock):
                drain()     # at most 256 messages a turn
                if not sock.closed and readable(sock):
                    self._quiet_due = True
        self.flush()        # a send on a control link: they are looked at again next turn, at once

    def _drain_ctl(self, index: int, sock: zmq.Socket):
        engine = self.engine

        def drain() -> None:
            self._drain(sock, lambda f: engine.on_ctl(index, f, time.monotonic()), each=True)
        return drain

    def _drain_monitor(self, index: int, sock: zmq.Socket):
        def drain() -> None:
            self._drain(sock, lambda f: self._ctl_heard(index, f, time.monotonic()), each=True)
        return drain

    def _drain_fw(self, index: int, sock: zmq.Socket):
        """The reader of firmware link ``index``: its replies go to the engine, sent at the turn's end.
        It receives until none waits (``zsock.recv_next``: in the compiled build the failed receive
        costs no exception, and it is what reading EVENTS after the first message cost: a sequential
        task's one reply costs two receives, a burst one receive more than its messages)."""
        on_fw, monotonic = self.engine.on_fw, time.monotonic

        def drain() -> None:
            for _ in range(256):
                frames = recv_next(sock)
                if frames is None:
                    return
                on_fw(index, frames, monotonic())
        return drain

    def _hellos_ready(self) -> None:
        self._to_engine(self.hellos.ready())

    def _drain_front(self) -> None:
        front, gate, engine, monotonic = self.front, self.hellos, self.engine, time.monotonic
        curve_on = self.gate is not None
        # what is left waits for the next turn: zmq_poll sees the front readable again at once (a
        # socket's readiness is read from ZMQ_EVENTS, not from its edge-triggered fd)
        # It receives until none waits (zsock.recv_routed: in the compiled build the failed receive
        # costs no exception and a message no pyzmq Frame), and one clock read a message serves the
        # turn's bound and the engine.
        now = monotonic()
        until = now + FRONT_TURN_S
        for _ in range(256):
            # The identity frame carries the peer's properties (its pid on ipc, its CURVE name on tcp).
            got = recv_routed(front)
            if got is None:
                return
            identity, frames, meta = got
            if frames:
                peer = curve.peer_name(meta) if curve_on else ""
                client = engine.clients.get(identity)
                # no HELLO claim, nothing of its connection held back: straight to the engine
                if client is not None and client.kernel_pid is not None and gate.passes(identity, frames):
                    engine.on_client(identity, frames, now, peer, meta)
                else:
                    self._to_engine(gate.admit(identity, frames, meta, peer))
            now = monotonic()
            if now > until:
                return

    def _to_engine(self, items: list) -> None:
        """Client messages past the HELLO gate (a HELLO with its verdict, or a refusal to answer)."""
        engine = self.engine
        for item in items:
            if item.refused is not None:
                if item.msg_id:     # in order with the engine's own answers
                    engine.to_client(item.identity, wire.encode(messages.error(item.msg_id, item.refused)))
            else:
                engine.on_client(item.identity, item.frames, time.monotonic(), item.peer, item.meta)
                client = engine.clients.get(item.identity)
                if client is not None and client.kernel_pid is None:   # once per connection: who it is
                    address = peercred.frame_property(item.frame, "Peer-Address")
                    client.kernel_pid = peercred.peer_pid(address if isinstance(address, str) else None) or 0

    def _drain(self, sock: zmq.Socket, handle, each: bool = False) -> None:
        """Up to 256 waiting messages of ``sock``, each handed to ``handle``. What the engine says
        in answer is sent at the end of the loop's turn (``run``): the replies of a burst leave
        back to back, which wakes each peer once for them, not once per reply. ``each``: flush after
        every message (control links: a message there may close or open a firmware link; a
        firmware link's own messages never close it)."""
        for _ in range(256):
            if sock.closed:
                return
            try:
                frames = recv_frames(sock, _NOBLOCK)
            except zmq.Again:
                return
            handle(frames)
            if each:
                self.flush()   # may close ``sock`` (a core stopped): checked above

    def close(self) -> None:
        self.engine.shutdown()
        self.flush()
        for index in range(len(self.cores)):
            self._close_fw(index)
            self._close_link(self.ctl[index], self.ctl_monitors[index])
        self.admission.stop()
        self.front.close(0)
        self.hellos.close()
        if self.gate is not None:
            self.gate.stop()
        self.ctx.term()
        rundir.unlink_ipc(self.bind)
        self.trace.close()

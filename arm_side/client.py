"""The SDK's blocking driver: a :class:`~arm_side.session.Session` (the conversation) over a
transport's links (``arm_side.links``), read by turns (``arm_side.reading``).

Threads: the caller's threads send directly (each link's socket under its lock). One thread at a
time reads the links, feeds the session what arrives (which completes the requests keyed by
msg_id: their done-callbacks run there, at once, whoever waits or not), keeps the clock
(heartbeats, liveness) and carries out the session's actions: a thread blocked in
``Request.wait`` that finds no other reading reads its own reply (no second thread woken per
task), and while no thread waits, the background thread does; a thread whose send found a
message waiting while no thread read reads it itself (``Reading.missed``). The session has one
owner at a time: the holder of ``Links.owned`` (``arm_side.links``).
"""
from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import types
from typing import Any, assert_never

from protocol import errors, header, messages, wire
from protocol.constants import MAX_TASKS_PER_CLIENT, Command
from protocol.task_options import DEFAULT, TaskOptions
from arm_side import interrupts, tracing
from arm_side.links import Links, resume
from arm_side.channel import Channel
from arm_side.reading import Reading, _C, bind_compiled
from arm_side.session import PeerState, Session
from arm_side.steps import Pause, Steps, Wait
from arm_side import task as task_module
from arm_side.task import Request, Task
from vdsp_board.observability.trace import Recorder
from vdsp_board.sockets import zsock

log = logging.getLogger("vdsp.sdk")


class Client:
    """Connection to a SoC through ``transport``'s links, to the servers its ``discovery`` names
    (default: the transport's; ``arm_side.discovery``); ``owner`` is the DDR owner our HELLOs claim
    (``lock_fd``: our fd holding its lock, named in them); ``own_transport``: closing the client
    closes the transport too. ``busy_poll_us`` is accepted and has no effect: a thread that
    waits sleeps on the links, and one spinning would hold the GIL another thread needs."""

    def __init__(self, transport: Any, *, owner: int, connect_timeout_s: float = 20.0, busy_poll_us: int = 0,
                 own_transport: bool = True, lock_fd: int | None = None, discovery: Any = None) -> None:
        self.closed = False
        self.transport, self.own_transport = transport, own_transport
        self.discovery = discovery if discovery is not None else transport.discovery
        self.session = Session(self.discovery.mode, owner, lock_fd)
        try:
            self._open(connect_timeout_s)
        except BaseException:
            with contextlib.suppress(Exception):    # what was not made yet (an interruption)
                self.close()
            raise

    def _open(self, connect_timeout_s: float) -> None:
        transport = self.transport
        self.mode, self.ids, self.pending = self.session.mode, self.session.ids, self.session.pending
        self.core_states, self.event_callbacks = self.session.core_states, self.session.event_callbacks
        self.memory: Any = None  # set by Soc: the MemoryManager for strict-mode hooks
        self.tracer = tracing.sdk_tracer()      # SoC trace stamps (no-ops unless tracing is on)
        self.connect_timeout_s = connect_timeout_s
        self._reconnecting = threading.Lock()
        self.links = Links(self, self.session, transport, self.discovery, self._open_link, self._release_link,
                           self._relay_link, self._wake_reader, owned=threading.RLock(), missed=self._missed,
                           straight=True)
        # getattr through a partial: no Python frame (a lambda was one a task, in the wait's loop)
        self.reading = Reading(self.links, functools.partial(getattr, self, "closed"))
        self._submit_c = None if _C is None else functools.partial(_C.submit, self._submit_lane())
        self._compiled_wait_for()
        # the background thread: reads while no thread waits
        self.reader = threading.Thread(target=self.reading.background, name="vdsp-sdk-reader", daemon=True)
        self.reader.start()
        self._run(self.session.connect(self.discovery, connect_timeout_s, time.monotonic))

    @property
    def peers(self) -> list[PeerState]:
        return self.session.peers

    @property
    def owner(self) -> int:
        """The DDR owner our HELLOs and TASK bodies name (the session's)."""
        return self.session.owner

    @owner.setter
    def owner(self, owner: int) -> None:
        self.session.owner = owner

    # --- connecting -----------------------------------------------------------------------
    def _run(self, steps: Steps) -> None:
        """Carry out a connect sequence of the session (``Session.connect``), blocking: the
        shared runner (``Links.run``) does every step but the waits, done here."""
        runner = self.links.run(steps)
        step = resume(runner)
        while step is not None:
            failed: BaseException | None = None
            try:
                match step:
                    case Wait(request, seconds):
                        try:
                            self.wait_for(request, seconds)
                        except errors.TaskTimeout:
                            pass
                    case Pause(_, seconds):
                        time.sleep(seconds)
                    case _:
                        assert_never(step)
            except BaseException as exc:
                failed = exc        # the session's to handle: thrown in through the runner
            step = resume(runner, failed)

    def _relay_link(self):
        """The relay's link, connected again if it died (a restarted relay answers at the same
        endpoint). Raises RelayUnavailable if none answers (``Session.connect_relay``). Not under
        the session's owner lock (the connect sequence waits, and the reading needs the owner)."""
        if not self.session.peers[0].alive:
            with self._reconnecting:
                peer = self.session.peers[0]
                if not peer.alive:
                    with self.links.owned:
                        self.links.release_peer(peer)
                    try:
                        self._run(self.session.connect_relay(self.discovery, self.connect_timeout_s, time.monotonic))
                    except BaseException:
                        with self.links.owned:
                            self.links.release_peer(self.session.peers[0])
                        raise
        return self.links["relay"]

    def _open_link(self, endpoint: str, name: str, watch: bool, server_key: str = ""):
        return self.transport.open(endpoint, name, watch=watch, server_key=server_key)

    def _release_link(self, link) -> None:
        self.reading.forget(link)       # before its socket (and fd) closes
        self.transport.release(link)

    # --- sending --------------------------------------------------------------------------
    def submit(self, op: int, inputs: list, outputs: list, params: dict, options: TaskOptions = DEFAULT, *,
               out_mems: list | None = None, raw: list | None = None) -> Task:
        """Send a TASK. Raises InvalidArgument / InvalidCore / TaskNumExceedLimit / CoreOffline /
        RelayUnavailable, ApiUseError once closed."""
        if self.closed:
            raise errors.ApiUseError("this SoC connection is closed")
        if self._submit_c is not None and raw is None:      # the compiled build: Links.submit in C
            return self._submit_c(op, inputs, outputs, params, options, out_mems)
        return self.links.submit(op, inputs, outputs, params, options, out_mems=out_mems, raw=raw)

    def _submit_lane(self) -> tuple:
        """What the compiled submit (``arm_side/taskpath.c``, ``submit``) works with: Links.submit's
        objects, in the order the C names them."""
        links, session = self.links, self.session
        return (links, session, links.owned, links.by_key, session.ids, session.pending, header.pack, wire.pack_body,
                Task, self, self.tracer, int(Command.TASK), session.mode == "relay", threading.Lock,
                time.perf_counter, Channel, zsock.fastest("send_frames"), zsock.fastest("readable"), zsock.NOBLOCK,
                MAX_TASKS_PER_CLIENT, Recorder.poll)

    def request(self, msg: wire.Message, peer_name: str | None = None) -> Request:
        """Send a non-task request (QUERY, CONTROL, CANCEL) to the relay or a named core."""
        return self.links.request(self.links.link(self.session.request_link(peer_name)), msg)

    def release(self, task: Task) -> str:
        """CANCEL ``task`` where it is; waits up to 5 s for the answer (``Task.release``)."""
        with self.links.owned:
            key = self.session.cancel_link(task)
            link = self.links.get(key) if key is not None else None
        reply = None
        if link is not None:
            try:
                reply = self.links.request(link, messages.cancel(next(self.ids), task.msg_id)).wait(5000)
            except errors.VdspError:
                pass
        with self.links.owned:
            return self.session.cancelled(task, reply)

    def after_task(self, task: Task) -> None:
        if self.memory is not None:
            for mem in task.outputs:
                self.memory.mark_device_written(mem)

    # --- waiting --------------------------------------------------------------------------
    def wait_for(self, req: Request, timeout_s: float | None) -> None:
        """Block until ``req`` is done, reading the links while no other thread does
        (``arm_side.reading``). Raises TaskTimeout (req stays in flight); ApiUseError in a
        done-callback (it runs in the thread that reads: the reply waited for would never be
        read) or once the connection is closed."""
        if req._done:
            return
        me = threading.get_ident()
        if self.reading.reader == me:       # reading.mine(), without its call
            raise errors.ApiUseError(f"request {req.msg_id}: a done-callback cannot wait for a reply (it runs in "
                                     "the thread that reads the replies, the SDK's reader thread or a waiting one, "
                                     "and this reply would never be read)")
        self.reading.wait(req, timeout_s, me)

    def _compiled_wait_for(self) -> None:
        """The compiled build: this client's ``wait_for`` is ``arm_side/taskpath.c``'s for the usual
        wait (not done, the turn free: this thread leads until the request ends, as Reading.wait
        and Reading._lead do, without their frames) and this class's Python for every other."""
        if _C is not None and type(self).wait_for is Client.wait_for:
            reading = self.reading
            bind_compiled(self, "wait_for", types.MethodType(Client.wait_for, self), _C.wait_for, reading,
                          task_module._THREAD, reading.idle.fileno(), reading._links_fd)

    def _missed(self, link) -> None:
        """A send on ``link`` took in the signal of a message that waits: read it now or kick the
        reader (``Reading.missed``)."""
        self.reading.missed(link)

    def _wake_reader(self) -> None:
        """The thread that sleeps on the links must look again (``Reading.wake``)."""
        self.reading.wake()

    # --- closing --------------------------------------------------------------------------
    def close(self) -> None:
        """Disconnect: DISCONNECT to each live server, every request still in flight fails with
        ApiUseError, the reader ends, the links close."""
        if self.closed:
            return
        # (steps named late: a client whose making was interrupted lacks the later attributes)
        interrupts.each(self._say_goodbye, self._end_reading, self._release_links, self._close_transport,
                        lambda: self.reading.close())

    def _say_goodbye(self) -> None:
        """DISCONNECT to each live server."""
        for peer in self.session.peers:
            link = self.links.get(peer.name)
            if peer.alive and link is not None and not link.closed:
                try:
                    link.goodbye(wire.encode(messages.disconnect()))
                except Exception:
                    pass

    def _end_reading(self) -> None:
        self.closed = True
        self.reading.wake()
        if threading.current_thread() is not self.reader:
            self.reader.join(timeout=2)

    def _release_links(self) -> None:
        with self.links.owned:
            self.session.fail_all(errors.ApiUseError("the SoC connection was closed"))
            self.links.release_all()

    def _close_transport(self) -> None:
        if self.own_transport:
            self.transport.close()

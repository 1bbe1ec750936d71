"""The SDK's asyncio driver: the same :class:`~arm_side.session.Session` (the conversation) and
link table (``arm_side.links``) as the blocking :class:`~arm_side.client.Client`, composed the
same way (no class of one derives from the other), over pyzmq's asyncio sockets, with no thread.

Everything runs on the event loop that opened it, the session's one owner (``arm_side.links``):
one reader coroutine per link feeds the session what arrives (which completes the requests
keyed by msg_id, and so the futures that ``await`` them), one ticker coroutine sends heartbeats
and judges liveness, a monitor coroutine per watched link hears a server's exit. Timeouts are on
those futures, never by cancelling a receive. Submitting sends at once (pyzmq's asyncio send does
not wait short of the high-water mark), so ``rpc`` stays a plain call that raises submission
errors where ``Soc.rpc`` does.

In relay mode, a relay that died is connected again on the next request, as ``Soc`` does; the
requests sent meanwhile wait in order for the new relay and fail with its RelayUnavailable if
none answers.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, assert_never

from protocol import errors, header, messages, wire
from protocol.cancel import CancelOutcome
from protocol.constants import HEARTBEAT_INTERVAL_MS
from protocol.task_options import DEFAULT, TaskOptions
from arm_side import tracing
from arm_side.links import Links, resume
from arm_side.session import PeerState, Session
from arm_side.steps import Pause, Steps, Wait
from arm_side.task import Request, Task

log = logging.getLogger("vdsp.sdk")


class _Waiting:
    """Stands for the relay's link while it is connected again: keeps what is sent, in order."""

    name, closed, peer = "relay", False, None

    def __init__(self) -> None:
        self.frames: list[list] = []

    def send(self, frames: list) -> bool:
        self.frames.append(frames)
        return False


class AsyncClient:
    """Connection to a SoC whose I/O is coroutines on the running event loop: arguments as
    :class:`~arm_side.client.Client`'s. Create it inside the loop, then ``await connect()``; send
    from that loop's thread only (a blocking wait from another thread works; on the loop's own
    thread it would stop the loop that reads the reply, and raises ApiUseError)."""

    def __init__(self, transport: Any, *, owner: int, connect_timeout_s: float = 20.0, own_transport: bool = True,
                 lock_fd: int | None = None, discovery: Any = None) -> None:
        self.transport, self.own_transport = transport, own_transport
        self.discovery = discovery if discovery is not None else transport.discovery
        self.session = Session(self.discovery.mode, owner, lock_fd)
        self.mode, self.ids, self.pending = self.session.mode, self.session.ids, self.session.pending
        self.core_states, self.event_callbacks = self.session.core_states, self.session.event_callbacks
        self.closed = False
        self.memory: Any = None
        self.tracer = tracing.sdk_tracer()
        self.connect_timeout_s = connect_timeout_s
        self.loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._io: dict[int, list[asyncio.Task]] = {}        # id(link) -> its reader (and monitor) tasks
        self._ticker: asyncio.Task | None = None
        self._waiting: _Waiting | None = None               # relay mode: sends while reconnecting
        self._reconnect: asyncio.Task | None = None
        self.links = Links(self, self.session, transport, self.discovery, self._open_link, self._release_link,
                           self._relay_link)

    @property
    def peers(self) -> list[PeerState]:
        return self.session.peers

    @property
    def owner(self) -> int:
        return self.session.owner

    async def connect(self) -> None:
        """HELLO the relay, or each core. Raises RelayUnavailable / CoreOffline as ``Soc()`` does."""
        try:
            await self._run(self.session.connect(self.discovery, self.connect_timeout_s, time.monotonic))
            self._ticker = self.loop.create_task(self._tick_forever())
        except BaseException:
            await self.aclose()
            raise

    async def _run(self, steps: Steps) -> None:
        """Carry out a connect sequence of the session (``Session.connect``), awaiting: the
        shared runner (``Links.run``) does every step but the waits, done here."""
        runner = self.links.run(steps)
        step = resume(runner)
        while step is not None:
            failed: BaseException | None = None
            try:
                match step:
                    case Wait(request, seconds):
                        await asyncio.wait({request._as_future()}, timeout=seconds)
                    case Pause(_, seconds):
                        await asyncio.sleep(seconds)
                    case _:
                        assert_never(step)
            except BaseException as exc:
                failed = exc        # the session's to handle: thrown in through the runner
            step = resume(runner, failed)

    # --- links ------------------------------------------------------------------------------
    def _open_link(self, endpoint: str, name: str, watch: bool, server_key: str = ""):
        link = self.transport.open_async(endpoint, name, watch=watch, server_key=server_key)
        tasks = [self.loop.create_task(self._read(link))]
        if link.monitor is not None:
            tasks.append(self.loop.create_task(link.watch()))
        self._io[id(link)] = tasks
        return link

    def _release_link(self, link) -> None:
        for task in self._io.pop(id(link), []):
            task.cancel()       # closing, not a timeout: the link goes for good
        self.transport.release(link)

    async def _read(self, link) -> None:
        """The one reader of ``link``: each message goes to the session, which completes requests."""
        while not link.closed:
            try:
                incoming = await link.recv()
            except asyncio.CancelledError:
                raise
            except Exception as exc:        # the socket closed under us, or a ZMQError
                if not link.closed:
                    log.warning("reading %s: %s", link.name, exc)
                    await asyncio.sleep(0.05)
                continue
            try:
                self.links.dispatch(link, incoming)
            except Exception:   # the reader must survive anything a peer sends
                log.exception("SDK reader error on %s", link.name)

    def _relay_link(self):
        """The relay's link; while a dead relay is connected again, a stand-in that keeps what
        is sent for the new one (see ``_reconnect_relay``)."""
        if self._waiting is None:       # not reconnecting (a new relay's HELLO goes first, then these)
            if self.session.peers[0].alive:
                return self.links["relay"]
            self._waiting = _Waiting()
            self._reconnect = self.loop.create_task(self._reconnect_relay())
        return self._waiting

    async def _reconnect_relay(self) -> None:
        waiting = self._waiting
        assert waiting is not None
        self.links.release_peer(self.session.peers[0])
        try:
            await self._run(self.session.connect_relay(self.discovery, self.connect_timeout_s, time.monotonic))
        except Exception as exc:
            self.links.release_peer(self.session.peers[0])
            self._waiting = None
            error = exc if isinstance(exc, errors.VdspError) else errors.RelayUnavailable(str(exc))
            for frames in waiting.frames:
                self._fail_sent(frames, error)
            return
        self._waiting = None
        link = self.links["relay"]
        for frames in waiting.frames:
            try:
                link.send(frames)
            except Exception as exc:
                self._fail_sent(frames, errors.RelayUnavailable(f"cannot send to the relay: {exc}"))

    def _fail_sent(self, frames: list, error: errors.VdspError) -> None:
        req = self.session.pending.pop(header.Header.parse(frames[0])[4], None)
        if req is not None:
            req._complete(None, error)

    # --- sending ----------------------------------------------------------------------------
    def submit(self, op: int, inputs: list, outputs: list, params: dict, options: TaskOptions = DEFAULT, *,
               out_mems: list | None = None, raw: list | None = None) -> Task:
        """Send a TASK (as ``Client.submit``)."""
        if self.closed:
            raise errors.ApiUseError("this SoC connection is closed")
        return self.links.submit(op, inputs, outputs, params, options, out_mems=out_mems, raw=raw)

    def request(self, msg: wire.Message, peer_name: str | None = None) -> Request:
        """Send a non-task request (QUERY, CONTROL, CANCEL) to the relay or a named core."""
        return self.links.request(self.links.link(self.session.request_link(peer_name)), msg)

    def after_task(self, task: Task) -> None:
        if self.memory is not None:
            for mem in task.outputs:
                self.memory.mark_device_written(mem)

    # --- waiting and cancelling, for Request and Task ----------------------------------------
    def _on_loop(self, what: str) -> None:
        if threading.get_ident() == self._loop_thread:
            raise errors.ApiUseError(f"{what} belongs to an AsyncSoc: await it (a blocking wait on the event "
                                     "loop's thread would stop the loop that reads its reply)")

    def wait_for(self, req: Request, timeout_s: float | None) -> None:
        """``Request.wait`` from a thread other than the loop's: block until the loop's reader
        completes ``req``. Raises ApiUseError on the loop's thread, TaskTimeout, ApiUseError once closed."""
        if req._done:
            return
        self._on_loop(f"request {req.msg_id}")
        req._block(timeout_s, lambda: self.closed)

    def release(self, task: Task) -> str:
        """``Task.release`` from a thread other than the loop's (ApiUseError on it: ``await
        release_task(task)`` there, ``arm_side.aio``)."""
        self._on_loop(f"task {task.msg_id} (release it with 'await release_task(task)' or 'await async_task.release()')")
        return asyncio.run_coroutine_threadsafe(self.release_async(task), self.loop).result()

    async def release_async(self, task: Task) -> str:
        """``Client.release``, awaited: CANCEL the task where it is, wait up to 5 s for the answer."""
        waiting = self._waiting
        if waiting is not None:        # not sent yet (a relay is being connected again): it never runs
            kept = [f for f in waiting.frames if header.Header.parse(f[0]).msg_id != task.msg_id]
            if len(kept) < len(waiting.frames):
                waiting.frames[:] = kept
                return self.session.cancelled(task, {"state": CancelOutcome.CANCELLED.value})
        key = self.session.cancel_link(task) if waiting is None else None
        link = self.links.get(key) if key is not None else None
        reply = None
        if link is not None:
            try:
                reply = await self.ask(link, messages.cancel(next(self.ids), task.msg_id), 5000)
            except errors.VdspError:
                pass
        return self.session.cancelled(task, reply)

    async def ask(self, link, msg: wire.Message, timeout_ms: float) -> dict:
        """Send ``msg`` on ``link`` and await the reply body (TaskTimeout after ``timeout_ms``)."""
        from arm_side.aio import wait_request
        req = self.links.request(link, msg)
        try:
            return await wait_request(req, timeout_ms)
        finally:
            self.session.forget(req.msg_id)

    # --- the clock --------------------------------------------------------------------------
    async def _tick_forever(self) -> None:
        while not self.closed:
            try:
                self.links.tick(time.monotonic())
            except Exception:
                log.exception("SDK ticker error")
            await asyncio.sleep(HEARTBEAT_INTERVAL_MS / 4000)

    # --- closing ----------------------------------------------------------------------------
    def close(self) -> None:
        """Disconnect at once (no wait): DISCONNECT to each live server, every request still in
        flight fails with ApiUseError, the links and their coroutines end."""
        if self.closed:
            return
        for peer in self.session.peers:
            link = self.links.get(peer.name)
            if peer.alive and link is not None and not link.closed:
                try:
                    link.send(wire.encode(messages.disconnect()))
                except Exception:
                    pass
        self.closed = True
        for task in (self._ticker, self._reconnect):
            if task is not None:
                task.cancel()
        self.session.fail_all(errors.ApiUseError("the SoC connection was closed"))
        self.links.release_all()
        if self.own_transport:
            self.transport.close()

    async def aclose(self) -> None:
        """``close``, then let the cancelled coroutines finish."""
        tasks = [t for ts in self._io.values() for t in ts] + [t for t in (self._ticker, self._reconnect) if t]
        self.close()
        current = asyncio.current_task()
        await asyncio.gather(*(t for t in tasks if t is not current), return_exceptions=True)

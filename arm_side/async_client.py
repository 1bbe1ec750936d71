"""The SDK's asyncio client: the same :class:`~arm_side.session.Session` (the conversation) as
the blocking :class:`~arm_side.client.Client`, over pyzmq's asyncio sockets, with no thread.

Everything runs on the event loop that opened it: one reader coroutine per link feeds the
session what arrives (which completes the requests keyed by msg_id, and so the futures that
``await`` them), one ticker coroutine sends heartbeats and judges liveness, a monitor coroutine
per watched link hears a server's exit. Timeouts are on those futures, never by cancelling a
receive. Submitting sends at once (pyzmq's asyncio send does not wait short of the high-water
mark), so ``rpc`` stays a plain call that raises submission errors where ``Soc.rpc`` does.

In relay mode, a relay that died is connected again on the next request, as ``Soc`` does; the
requests sent meanwhile wait in order for the new relay and fail with its RelayUnavailable if
none answers.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from protocol import errors, header, messages, wire
from protocol.cancel import CancelOutcome
from protocol.constants import HEARTBEAT_INTERVAL_MS
from arm_side import tracing
from arm_side.busy_retry import BusyRetry
from arm_side.client import Client
from arm_side.connect_wait import CoreWait, RelayWait
from arm_side.session import PeerState, Session
from arm_side.task import Request, Task
from arm_side.transport import Transport
from vdsp_board.procfacts import ProcFacts

log = logging.getLogger("vdsp.sdk")


class _Waiting:
    """Stands for the relay's link while it is connected again: keeps what is sent, in order."""

    name, closed, peer = "relay", False, None

    def __init__(self) -> None:
        self.frames: list[list] = []

    def send(self, frames: list) -> list:
        self.frames.append(frames)
        return []


class AsyncClient(Client):
    """A :class:`Client` whose I/O is coroutines on the running event loop. Create it inside the
    loop, then ``await connect()``; use it from that loop's thread only. What it shares with
    ``Client`` (sending, routing, carrying out the session's actions) is inherited; what
    blocks there (waiting, connecting, cancelling, the reader thread) is replaced here."""

    def __init__(self, transport: Transport, *, owner: int, connect_timeout_s: float = 20.0,
                 own_transport: bool = True, lock_fd: int | None = None) -> None:
        self.transport, self.owner, self.own_transport = transport, owner, own_transport
        self.session = Session(transport.mode, owner, lock_fd)
        self.mode, self.ids, self.pending = transport.mode, self.session.ids, self.session.pending
        self.core_states, self.event_callbacks = self.session.core_states, self.session.event_callbacks
        self.links: dict[str, Any] = {}
        self.closed = False
        self.memory: Any = None
        self.tracer = tracing.sdk_tracer()
        self.connect_timeout_s = connect_timeout_s
        self._facts = ProcFacts()
        self.loop = asyncio.get_running_loop()
        self._io: dict[int, list[asyncio.Task]] = {}        # id(link) -> its reader (and monitor) tasks
        self._ticker: asyncio.Task | None = None
        self._waiting: _Waiting | None = None               # relay mode: sends while reconnecting
        self._reconnect: asyncio.Task | None = None

    async def connect(self) -> None:
        """HELLO the relay, or each core. Raises RelayUnavailable / CoreOffline as ``Soc()`` does."""
        try:
            self.transport.before_hello(self.owner)
            if self.mode == "relay":
                await self._connect_relay_async()
            else:
                await self._connect_direct_async()
            self._ticker = self.loop.create_task(self._tick_forever())
        except BaseException:
            await self.aclose()
            raise

    # --- links ------------------------------------------------------------------------------
    def _open(self, endpoint: str, name: str, watch: bool = False, server_key: str = ""):
        link = self.transport.open_async(endpoint, name, watch=watch, server_key=server_key)
        tasks = [self.loop.create_task(self._read(link))]
        if watch:
            tasks.append(self.loop.create_task(link.watch()))
        self._io[id(link)] = tasks
        return link

    def _release_link(self, link) -> None:
        for task in self._io.pop(id(link), []):
            task.cancel()       # closing, not a timeout: the link goes for good
        self.transport.release(link)

    def _close_links(self, peer: PeerState) -> None:
        for key in (peer.name, f"{peer.name}.fw"):
            link = self.links.pop(key, None)
            if link is not None:
                self._release_link(link)

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
                self._dispatch_all(link, incoming)
            except Exception:   # the reader must survive anything a peer sends
                log.exception("SDK reader error on %s", link.name)

    # --- connecting -------------------------------------------------------------------------
    async def _ready(self, link, wait: RelayWait | CoreWait) -> dict:
        """Say HELLO on ``link``; the READY, waited for in the slices ``wait`` gives (it raises when
        to give up). A HELLO answered HB_DSP_BUSY is said again after a pause
        (``arm_side.busy_retry``) within the connect timeout."""
        busy = BusyRetry(time.monotonic() + self.connect_timeout_s)
        while True:
            req = self._request(link, self.session.hello())
            try:
                fut = req._as_future()
                while not fut.done():
                    await asyncio.wait({fut}, timeout=wait.next_slice(time.monotonic()))
                return fut.result()
            except errors.CoreBusy as exc:
                if isinstance(wait, RelayWait):
                    wait.answered()
                await asyncio.sleep(busy.pause(exc, time.monotonic()))
            finally:
                self.session.forget(req.msg_id)

    async def _connect_relay_async(self) -> None:
        endpoint = self.transport.servers()["relay"]
        link = self._open(endpoint, "relay", watch=True)
        peer = PeerState("relay", time.monotonic())
        link.peer = peer
        self.session.peers[:] = [peer]
        self.links["relay"] = link
        try:
            info = await self._ready(link, RelayWait(self.transport, endpoint, self.connect_timeout_s,
                                                     time.monotonic()))
        except BaseException:
            peer.alive = False
            self._close_links(peer)
            raise
        link.take_gone()    # forget a connection that closed before this READY came
        self._carry_out(self.session.connected(peer, info, time.monotonic()))

    async def _connect_direct_async(self) -> None:
        now = time.monotonic()
        for name, endpoint in self.transport.servers().items():
            link = self._open(endpoint, name, watch=True)
            peer = PeerState(name, now)
            link.peer = peer
            self.session.peers.append(peer)
            self.links[name] = link
            try:
                info = await self._ready(link, CoreWait(self.transport, endpoint, self.connect_timeout_s,
                                                        time.monotonic()))
            except errors.TaskTimeout as exc:
                log.warning("core %s does not answer at %s: %s", name, endpoint, exc.message)
                self._release_link(self.links.pop(name))
                peer.alive = False
                self.core_states[name] = "unreachable"
                continue
            self._carry_out(self.session.connected(peer, info, time.monotonic()))
        if not any(p.alive for p in self.session.peers):
            raise errors.CoreOffline("no DSP core answers: is the SoC up? (vdsp up -d)")

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
        self._close_links(self.session.peers[0])
        try:
            await self._connect_relay_async()
        except Exception as exc:
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

    # --- what blocks in Client --------------------------------------------------------------
    def wait_for(self, req: Request, timeout_s: float | None) -> None:
        """A blocking wait would stop the loop that reads the reply: refused."""
        raise errors.ApiUseError(f"request {req.msg_id} belongs to an AsyncSoc: await it (a blocking wait "
                                 "would stop the event loop that reads its reply)")

    def need_reader(self) -> None:
        """The readers always run: nothing to start."""

    def reader_released(self) -> None:
        pass

    def _notify(self) -> None:
        pass

    def release(self, task: Task) -> str:
        raise errors.ApiUseError(f"task {task.msg_id} belongs to an AsyncSoc: 'await release_task(task)' "
                                 "(arm_side.aio) or 'await async_task.release()'")

    async def release_async(self, task: Task) -> str:
        """``Client.release``, awaited: CANCEL the task where it is, wait up to 5 s for the answer."""
        link = None
        waiting = self._waiting
        if waiting is not None:        # not sent yet (a relay is being connected again): it never runs
            kept = [f for f in waiting.frames if header.Header.parse(f[0]).msg_id != task.msg_id]
            if len(kept) < len(waiting.frames):
                waiting.frames[:] = kept
                return self.session.cancelled(task, {"state": CancelOutcome.CANCELLED.value})
        elif self.mode == "relay" and self.session.peers[0].alive:
            link = self.links.get("relay")
        elif self.mode == "direct":
            peer = next((p for p in self.session.peers if task.msg_id in p.inflight), None)
            link = self.links.get(f"{peer.name}.fw") if peer is not None else None
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
        req = self._request(link, msg)
        try:
            return await wait_request(req, timeout_ms)
        finally:
            self.session.forget(req.msg_id)

    # --- the clock --------------------------------------------------------------------------
    async def _tick_forever(self) -> None:
        while not self.closed:
            try:
                self._tick(time.monotonic())
            except Exception:
                log.exception("SDK ticker error")
            await asyncio.sleep(HEARTBEAT_INTERVAL_MS / 4000)

    def _tick(self, now: float) -> None:
        def gone(peer: PeerState) -> bool:
            link = self.links.get(peer.name)
            return link is not None and not isinstance(link, _Waiting) and link.take_gone()
        actions = self.session.tick(now, gone, self._fact)
        if actions:
            self._carry_out(actions)

    def _carry_out(self, actions: list) -> None:
        # Client._carry_out releases links through the transport; ours have coroutines to stop too
        from arm_side.session import CLOSE_FW, OPEN_FW
        for action in actions:
            kind, peer, _ = action
            if kind in (CLOSE_FW, OPEN_FW):
                old = self.links.pop(f"{peer.name}.fw", None)
                if old is not None:
                    self._release_link(old)
            super()._carry_out([action])

    # --- closing ----------------------------------------------------------------------------
    def close(self) -> None:
        """Disconnect at once (no wait): DISCONNECT to each live server, every request still in
        flight fails with ApiUseError, the links and their coroutines end."""
        if self.closed:
            return
        for peer in self.session.peers:
            link = self.links.get(peer.name)
            if peer.alive and link is not None and not link.closed and not isinstance(link, _Waiting):
                try:
                    link.send(wire.encode(messages.disconnect()))
                except Exception:
                    pass
        self.closed = True
        for task in (self._ticker, self._reconnect):
            if task is not None:
                task.cancel()
        self.session.fail_all(errors.ApiUseError("the SoC connection was closed"))
        for link in list(self.links.values()):
            if not isinstance(link, _Waiting):
                self._release_link(link)
        self.links.clear()
        if self.own_transport:
            self.transport.close()

    async def aclose(self) -> None:
        """``close``, then let the cancelled coroutines finish."""
        tasks = [t for ts in self._io.values() for t in ts] + [t for t in (self._ticker, self._reconnect) if t]
        self.close()
        current = asyncio.current_task()
        await asyncio.gather(*(t for t in tasks if t is not current), return_exceptions=True)

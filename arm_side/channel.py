"""The SDK's ZeroMQ links: one DEALER socket each, for the blocking client (:class:`Channel`:
one thread at a time receives, ``arm_side.reading``; any thread sends) or owned by an event loop
(:class:`AsyncChannel`).

ZeroMQ sockets are not thread-safe, so every call on a :class:`Channel`'s socket (and on its
monitor) happens under ``lock``; the thread that reads only sleeps on ``fd`` outside it. That FD is
edge-triggered: any socket call (a send too) may take in the signal of a message that arrived
meanwhile, and a thread sleeping on the FD then misses it. ``send`` therefore says when a message
waits while a reader may sleep on it (``watched``), and the sender wakes the reader.
"""
from __future__ import annotations

import struct
import threading
import time
from typing import TYPE_CHECKING, Any

import zmq

from arm_side import interrupts
from protocol import errors
from vdsp_board.identity import curve
from vdsp_board.sockets import ipclink
from vdsp_board.sockets.zsock import NOBLOCK as _NOBLOCK, drain, readable, send_frames

if TYPE_CHECKING:     # imported by the transport that opens an AsyncChannel (arm_side.soc says why)
    import zmq.asyncio

# How long closing waits for a link's lock. Its holders never block, so it is free at once unless
# an interruption left it held (a signal's exception at an unlucky moment, seen once in CI):
# closing then goes on without it instead of waiting for ever.
CLOSE_WAIT_S = 2.0
HANDSHAKE_FAILURES = 5      # handshakes failed without a word (a wrong server key) before we say so,
HANDSHAKE_FAILING_S = 5.0   # over so long at least: a server closes handshakes when many open at once
_HANDSHAKE = (zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
              | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)


def _dealer(ctx, endpoint: str, name: str, server_key: str, events: int):
    """A DEALER toward ``endpoint`` (blocking or asyncio, as ``ctx`` makes them), connected as
    ``vdsp_board.sockets.ipclink`` says (over ipc: once, through its checked directory); the LinkDir to
    close with it; its monitor of ``events`` (None for 0), made before it connects, so that it
    hears how the connection attempt ended. ``server_key``: the server's own CURVE key on tcp
    (a firmware's), else the SoC's. Raises RelayUnavailable (the relay's link) / CoreOffline (a
    core's) when an ipc endpoint's directory is gone or refused."""
    with interrupts.uninterrupted():    # both recorded in ctx (for its destroy) before a handler runs
        sock = ctx.socket(zmq.DEALER)
        try:
            monitor = sock.get_monitor_socket(events) if events else None
        except BaseException:
            sock.close(0)
            raise
    try:
        sock.linger = 0
        sock.sndhwm = sock.rcvhwm = 100000
        curve.secure_client(sock, endpoint, server_key=server_key)
        pin = ipclink.connect(sock, endpoint, errors.RelayUnavailable if name == "relay" else errors.CoreOffline)
    except BaseException:
        _close(sock, monitor)
        raise
    return sock, pin, monitor


def _close(sock, monitor) -> None:
    """Close a link's socket and its monitor, uninterrupted: pyzmq's close forgets a socket
    (for its context's ``destroy``) before it closes it (``arm_side.interrupts``)."""
    with interrupts.uninterrupted():
        if monitor is not None:
            try:
                sock.disable_monitor()
            except zmq.ZMQError:
                pass
            monitor.close(0)
        sock.close(0)


class Watch:
    """What a link's socket monitor told: ``gone`` once its connection closed (a watched link: its
    server exited; over tcp: a connection whose handshake had succeeded), ``refusal`` once a server
    refused our CURVE handshake (tcp), ``link``: whether an ipc link, connected once, is ``dead``
    (``vdsp_board.sockets.ipclink.LinkState``).

    Over tcp a connection closed before its handshake succeeded is neither: a server closes
    handshakes beyond those it keeps at once (PROTOCOL.md §3.4), nothing we sent went on it (it
    waits in the socket's queue), and ZeroMQ connects again by itself. A wrong server key looks
    the same from here (the server drops the handshake without a word): it is told once
    HANDSHAKE_FAILURES handshakes failed over HANDSHAKE_FAILING_S at least, none succeeding."""

    def __init__(self, watch: bool, endpoint: str = "") -> None:
        self.watch, self.tcp = watch, curve.is_tcp(endpoint)
        self.gone = False
        self.up = False                         # tcp: the connection's handshake succeeded
        self.failures = 0
        self.failing_since: float | None = None
        self.refusal: str | None = None
        self.link = ipclink.LinkState(ipclink.is_ipc(endpoint))

    @staticmethod
    def events(watch: bool, endpoint: str) -> int:
        """The monitor events to ask for (0: no monitor): an ipc link's always (whether it is dead)."""
        return ((zmq.EVENT_DISCONNECTED if watch else 0) | (_HANDSHAKE if curve.is_tcp(endpoint) else 0)
                | (ipclink.EVENTS if ipclink.is_ipc(endpoint) else 0))

    def heard(self, frames: list) -> None:
        """One monitor message."""
        if len(frames) != 2 or len(frames[0]) != 6:
            return
        event, value = struct.unpack("=hi", frames[0])
        event &= 0xFFFF
        self.link.heard(event)
        if event == zmq.EVENT_DISCONNECTED:
            self.gone = self.gone or (self.watch and (self.up or not self.tcp))
            self.up = False
        elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self.failures, self.failing_since, self.up = 0, None, True
        elif event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            self.refusal = (f"the server did not accept this client key (ZAP status {value}: not on its "
                            "allow-list, or revoked)")
        elif event & (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
            self.failures += 1     # a wrong server key: the server drops every handshake
            now = time.monotonic()
            self.failing_since = self.failing_since if self.failing_since is not None else now
            if (self.failures >= HANDSHAKE_FAILURES and now - self.failing_since >= HANDSHAKE_FAILING_S
                    and self.refusal is None):
                self.refusal = (f"the server did not accept this client's CURVE handshake "
                                f"{self.failures} times: is VDSP_SERVER_KEY the key of this server?")

    def take_gone(self) -> bool:
        gone, self.gone = self.gone, False
        return gone

    def connection(self) -> str:
        """What became of the link's connection, as far as its monitor told: 'connected' (over
        tcp: its handshake succeeded), 'connecting', 'failed' (an ipc link's one attempt), 'closed'
        (an ipc link's connection)."""
        link = self.link
        if link.once:
            return "failed" if link.failed else "closed" if link.ended else "connected" if link.up else "connecting"
        return "connected" if self.up else "connecting"


class Channel:
    """A link of the blocking client. ``watch``: :meth:`lost` tells when its server goes away."""

    def __init__(self, ctx: zmq.Context, endpoint: str, name: str, watch: bool = False,
                 server_key: str = "") -> None:
        self.endpoint, self.name = endpoint, name
        self.peer = None  # the session's PeerState this channel belongs to (set by the client)
        self.lock = threading.Lock()
        sock, self.pin, self.monitor = _dealer(ctx, endpoint, name, server_key, Watch.events(watch, endpoint))
        self.sock = sock
        self.fd = sock.getsockopt(zmq.FD)
        self.closed = False
        self.state = Watch(watch, endpoint)
        # a reader may sleep on ``fd`` (set once the reading takes the link in): a send may take in
        # the FD's edge for a message that came meanwhile, and then says so (the sender wakes it)
        self.watched = False

    def send(self, frames: list) -> bool:
        """Send a multipart message. True if a message waits that a reader, asleep on ``fd``,
        would miss (wake it); checked only while ``watched`` (an EVENTS read costs ~1 µs).

        Never blocks: a DEALER whose connection ended in a refused handshake (its server denied
        our key) has nowhere to queue a message, and a blocking send would wait forever, under
        the lock every other use of the link needs. Raises RelayUnavailable then (or with
        ``sndhwm`` messages waiting to go)."""
        with self.lock:
            if self.closed:
                return False
            try:
                send_frames(self.sock, frames, _NOBLOCK)
            except zmq.Again as exc:
                raise self.failed_send(exc) from None
            return self.watched and readable(self.sock)

    def failed_send(self, exc: BaseException) -> BaseException:
        """What :meth:`send` raises for ``exc``, which its socket's send raised: RelayUnavailable
        for a connection that takes no messages (zmq.Again), else ``exc`` itself."""
        if not isinstance(exc, zmq.Again):
            return exc
        return errors.RelayUnavailable(
            f"cannot send to {self.name} at {self.endpoint}: the connection takes no messages (its server "
            f"refused this client's key or closed the connection, or {self.sock.sndhwm} messages wait "
            "to go)")

    def drain(self) -> list[list]:
        """Every message waiting now (non-blocking, ``vdsp_board.sockets.zsock.drain``): the
        edge-triggered FD is armed after it, so a sleep on the FD wakes for the next message."""
        with self.lock:
            if self.closed:
                return []
            return drain(self.sock)

    def _look(self) -> Watch:
        """Read the monitor (under the lock) into ``state``."""
        with self.lock:
            while self.monitor is not None and not self.closed:
                try:
                    self.state.heard(self.monitor.recv_multipart(zmq.NOBLOCK))
                except zmq.ZMQError:
                    break
        return self.state

    def lost(self) -> bool:
        """True if the connection closed since the last look (a watched link: its server is gone)."""
        return self._look().take_gone()

    def dead(self) -> str:
        """Why this ipc link will never carry a message again (``vdsp_board.sockets.ipclink.LinkState``):
        ``failed`` (its one connection attempt failed), ``ended`` (its connection closed); ''
        while it may. A new link must be made."""
        return self._look().link.dead

    def linked(self) -> str:
        """What became of this link's connection (``Watch.connection``)."""
        return self._look().connection()

    def refused(self) -> str | None:
        refusal = self._look().refusal
        return None if refusal is None else f"{refusal} at {self.endpoint} ({self.name}; {_our_key()})"

    def goodbye(self, frames: list) -> None:
        """Send ``frames`` (a DISCONNECT) if the link is free within CLOSE_WAIT_S, else not."""
        if self.lock.acquire(timeout=CLOSE_WAIT_S):
            try:
                if not self.closed:
                    send_frames(self.sock, frames, _NOBLOCK)
            except zmq.ZMQError:
                pass
            finally:
                self.lock.release()

    def close(self) -> None:
        """Close the link: under its lock, or without it after CLOSE_WAIT_S (a lock left held
        must not hold the process: no one uses a closed link's socket, ``closed`` says so)."""
        held = self.lock.acquire(timeout=CLOSE_WAIT_S)
        try:
            if self.closed:
                return
            self.closed = True
            _close(self.sock, self.monitor)
            if self.pin is not None:
                self.pin.close()
        finally:
            if held:
                self.lock.release()


class AsyncChannel:
    """One DEALER socket of pyzmq's asyncio flavour (``zmq.asyncio``), used from its event
    loop's thread only: no lock. ``send`` queues a message (at once, short of the high-water
    mark); one reader coroutine per channel takes the replies (``arm_side.async_client``), one
    more reads its monitor (``watch``: a disconnect; over tcp: a refused handshake)."""

    def __init__(self, ctx: zmq.asyncio.Context, endpoint: str, name: str, watch: bool = False,
                 server_key: str = "") -> None:
        self.endpoint, self.name = endpoint, name
        self.peer = None
        sock, self.pin, self.monitor = _dealer(ctx, endpoint, name, server_key, Watch.events(watch, endpoint))
        self.sock = sock
        self._plain: zmq.Socket = zmq.Socket.shadow(sock.underlying)   # the same socket, drained without futures
        self.state = Watch(watch, endpoint)
        self.closed = False

    def send(self, frames: list) -> bool:
        """Queue a multipart message; raises the socket's ZMQError if it cannot go. False: the
        reader coroutine misses nothing (pyzmq looks at EVENTS before it sleeps)."""
        if self.closed:
            return False
        fut: Any = self.sock.send_multipart(frames)    # an asyncio Future
        if fut.done():
            fut.result()        # raises what the send raised
        return False

    async def recv(self) -> list[list]:
        """The next message and every one waiting behind it. The wait goes through pyzmq's
        asyncio socket, which looks at the socket's events before it sleeps on the edge-triggered
        FD, so a message left by the drain is never missed."""
        out = [await self.sock.recv_multipart()]
        plain = self._plain
        while len(out) < 256:
            try:
                out.append(plain.recv_multipart(_NOBLOCK))
            except zmq.Again:
                break
        return out

    async def watch(self) -> None:
        """Read the monitor until the channel closes."""
        assert self.monitor is not None
        while not self.closed:
            self.state.heard(await self.monitor.recv_multipart())

    def lost(self) -> bool:
        return self.state.take_gone()

    def dead(self) -> str:
        return self.state.link.dead

    def linked(self) -> str:
        return self.state.connection()

    def refused(self) -> str | None:
        refusal = self.state.refusal
        return None if refusal is None else f"{refusal} at {self.endpoint} ({self.name}; {_our_key()})"

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        _close(self.sock, self.monitor)
        if self.pin is not None:
            self.pin.close()


def _our_key() -> str:
    try:
        return f"client key {curve.client_key_file()}, public key {curve.client_public_key()[:8]}..."
    except Exception:       # the key file went away meanwhile: the refusal is the news
        return f"client key {curve.client_key_file()}"

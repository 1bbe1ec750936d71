"""How the SDK reaches a SoC's servers: a link factory. It opens a link to an endpoint
(:meth:`Transport.open`), closes it for good (:meth:`Transport.release`), and tells what became
of one: its server went away (:meth:`Transport.lost`), refused our key (:meth:`Transport.refused`),
or it carries nothing more (:meth:`Transport.dead`: an ipc link is connected once).

A link is an object with ``send(frames) -> bool`` (True: wake the reader, see
``arm_side.channel``), ``drain() -> [frames, ...]`` (what waits now), ``fd`` (readable while
something may wait), ``closed``, ``name`` and ``endpoint``. Which servers there are and what to do
while one does not answer is not the links' business: that is the transport's ``discovery``
(``arm_side.discovery``).

- :class:`ZmqTransport` (``relay`` or ``direct``): ZeroMQ DEALER sockets, CURVE over tcp, the
  runtime dir's endpoints (``discovery.RuntimeDir``). ``Soc(mode="relay")`` is a shorthand for it.
- ``vdsp_sim.soc.loopback.LoopbackTransport``: the relay engine, the core engines and the firmware
  in this process, for tests without processes (its discovery: ``discovery.Servers``).
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zmq

from protocol import errors
from arm_side import interrupts
from arm_side.channel import AsyncChannel, Channel
from arm_side.discovery import RuntimeDir

if TYPE_CHECKING:
    import zmq.asyncio


class Transport:
    """The interface (and what a transport without processes inherits)."""

    discovery: Any = None       # where its servers are (``arm_side.discovery``)

    @property
    def mode(self) -> str:
        """``relay`` (one server, the relay) or ``direct`` (one per core): its discovery's."""
        return self.discovery.mode

    def open(self, endpoint: str, name: str, *, watch: bool = False, server_key: str = ""):
        """A link to ``endpoint``; ``watch``: :meth:`lost` will tell when its server goes away;
        ``server_key``: the server's own CURVE key on tcp (a firmware's), else the SoC's."""
        raise NotImplementedError

    def open_async(self, endpoint: str, name: str, *, watch: bool = False, server_key: str = ""):
        """An asyncio link (``arm_side.channel.AsyncChannel``) for ``arm_side.AsyncSoc``.
        Raises ApiUseError: this transport has none."""
        raise errors.ApiUseError(f"{type(self).__name__} has no asyncio links: use Soc with it")

    def release(self, link) -> None:
        """Close ``link`` for good."""
        link.close()

    def lost(self, link) -> bool:
        """True if ``link``'s connection closed since the last look (its server is gone)."""
        return False

    def refused(self, link) -> str | None:
        """Why ``link``'s server refused our key (the CURVE handshake failed), or None."""
        return None

    def dead(self, link) -> str:
        """Why ``link`` will never carry a message again, '' while it may. An ipc link is connected
        once (``vdsp_board.sockets.ipclink``): ``failed`` (its attempt failed: nothing sent on it arrived)
        or ``ended`` (its connection closed). Make a new one then."""
        return ""

    def linked(self, link) -> str:
        """What became of ``link``'s connection (``Channel.linked``), '' if this transport cannot tell."""
        return ""

    def close(self) -> None:
        pass


class _SharedContext:
    """The process's one ZeroMQ context for its transports: every Soc of a process shares one
    I/O thread (as one context's sockets do), which wakes once for what several Socs send
    together instead of once each. Made at the first transport, terminated when the last
    closes; a forked child makes its own (a context does not survive fork)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ctx: zmq.Context | None = None
        self.pid = 0
        self.users = 0

    def acquire(self) -> zmq.Context:
        with self.lock:
            if self.ctx is None or self.pid != os.getpid():
                self.ctx, self.pid, self.users = zmq.Context(), os.getpid(), 0
            self.users += 1
            return self.ctx

    def release(self, ctx: zmq.Context) -> None:
        with self.lock:
            if ctx is not self.ctx:     # a parent's (before fork): not ours to end
                return
            self.users -= 1
            if self.users > 0:
                return
            self.ctx = None
        # every transport closed its links; a socket still open is one an interruption (a
        # signal's exception) orphaned while it was being made: term() would wait for it forever
        ctx.destroy(linger=0)


_CONTEXT = _SharedContext()


class ZmqTransport(Transport):
    """ZeroMQ links to the SoC of runtime dir ``rt`` (default: ``$VDSP_RUNTIME_DIR``); ``mode`` and
    ``autostart_relay`` are its discovery's (``discovery.RuntimeDir``)."""

    def __init__(self, mode: str = "relay", rt: Path | None = None, *, autostart_relay: bool = True) -> None:
        self.discovery = RuntimeDir(mode, rt, autostart_relay=autostart_relay)
        self.actx: zmq.asyncio.Context | None = None
        self._ctx_held = False
        try:
            with interrupts.uninterrupted():    # held and said so at once (arm_side.interrupts)
                self.ctx = _CONTEXT.acquire()
                self._ctx_held = True
        except BaseException:       # a signal's, due after the block
            self.close()
            raise

    def open(self, endpoint: str, name: str, *, watch: bool = False, server_key: str = "") -> Channel:
        """A link whose monitor hears its server's exit (``watch``) and, over tcp, a refused key: at once."""
        return Channel(self.ctx, endpoint, name, watch, server_key)

    def open_async(self, endpoint: str, name: str, *, watch: bool = False, server_key: str = "") -> AsyncChannel:
        if self.actx is None:
            import zmq.asyncio      # for AsyncSoc only (arm_side.soc says why)
            self.actx = zmq.asyncio.Context.shadow(self.ctx)    # the same context: one term() ends both
        return AsyncChannel(self.actx, endpoint, name, watch, server_key)

    def lost(self, link: Channel | AsyncChannel) -> bool:
        return link.lost()

    def refused(self, link: Channel | AsyncChannel) -> str | None:
        return link.refused()

    def dead(self, link: Channel | AsyncChannel) -> str:
        return link.dead()

    def linked(self, link: Channel | AsyncChannel) -> str:
        return link.linked()

    def close(self) -> None:
        if self._ctx_held:
            self._ctx_held = False
            if self.actx is not None:   # sockets orphaned by an interruption (_SharedContext.release)
                for sock in list(getattr(self.actx, "_sockets", None) or ()):    # pyzmq's own record
                    if not sock.closed:
                        sock.close(linger=0)
            _CONTEXT.release(self.ctx)

"""How the SDK reaches a SoC: the seam between the client (``arm_side.client``: threads and the
conversation, through ``arm_side.session``) and the links that carry its messages.

A transport says which servers there are (:meth:`Transport.servers`: the relay, or each
core's control endpoint), opens a link to an endpoint (:meth:`Transport.open`: an object with
``send(frames) -> replies waiting``, ``drain()``, ``fd`` to select on, ``closed``; closed by
:meth:`Transport.release`), tells
when a link's server went away (:meth:`Transport.lost`) and what to do when a local relay does
not answer (:meth:`Transport.unanswered`).

- :class:`ZmqTransport` (``relay`` or ``direct``): ZeroMQ DEALER sockets, CURVE over tcp, the
  runtime dir's endpoints. ``Soc(mode="relay")`` is a shorthand for it.
- ``vdsp_sim.loopback.LoopbackTransport``: the relay engine, the core engines and the firmware
  in this process, for tests without processes.
"""
from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import zmq
import zmq.asyncio

from arm_side import autostart
from arm_side.channel import AsyncChannel, Channel
from vdsp_board import acl, curve, ddr, rundir


class Transport:
    """The interface (and what a transport without processes inherits)."""

    mode = "relay"                  # "relay": one server, the relay; "direct": one per core
    may_autostart = False

    def servers(self) -> dict[str, str]:
        """Name -> endpoint of each server to HELLO: {"relay": …} or {"vdsp0": …, "vdsp1": …}."""
        raise NotImplementedError

    def open(self, endpoint: str, name: str, *, watch: bool = False, server_key: str = ""):
        """A link to ``endpoint``; ``watch``: :meth:`lost` will tell when its server goes away;
        ``server_key``: the server's own CURVE key on tcp (a firmware's), else the SoC's."""
        raise NotImplementedError

    def open_async(self, endpoint: str, name: str, *, watch: bool = False, server_key: str = ""):
        """An asyncio link (``arm_side.channel.AsyncChannel``) for ``arm_side.AsyncSoc``.
        Raises ApiUseError: this transport has none."""
        from protocol import errors
        raise errors.ApiUseError(f"{type(self).__name__} has no asyncio links: use Soc with it")

    def release(self, link) -> None:
        """Close ``link`` for good."""
        link.close()

    def firmware_endpoint(self, announced: str, control: str) -> str:
        """Where to reach a firmware a core announced at ``announced`` (its control: ``control``)."""
        return announced

    def lost(self, link) -> bool:
        """True if ``link``'s connection closed since the last look (its server is gone)."""
        return False

    def before_hello(self, owner: int) -> None:
        """Whatever must exist before the first HELLO can prove ``owner``."""

    def unanswered(self, endpoint: str):
        """An ``autostart.Plan`` for a relay that does not answer, or None to just keep waiting."""
        return None

    def wait_problem(self, plan) -> str | None:
        """Why waiting longer for the relay of ``plan`` is pointless now; None to keep waiting."""
        return None

    def server_problem(self, endpoint: str) -> str | None:
        """Why waiting for a server (a core) at ``endpoint`` is pointless now: none serves there."""
        return None

    def refused(self, link) -> str | None:
        """Why ``link``'s server refused our key (the CURVE handshake failed), or None."""
        return None

    def probe_delay(self, endpoint: str) -> float | None:
        """Seconds to wait for a relay's READY before :meth:`unanswered` (None: never ask)."""
        return None

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
        ctx.term()


_CONTEXT = _SharedContext()


class ZmqTransport(Transport):
    """The SoC of runtime dir ``rt`` (default: ``$VDSP_RUNTIME_DIR``) over ZeroMQ."""

    def __init__(self, mode: str = "relay", rt: Path | None = None, *, autostart_relay: bool = True) -> None:
        self.mode = mode
        self.rt = rt or rundir.runtime_dir()
        self.may_autostart = autostart_relay
        self.ctx = _CONTEXT.acquire()
        self._ctx_held = True
        self.monitors: dict[int, _Watch] = {}
        self.actx: zmq.asyncio.Context | None = None

    def servers(self) -> dict[str, str]:
        if self.mode == "relay":
            return {"relay": rundir.relay_endpoint(self.rt)}
        return dict(rundir.core_endpoints(self.rt))

    def open(self, endpoint: str, name: str, *, watch: bool = False, server_key: str = "") -> Channel:
        channel = Channel(self.ctx, endpoint, name, server_key)
        tcp = curve.is_tcp(endpoint)
        if watch or tcp:   # a relay that dies closes the connection, a server that refuses our key
            events = (zmq.EVENT_DISCONNECTED if watch else 0) | (_HANDSHAKE if tcp else 0)   # says so: at once
            with channel.lock:
                self.monitors[id(channel)] = _Watch(channel.sock.get_monitor_socket(events), watch)
        return channel

    def open_async(self, endpoint: str, name: str, *, watch: bool = False, server_key: str = "") -> AsyncChannel:
        if self.actx is None:
            self.actx = zmq.asyncio.Context.shadow(self.ctx)    # the same context: one term() ends both
        return AsyncChannel(self.actx, endpoint, name, watch, server_key)

    def release(self, link: Channel) -> None:
        entry = self.monitors.pop(id(link), None)
        if entry is not None:
            with link.lock:
                if not link.closed:
                    try:
                        link.sock.disable_monitor()
                    except zmq.ZMQError:
                        pass
                entry.monitor.close(0)
        link.close()

    def firmware_endpoint(self, announced: str, control: str) -> str:
        return rundir.connectable(announced, control)

    def lost(self, link: Channel) -> bool:
        entry = self.monitors.get(id(link))
        if entry is None or not entry.watch:
            return False
        self._events(link, entry)
        gone, entry.gone = entry.gone, False
        return gone

    def refused(self, link: Channel) -> str | None:
        entry = self.monitors.get(id(link))
        if entry is None:
            return None
        self._events(link, entry)
        if entry.refusal is not None:
            return f"{entry.refusal} at {link.endpoint} ({link.name}; {_our_key()})"
        return None

    def _events(self, link: Channel, entry: "_Watch") -> None:
        """Read ``link``'s monitor into ``entry``: ``gone`` once its connection closed, ``refusal``
        once a server refused our handshake."""
        with link.lock:
            if link.closed:
                return
            while True:
                try:
                    frames = entry.monitor.recv_multipart(zmq.NOBLOCK)
                except zmq.ZMQError:
                    return
                if len(frames) != 2 or len(frames[0]) != 6:
                    continue
                event, value = struct.unpack("=hi", frames[0])
                event &= 0xFFFF
                if event == zmq.EVENT_DISCONNECTED:
                    entry.gone = True
                elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    entry.failures = 0
                elif event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                    entry.refusal = (f"the server did not accept this client key (ZAP status {value}: not on its "
                                     "allow-list, or revoked)")
                elif event & (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
                    entry.failures += 1     # a wrong server key: the server drops every handshake
                    if entry.failures >= HANDSHAKE_FAILURES and entry.refusal is None:
                        entry.refusal = (f"the server did not accept this client's CURVE handshake "
                                         f"{entry.failures} times: is VDSP_SERVER_KEY the key of this server?")

    def before_hello(self, owner: int) -> None:
        """Over tcp a server verifies our owner by the CURVE key our owner names in its access
        list (PROTOCOL.md §16): name ours first. Raises FileNotFound / InvalidArgument (no usable
        key file), SysRegisterMemFailed (the list cannot be written)."""
        if not owner or not any(curve.is_tcp(e) for e in self.servers().values()):
            return
        me = ddr.current_owner()
        if me.id == owner:
            acl.own_list(me).set_key(curve.client_public_key())

    def probe_delay(self, endpoint: str) -> float | None:
        if not endpoint.startswith("ipc://"):
            return None      # tcp: nothing local to look at; wait up to the timeout
        return autostart.PROBE_S if os.path.exists(endpoint[6:]) else 0.0

    def unanswered(self, endpoint: str) -> autostart.Plan:
        decision = autostart.plan(self.rt, endpoint)
        if decision.action == "start":
            if not self.may_autostart:
                return autostart.Plan("fail", f"no relay runs in {self.rt} (its DSP cores do) and this client "
                                              "starts none (autostart_relay=False)")
            decision.relay_pid = autostart.start_relay(self.rt)
        return decision

    def wait_problem(self, plan) -> str | None:
        return autostart.wait_problem(self.rt, plan)

    def server_problem(self, endpoint: str) -> str | None:
        if endpoint.startswith("ipc://") and not autostart.listening(endpoint):
            return f"no process serves {endpoint}"
        return None

    def close(self) -> None:
        for entry in self.monitors.values():
            entry.monitor.close(0)
        self.monitors.clear()
        if self._ctx_held:
            self._ctx_held = False
            _CONTEXT.release(self.ctx)


HANDSHAKE_FAILURES = 5      # handshakes failed without a word (a wrong server key) before we say so
_HANDSHAKE = (zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
              | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)


class _Watch:
    """A link's socket monitor and what it told."""

    __slots__ = ("monitor", "watch", "gone", "failures", "refusal")

    def __init__(self, monitor: zmq.Socket, watch: bool) -> None:
        self.monitor, self.watch = monitor, watch
        self.gone = False
        self.failures = 0
        self.refusal: str | None = None


def _our_key() -> str:
    try:
        return f"client key {curve.client_key_file()}, public key {curve.client_public_key()[:8]}..."
    except Exception:       # the key file went away meanwhile: the refusal is the news
        return f"client key {curve.client_key_file()}"

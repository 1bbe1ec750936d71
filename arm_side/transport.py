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
- ``arm_side.loopback.LoopbackTransport``: the relay engine, the core engines and the firmware
  in this process, for tests without processes.
"""
from __future__ import annotations

import os
from pathlib import Path

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from arm_side import autostart
from arm_side.channel import AsyncChannel, Channel
from vdsp_sim.board import acl, curve, ddr, runtime


class Transport:
    """The interface (and what a transport without processes inherits)."""

    mode = "relay"                  # "relay": one server, the relay; "direct": one per core
    may_autostart = False

    def servers(self) -> dict[str, str]:
        """Name -> endpoint of each server to HELLO: {"relay": …} or {"vdsp0": …, "vdsp1": …}."""
        raise NotImplementedError

    def open(self, endpoint: str, name: str, *, watch: bool = False):
        """A link to ``endpoint``; ``watch``: :meth:`lost` will tell when its server goes away."""
        raise NotImplementedError

    def open_async(self, endpoint: str, name: str, *, watch: bool = False):
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

    def probe_delay(self, endpoint: str) -> float | None:
        """Seconds to wait for a relay's READY before :meth:`unanswered` (None: never ask)."""
        return None

    def close(self) -> None:
        pass


class ZmqTransport(Transport):
    """The SoC of runtime dir ``rt`` (default: ``$VDSP_RUNTIME_DIR``) over ZeroMQ."""

    def __init__(self, mode: str = "relay", rt: Path | None = None, *, autostart_relay: bool = True) -> None:
        self.mode = mode
        self.rt = rt or runtime.runtime_dir()
        self.may_autostart = autostart_relay
        self.ctx = zmq.Context()
        self.monitors: dict[int, zmq.Socket] = {}
        self.actx: zmq.asyncio.Context | None = None

    def servers(self) -> dict[str, str]:
        if self.mode == "relay":
            return {"relay": runtime.relay_endpoint(self.rt)}
        return dict(runtime.core_endpoints(self.rt))

    def open(self, endpoint: str, name: str, *, watch: bool = False) -> Channel:
        channel = Channel(self.ctx, endpoint, name)
        if watch:   # a relay that dies closes the connection: we hear it at once
            with channel.lock:
                self.monitors[id(channel)] = channel.sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        return channel

    def open_async(self, endpoint: str, name: str, *, watch: bool = False) -> AsyncChannel:
        if self.actx is None:
            self.actx = zmq.asyncio.Context.shadow(self.ctx)    # the same context: one term() ends both
        return AsyncChannel(self.actx, endpoint, name, watch)

    def release(self, link: Channel) -> None:
        monitor = self.monitors.pop(id(link), None)
        if monitor is not None:
            with link.lock:
                if not link.closed:
                    try:
                        link.sock.disable_monitor()
                    except zmq.ZMQError:
                        pass
                monitor.close(0)
        link.close()

    def firmware_endpoint(self, announced: str, control: str) -> str:
        return runtime.connectable(announced, control)

    def lost(self, link: Channel) -> bool:
        monitor = self.monitors.get(id(link))
        if monitor is None:
            return False
        gone = False
        with link.lock:
            if link.closed:
                return False
            while True:
                try:
                    frames = monitor.recv_multipart(zmq.NOBLOCK)
                except zmq.ZMQError:
                    return gone
                try:
                    gone = gone or parse_monitor_message(frames)["event"] == zmq.EVENT_DISCONNECTED
                except (ValueError, KeyError, IndexError):
                    pass

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
        for monitor in self.monitors.values():
            monitor.close(0)
        self.monitors.clear()
        self.ctx.term()

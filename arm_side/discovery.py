"""Where a client finds its SoC's servers, and how long and how it waits for one that does not
answer yet: the policy half of the SDK's seam (the links half: ``arm_side.transport``).

A discovery answers four questions, for the session's connect sequence (``arm_side.session``):
:meth:`Servers.servers` (whom to HELLO: the relay, or each core), :meth:`Servers.firmware_endpoint`
(where a firmware a core announced is reached from here), :meth:`Servers.prepare` (what must exist
before a HELLO can prove our owner) and :meth:`Servers.ready_wait` (how to wait for a server's
READY: an ``arm_side.connect_wait`` policy).

- :class:`Servers`: fixed endpoints, nothing to start, a plain deadline (an in-process SoC such
  as ``vdsp_sim.soc.loopback``, a test's stand-in server).
- :class:`RuntimeDir`: the SoC of a runtime directory (``vdsp up``): its endpoints, a local relay
  that does not answer handled as ``arm_side.autostart`` says, our CURVE key named before HELLO
  over tcp.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from protocol import errors
from arm_side import autostart
from arm_side.connect_wait import CoreWait, RelayWait
from vdsp_board.processes import rundir
from vdsp_board.memory import acl, ddr
from vdsp_board.identity import curve


class Servers:
    """The servers at ``servers`` (name -> endpoint: ``{"relay": …}`` in relay mode, one per core
    in direct mode), as they are."""

    def __init__(self, mode: str, servers: Mapping[str, str]) -> None:
        if mode not in ("relay", "direct"):
            raise errors.InvalidArgument(f"VDSP_RPC_MODE must be relay or direct, got {mode!r}")
        self.mode, self._servers = mode, dict(servers)

    def servers(self) -> dict[str, str]:
        """Name -> endpoint of each server to HELLO."""
        return dict(self._servers)

    def firmware_endpoint(self, announced: str, control: str) -> str:
        """Where to reach a firmware a core announced at ``announced`` (its control: ``control``)."""
        return announced

    def prepare(self, owner: int) -> None:
        """Whatever must exist before the first HELLO can prove ``owner``."""

    def ready_wait(self, name: str, endpoint: str, timeout_s: float, now: float) -> RelayWait | CoreWait:
        """How to wait for the READY of server ``name`` at ``endpoint``: up to ``timeout_s``."""
        if name == "relay":
            return RelayWait(endpoint, timeout_s, now)
        return CoreWait(endpoint, timeout_s, now)


class RuntimeDir(Servers):
    """The SoC of runtime dir ``rt`` (default: ``$VDSP_RUNTIME_DIR``, read now); ``autostart_relay``:
    start a relay for cores that run without one (``arm_side.autostart``)."""

    def __init__(self, mode: str = "relay", rt: Path | None = None, *, autostart_relay: bool = True) -> None:
        super().__init__(mode, {})
        self.rt = rt or rundir.runtime_dir()
        self.may_autostart = autostart_relay

    def servers(self) -> dict[str, str]:
        if self.mode == "relay":
            return {"relay": rundir.relay_endpoint(self.rt)}
        return dict(rundir.core_endpoints(self.rt))

    def firmware_endpoint(self, announced: str, control: str) -> str:
        return rundir.connectable(announced, control)

    def prepare(self, owner: int) -> None:
        """Over tcp a server verifies our owner by the CURVE key our owner names in its access
        list (PROTOCOL.md §16): name ours first. Raises FileNotFound / InvalidArgument (no usable
        key file), SysRegisterMemFailed (the list cannot be written)."""
        if not owner or not any(curve.is_tcp(e) for e in self.servers().values()):
            return
        me = ddr.current_owner()
        if me.id == owner:
            acl.own_list(me).set_key(curve.client_public_key())

    def ready_wait(self, name: str, endpoint: str, timeout_s: float, now: float) -> RelayWait | CoreWait:
        local = endpoint.startswith("ipc://")      # tcp: nothing local to look at; wait up to the timeout
        if name == "relay":
            return RelayWait(endpoint, timeout_s, now, autostart.LocalRelay(self.rt, endpoint, self.may_autostart)
                             if local else None)

        def problem() -> str | None:
            return None if autostart.listening(endpoint) else f"no process serves {endpoint}"
        return CoreWait(endpoint, timeout_s, now, problem if local else None)

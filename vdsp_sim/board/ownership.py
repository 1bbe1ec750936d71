"""Which DDR owner a connection speaks for — proven, never claimed — and what its tasks may touch.

The relay (for its clients) and every firmware (for direct-mode clients and for the relay)
bind each connection to what its HELLO claimed once the claim is verified:

- ``owner`` X over **ipc**: the peer process (its pid from the kernel, ``vdsp_sim.board.peercred``)
  holds the exclusive flock of X's lock file ``vdsp-{X:06x}.lock`` in the DDR directory;
- ``owner`` X over **tcp** (CURVE): X is alive (its lock is held) and its access list
  (``vdsp_sim.board.acl``) names the CURVE key this peer authenticated with; one key per owner, set
  by the owner, so no other key can use X while X lives;
- ``role: relay`` at a firmware: over ipc the peer is the process in the runtime
  directory's ``relay.pid``; over tcp it authenticated with the relay's key (``admin:relay``).
  Its tasks were checked by the relay and are not checked again.

A claim that fails is ClaimRefused (logged at most once per 10 s per peer) and leaves the
connection without an owner: it may still PING, but every handle it sends is ForeignHandle.
A TASK's own ``owner`` field is never consulted.
"""
from __future__ import annotations

import collections
import logging
import os
from pathlib import Path

from protocol import acl as aclrule, errors
from vdsp_sim.board import acl, ddr, peercred
from vdsp_sim.board.log import RateLimited
from vdsp_sim.board.pidfile import PidFile

log = logging.getLogger("vdsp.ownership")
RELAY = -1              # the binding of a verified relay connection
RELAY_KEY_NAME = "admin:relay"
MAX_BOUND = 1024        # connections a firmware keeps bindings for (least recently used go first)


def _hex(owner: object) -> str:
    return f"0x{owner:06x}" if isinstance(owner, int) and owner >= 0 else repr(owner)


class Ownership:
    """One server's judge of HELLO claims and of the handles of TASKs.

    ``gate`` is the server's CURVE gate on tcp (None on ipc); ``accept_relay`` whether a
    peer may become the relay here (firmware endpoints); ``rt`` the runtime directory
    holding ``relay.pid``.
    """

    def __init__(self, server: str, *, gate=None, accept_relay: bool = False, rt: Path | None = None,
                 reader: acl.Reader | None = None) -> None:
        self.server, self.gate, self.accept_relay, self.rt = server, gate, accept_relay, rt
        self.acl = reader or acl.Reader()
        self.warn = RateLimited(log)

    # --- HELLO ----------------------------------------------------------------------------------
    def claim(self, body: dict, frame: object = None, peer_name: str = "") -> int | None:
        """The binding a HELLO earns: its verified owner id, RELAY, or None (it claims no owner).

        ``frame`` is a frame of the HELLO received with ``copy=False`` (its ``Peer-Address``
        tells the ipc peer's pid); ``peer_name`` the CURVE name on tcp. Raises ClaimRefused.
        """
        address = peercred.frame_property(frame, "Peer-Address")
        try:
            if body.get("role") == "relay" and self.accept_relay:
                self._prove_relay(address, peer_name)
                return RELAY
            owner = body.get("owner", 0)
            if owner == 0:
                return None
            self._prove_owner(owner, address, peer_name)
            return owner
        except errors.ClaimRefused as exc:
            self.warn.warn(("claim", address or peer_name), "%s: refused the HELLO of %s: %s", self.server,
                           address or peer_name or "an unknown peer", exc.message)
            raise

    def _ipc_pid(self, address: str | None) -> int | None:
        pid = peercred.peer_pid(address)
        if pid is not None and address is not None and address.split(":")[1] != str(os.geteuid()):
            raise errors.ClaimRefused(f"peer {address} runs as another user")
        return pid

    def _prove_owner(self, owner: object, address: str | None, peer_name: str) -> None:
        if not isinstance(owner, int) or isinstance(owner, bool) or not 0 < owner < ddr.MAX_OWNER:
            raise errors.ClaimRefused(f"owner {owner!r:.40} is not a DDR owner id in [1, 2^22)")
        pid = self._ipc_pid(address)
        if pid is not None:
            path = os.path.join(ddr.shm_dir(), ddr.lock_name(owner))
            ident = peercred.lock_identity(path)
            if ident is None:
                raise errors.ClaimRefused(f"owner {_hex(owner)} does not exist: no lock file {path}")
            try:
                held = peercred.holds_exclusive_flock(pid, ident)
            except OSError as exc:
                raise errors.ClaimRefused(f"cannot verify owner {_hex(owner)} of process {pid}: {exc}") from None
            if not held:
                raise errors.ClaimRefused(f"process {pid} does not hold the lock of owner {_hex(owner)} ({path}): "
                                          "a connection may only claim the owner its own process holds")
            return
        if peer_name and self.gate is not None:
            key = self.gate.key_of(peer_name)
            declared = self.acl.get(owner)
            if declared is aclrule.NONE or declared.key is None:
                raise errors.ClaimRefused(
                    f"owner {_hex(owner)} is not alive or has not named its CURVE key in its access list "
                    f"({acl.acl_name(owner)}): over tcp an owner is claimed with the key it names there")
            if declared.key != key:
                raise errors.ClaimRefused(f"owner {_hex(owner)} speaks over tcp with another CURVE key than "
                                          f"{peer_name}'s")
            return
        raise errors.ClaimRefused(f"cannot tell which process or key sent this HELLO, so owner {_hex(owner)} "
                                  "cannot be verified")

    def _prove_relay(self, address: str | None, peer_name: str) -> None:
        pid = self._ipc_pid(address)
        if pid is not None:
            path = (self.rt or Path(".")) / "relay.pid"
            relay = PidFile(path).read() if self.rt is not None else None
            if relay != pid:
                raise errors.ClaimRefused(f"process {pid} claims the role relay, but {path} names "
                                          f"{relay if relay is not None else 'no live process'}")
            return
        if peer_name and self.gate is not None:
            if peer_name != RELAY_KEY_NAME:
                raise errors.ClaimRefused(f"{peer_name} claims the role relay; only the relay's key "
                                          f"({RELAY_KEY_NAME}) may")
            return
        raise errors.ClaimRefused("cannot tell which process or key claims the role relay")

    # --- TASK -----------------------------------------------------------------------------------
    def check_task(self, binding: int | None, body: dict) -> None:
        """Refuse a TASK body with a handle ``binding`` may not use (RELAY: checked upstream).

        ``body`` passed ``messages.check_body``. Raises ForeignHandle.
        """
        if binding != RELAY:
            aclrule.check_task(body, binding, self.acl.grants)


class Bindings:
    """Connection identity -> binding (owner id or RELAY), at most ``limit``, least recently used first out.

    A forgotten connection is as one that never said HELLO (ZeroMQ never reuses an identity
    on a socket, so a binding cannot pass to another connection).
    """

    def __init__(self, limit: int = MAX_BOUND) -> None:
        self.limit = limit
        self._map: collections.OrderedDict[bytes, int] = collections.OrderedDict()

    def get(self, identity: bytes) -> int | None:
        binding = self._map.get(identity)
        if binding is not None:
            self._map.move_to_end(identity)
        return binding

    def set(self, identity: bytes, binding: int | None) -> None:
        self._map.pop(identity, None)
        if binding is not None:
            self._map[identity] = binding
            while len(self._map) > self.limit:
                self._map.popitem(last=False)

    def __len__(self) -> int:
        return len(self._map)

"""Which DDR owner a connection speaks for — proven, never claimed — and what its tasks may touch.

The relay (for its clients) and every firmware (for direct-mode clients and for the relay)
bind each connection to what its HELLO claimed once the claim is verified:

- ``owner`` X over **ipc**: the process that opened the connection (``vdsp_board.identity.peercred``;
  pinned by the strongest fact the kernel offers, ``vdsp_board.identity.peerproof``: a pidfd taken at
  connect or at accept, or its pid and start time recorded at accept and the connection's socket
  among its fds) still lives and holds the exclusive flock of X's lock file
  ``vdsp-{X:06x}.lock`` in the DDR directory through one of its fds (its own /proc entries say so);
- ``owner`` X over **tcp** (CURVE): X is alive (its lock is held) and its access list
  (``vdsp_board.memory.acl``) names the CURVE key this peer authenticated with; one key per owner, set
  by the owner, so no other key can use X while X lives;
- ``role: relay`` at a firmware: over ipc the peer is the process in the runtime
  directory's ``relay.pid``; over tcp it authenticated with the relay's key (``admin:relay``).
  Its tasks were checked by the relay and are not checked again.

Checking a claim reads the peer's /proc entries, so servers take it apart on their loop
(:meth:`Ownership.take`, a few syscalls) and judge it on a worker (:meth:`Ownership.judge`,
``vdsp_board.identity.hellogate``). A claim that fails is ClaimRefused (logged at most once per 10 s per peer) and leaves the
connection without an owner: it may still PING, but every handle it sends is ForeignHandle.
A TASK's own ``owner`` field is never consulted.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from protocol import acl as aclrule, errors
from vdsp_board.memory import acl, ddr
from vdsp_board.identity import peercred, peerproof
from vdsp_board.observability.log import RateLimited
from vdsp_board.processes.pidfile import PidFile

log = logging.getLogger("vdsp.ownership")
RELAY = -1              # the binding of a verified relay connection
RELAY_KEY_NAME = "admin:relay"


def _hex(owner: object) -> str:
    return f"0x{owner:06x}" if isinstance(owner, int) and owner >= 0 else repr(owner)


class Verdict:
    """The outcome of one HELLO's claim: a binding (owner id, RELAY or None), or the refusal."""

    __slots__ = ("binding", "refusal")

    def __init__(self, binding: int | None, refusal: errors.ClaimRefused | None = None) -> None:
        self.binding, self.refusal = binding, refusal

    def result(self) -> int | None:
        """The binding; raises the ClaimRefused if the claim was refused."""
        if self.refusal is not None:
            raise self.refusal
        return self.binding


class Claim:
    """One HELLO's claim as received: what it wants (``"owner"``, ``"relay"`` or None) and who
    sent it (ipc: the pid zmq took at accept and either a pidfd of that very process, or the
    inode of the accepted socket that names its accept record; tcp: the CURVE name)."""

    __slots__ = ("body", "address", "peer_name", "wants", "pid", "pidfd", "inode", "gone", "pin", "not_before")

    def __init__(self, body: dict, address: str | None, peer_name: str, wants: str | None) -> None:
        self.body, self.address, self.peer_name, self.wants = body, address, peer_name, wants
        self.pid: int | None = None
        self.pidfd: int | None = None               # SO_PEERPIDFD (peer-pidfd)
        self.inode: int | None = None               # the accepted socket's (pidfd, start-time)
        self.gone = False           # the connecting process had exited when the HELLO was read
        self.pin: peerproof.Pin | None = None       # the connecting process, held still while judged
        self.not_before = 0.0       # (monotonic) judging it sooner would wait (start-time: peerproof.ready_at)

    def close(self) -> None:
        if self.pin is not None:
            self.pin.close()
            self.pin = None
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class Ownership:
    """One server's judge of HELLO claims and of the handles of TASKs.

    ``gate`` is the server's CURVE gate on tcp (None on ipc); ``accept_relay`` whether a
    peer may become the relay here (firmware endpoints); ``rt`` the runtime directory
    holding ``relay.pid``; ``accepted`` the accept records of the server's listening socket
    (fed by its ``Admission``), which the proofs weaker than ``peer-pidfd`` need
    (``vdsp_board.identity.peerproof``; ``proof`` is this host's).
    """

    def __init__(self, server: str, *, gate=None, accept_relay: bool = False, rt: Path | None = None,
                 reader: acl.Reader | None = None, accepted: peerproof.Accepted | None = None) -> None:
        self.server, self.gate, self.accept_relay, self.rt = server, gate, accept_relay, rt
        self.accepted = accepted
        self.acl = reader or acl.Reader()
        self.warn = RateLimited(log)
        self.proof = peerproof.host_proof()

    # --- HELLO ----------------------------------------------------------------------------------
    def claim(self, body: dict, frame: object = None, peer_name: str = "") -> int | None:
        """The binding a HELLO earns: its verified owner id, RELAY, or None (it claims no owner).

        ``frame`` is a frame of the HELLO received with ``copy=False``, or what
        ``vdsp_board.sockets.zsock.recv_routed`` kept of one (its properties tell the ipc peer's pid
        and socket), or the :class:`Verdict` reached for this HELLO off the
        loop (``vdsp_board.identity.hellogate``); ``peer_name`` the CURVE name on tcp. Raises ClaimRefused.
        """
        verdict = frame if isinstance(frame, Verdict) else self.judge(self.take(body, frame, peer_name))
        return verdict.result()

    def take(self, body: dict, frame: object = None, peer_name: str = "") -> Claim:
        """What a HELLO claims and who sent it, read at once on the thread that received it
        (a few syscalls: the connection's pidfd, or its socket's inode); :meth:`judge` decides,
        anywhere, later."""
        raw = peercred.frame_property(frame, "Peer-Address")
        if body.get("role") == "relay" and self.accept_relay:
            wants: str | None = "relay"
        else:
            wants = None if body.get("owner", 0) == 0 else "owner"
        claim = Claim(body, raw if isinstance(raw, str) else None, peer_name, wants)
        if claim.wants is None:
            return claim
        claim.pid = peercred.peer_pid(claim.address)
        if claim.pid is None:
            return claim
        if self.proof is peerproof.Proof.PEER_PIDFD:
            try:
                claim.pidfd = peercred.connection_pidfd(frame)
            except peercred.PeerGone:
                claim.gone = True
        else:
            claim.inode = peercred.connection_inode(frame)
            if self.proof is peerproof.Proof.START_TIME:
                claim.not_before = peerproof.ready_at(claim.pid)
        return claim

    def judge(self, claim: Claim) -> Verdict:
        """The verdict on ``claim`` (reads the peer's /proc entries: may be slow; never raises).
        Closes the claim's pidfd."""
        try:
            if claim.wants is None:
                return Verdict(None)
            if claim.wants == "relay":
                self._prove_relay(claim)
                return Verdict(RELAY)
            self._prove_owner(claim)
            return Verdict(claim.body.get("owner"))
        except errors.ClaimRefused as exc:
            who = claim.address or claim.peer_name
            self.warn.warn(("claim", who), "%s: refused the HELLO of %s: %s", self.server,
                           who or "an unknown peer", exc.message)
            return Verdict(None, exc)
        finally:
            claim.close()

    def _ipc_pid(self, claim: Claim) -> int | None:
        """The ipc peer's pid (None: not ipc), once it is known to be this user's live connecting
        process, pinned (``claim.pin``) until the claim is closed."""
        pid, address = claim.pid, claim.address
        if pid is None or address is None:
            return None
        if address.split(":")[1] != str(os.geteuid()):
            raise errors.ClaimRefused(f"peer {address} runs as another user")
        exited = errors.ClaimRefused(f"process {pid}, which opened this connection, has exited: a connection "
                                     "outliving its process proves nothing (its pid may be another process's now)")
        if claim.gone:
            raise exited
        if self.proof is peerproof.Proof.PEER_PIDFD:
            if claim.pidfd is None:
                raise errors.ClaimRefused(f"cannot tell which process opened this connection (no pidfd of peer "
                                          f"{address}: libzmq's SRCFD is needed)")
            if peercred.pidfd_pid(claim.pidfd) != pid:
                raise exited
            claim.pin, claim.pidfd = peerproof.Pin(pid, pidfd=claim.pidfd), None
            return pid
        if self.accepted is None or claim.inode is None:
            raise errors.ClaimRefused(f"cannot tell which process opened this connection (peer {address}): "
                                      "libzmq's SRCFD is missing")
        try:
            claim.pin = self.accepted.pin(claim.inode, pid)
        except peerproof.NotRecorded:
            raise errors.ClaimRefused(f"cannot tell which process opened this connection (peer {address}): "
                                      "no record of its accept (the connection closed); connect again") from None
        except peerproof.Gone as exc:
            raise errors.ClaimRefused(f"{exited.message} ({exc.strerror})") from None
        except OSError as exc:
            raise errors.ClaimRefused(f"cannot tell whether process {pid} opened this connection: "
                                      f"{exc.strerror or exc}") from None
        return pid

    def _still_there(self, claim: Claim) -> None:
        """After reading /proc/PID: the process that connected still lives, so PID was it throughout."""
        if claim.pin is None or not claim.pin.alive():
            raise errors.ClaimRefused(f"process {claim.pid}, which opened this connection, exited while its "
                                      "claim was checked")

    def _prove_owner(self, claim: Claim) -> None:
        owner, peer_name = claim.body.get("owner"), claim.peer_name
        if not isinstance(owner, int) or isinstance(owner, bool) or not 0 < owner < ddr.MAX_OWNER:
            raise errors.ClaimRefused(f"owner {owner!r:.40} is not a DDR owner id in [1, 2^22)")
        pid = self._ipc_pid(claim)
        if pid is not None:
            path = os.path.join(ddr.shm_dir(), ddr.lock_name(owner))
            ident = peercred.lock_identity(path)
            if ident is None:
                raise errors.ClaimRefused(f"owner {_hex(owner)} lock file missing: no lock file {path} "
                                          "(owner not alive, or not in this SoC's DDR directory)")
            lock_fd = claim.body.get("lock_fd")
            fd = lock_fd if isinstance(lock_fd, int) and not isinstance(lock_fd, bool) and lock_fd >= 0 else None
            try:
                held = peercred.holds_exclusive_flock(pid, ident, fd)
            except peercred.TooManyFds as exc:
                raise errors.ClaimRefused(f"cannot verify owner {_hex(owner)}: {exc.strerror}; name the fd "
                                          "that holds its lock in the HELLO (lock_fd)") from None
            except OSError as exc:
                raise errors.ClaimRefused(f"cannot verify owner {_hex(owner)} of process {pid}: cannot read "
                                          f"its /proc entries ({exc.strerror or exc})") from None
            self._still_there(claim)
            if not held:
                where = f"through fd {fd}" if fd is not None else "through any of its fds"
                raise errors.ClaimRefused(f"process {pid} does not hold owner {_hex(owner)}'s lock ({path}) "
                                          f"{where}: a connection may only claim an owner whose exclusive "
                                          "flock its own process holds")
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

    def _prove_relay(self, claim: Claim) -> None:
        pid, peer_name = self._ipc_pid(claim), claim.peer_name
        if pid is not None:
            path = (self.rt or Path(".")) / "relay.pid"
            relay = PidFile(path).read() if self.rt is not None else None
            self._still_there(claim)
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


class PassedBodies:
    """TASK bodies (their msgpack bytes) that passed every check for a binding, remembered so
    that the same bytes from the same binding are not unpacked and judged again (a client
    repeats its bodies: every PING's is the same).

    Only a verdict that can never change is remembered: the body is well-formed (a function of
    its bytes) and each of its handles is memory of the binding itself (a function of the
    addresses and the binding, PROTOCOL.md §6.4). A body that uses another owner's memory
    through a grant is judged again on every task, so a revoked grant or a dead granting
    owner is refused on the very next one. (Whether a segment still exists is not the
    relay's question: the firmware resolves every handle against the DDR for each task.)
    At most ``limit`` bodies of at most ``max_bytes`` each; the oldest go first.
    """

    def __init__(self, limit: int = 1024, max_bytes: int = 1024) -> None:
        self.limit, self.max_bytes = limit, max_bytes
        self._passed: dict[tuple[int | None, bytes], bool] = {}

    def known(self, binding: int | None, raw: bytes) -> bool:
        """True if ``raw`` passed for ``binding`` before (and nothing since can change that)."""
        return (binding, raw) in self._passed

    def remember(self, binding: int | None, raw: bytes, body: dict) -> None:
        """``raw`` (unpacked as ``body``) just passed every check for ``binding``."""
        if len(raw) > self.max_bytes or not aclrule.own_only(body, binding):
            return
        passed = self._passed
        if len(passed) >= self.limit:
            del passed[next(iter(passed))]
        passed[(binding, bytes(raw))] = True

    def clear(self) -> None:
        self._passed.clear()

    def __len__(self) -> int:
        return len(self._passed)

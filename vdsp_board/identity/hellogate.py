"""HELLO claims judged off a server's loop: the loop never waits on a peer's /proc entries.

A server (the relay's front, a firmware's endpoint) passes each message it receives through
:meth:`HelloGate.admit`, and what it gets back (then, and later from :meth:`HelloGate.ready`)
is what it handles, in each connection's order:

- a HELLO that claims something (an owner, or the relay role where that is accepted) is taken
  apart at once, on the loop (``Ownership.take``: a few syscalls, among them the pidfd of the
  connection's process, taken while the connection surely is the one that sent the HELLO), and
  judged on the gate's worker thread (``Ownership.judge``: reads the peer's /proc entries);
- that connection's later messages wait in the gate, in order, until the verdict; then the
  HELLO comes back with its ``Verdict`` in place of its frame (``Ownership.claim`` takes it),
  followed by them. Other connections' messages pass at once.

Bounds, per peer and in all (a *peer* is what one connecting party controls, however many
connections it opens: over ipc the process that opened the connection, by the pid the kernel
gave at connect; over tcp the CURVE key it authenticated with):

- claims queued or being judged: MAX_PENDING_PER_PEER of one peer, MAX_PENDING in all. When all
  places are taken, a claim of a peer with fewer claims than the peer with the most takes the
  place of that peer's newest claim not yet being judged (which is refused); the worker judges
  the peers' claims in turn, one each, so one peer's backlog delays another's claim by at most
  one verdict per peer with claims waiting; after judging a peer's claim the worker rests from
  that peer JUDGE_REST times as long as the verdict took (reading a process's fds can take
  milliseconds, more on a busy host), so one peer's claims keep the worker busy at most
  1 / (1 + JUDGE_REST) of the time, and the server's loop keeps most of the CPU; a claim that
  could not be judged yet (``Claim.not_before``: under the ``start-time`` proof, a process
  younger than two clock ticks, ``vdsp_board.identity.peerproof``) rests its peer until then, so
  the worker judges others' claims meanwhile instead of waiting;
- bytes of messages held behind claims: MAX_HELD_BYTES_PER_PEER of one peer, MAX_HELD_BYTES in
  all, shared the same way (a peer holding less displaces the newest held messages of the
  peer holding the most).

A message beyond comes back at its turn with ``refused`` = CoreBusy and no frames, for the
server to answer (nothing is dropped silently). A peer of the SoC's own user can open as many
processes as it likes; each is then one peer among others, with its share.
"""
from __future__ import annotations

import collections
import logging
import os
import threading
import time
from typing import Final

from protocol import errors, header, messages, wire
from protocol.constants import Command
from vdsp_board.identity import peercred
from vdsp_board.identity.ownership import Claim, Ownership, Verdict

log = logging.getLogger("vdsp.hellogate")
_HELLO: Final = int(Command.HELLO)    # a plain int: an IntEnum member read is an attribute lookup a message
MAX_PENDING = 256               # HELLO claims queued for the worker or being judged, in all
MAX_PENDING_PER_PEER = 8        # of one peer (an ipc process; a CURVE key over tcp)
MAX_HELD_BYTES = 64 << 20       # bytes of messages waiting behind a claim, in all
MAX_HELD_BYTES_PER_PEER = 16 << 20
JUDGE_REST = 3                  # a peer's next claim waits this many times as long as its last verdict took


def peer_of(meta: object, peer: str) -> tuple:
    """Whose share a message counts against: the CURVE name ``peer`` (tcp), else the process
    that opened the ipc connection (``Peer-Address`` of the frame ``meta``, as the kernel told
    at connect)."""
    if peer:
        return ("key", peer)
    address = peercred.frame_property(meta, "Peer-Address")
    address = address if isinstance(address, str) else ""
    pid = peercred.peer_pid(address)
    return ("process", pid) if pid is not None else ("address", address)


class Share:
    """What one peer has in the gate: its claims waiting for the worker (oldest first), how many
    are being judged, its messages held behind claims (in arrival order) and their bytes."""

    __slots__ = ("key", "queued", "judging", "in_turn", "rest_until", "held", "held_bytes")

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.queued: collections.deque[Item] = collections.deque()
        self.judging = 0
        self.in_turn = False        # in the worker's rotation (HelloGate._turns)
        self.rest_until = 0.0       # (monotonic) the worker judges no claim of this peer before then
        self.held: dict[Item, None] = {}
        self.held_bytes = 0

    @property
    def pending(self) -> int:
        return len(self.queued) + self.judging

    def who(self) -> str:
        kind, value = self.key
        return f"key {value}" if kind == "key" else f"process {value}" if kind == "process" else f"peer {value or '?'}"


class Item:
    """One message for the server to handle: ``meta`` is the received frame, or a HELLO's Verdict
    (``frame`` stays the received frame, for its properties);
    ``refused`` (then ``frames`` is empty): answer ``msg_id`` with this error instead."""

    __slots__ = ("identity", "frames", "meta", "frame", "peer", "refused", "msg_id", "claim", "size", "share")

    def __init__(self, identity: bytes, frames: list, meta: object, peer: str) -> None:
        self.identity, self.frames, self.meta, self.peer = identity, frames, meta, peer
        self.frame = meta
        self.refused: errors.VdspError | None = None
        self.msg_id = 0
        self.claim: Claim | None = None     # set while its verdict is awaited
        self.size = 0                       # bytes held behind a claim
        self.share: Share | None = None     # the peer's, while it is a claim or held

    def refuse(self, exc: errors.VdspError) -> None:
        self.refused, self.msg_id, self.frames = exc, wire.peek_msg_id(self.frames) or 0, []


class HelloGate:
    """``ownership`` judges the claims; :meth:`fileno` becomes readable when verdicts are ready.

    The server's loop calls :meth:`admit`, :meth:`ready` and :meth:`close`; the worker thread
    judges. ``_lock`` guards what both touch: the shares' queued claims and judging counts,
    ``_turns``, ``pending`` and ``_done``."""

    def __init__(self, ownership: Ownership, name: str = "hello-gate") -> None:
        self.ownership = ownership
        self.held: dict[bytes, collections.deque[Item]] = {}    # connection -> its messages behind a claim
        self.held_bytes = 0
        self.pending = 0                # claims queued or being judged (the sum of the shares')
        self.shares: dict[tuple, Share] = {}    # peers with claims or held messages
        # shares with queued claims, in turn: one claim each, then to the back (a share whose claim is
        # being judged goes back once it is judged, so a newcomer goes before its next one)
        self._turns: collections.deque[Share] = collections.deque()
        self._lock = threading.Lock()
        self._work_cv = threading.Condition(self._lock)
        self._closing = False
        self._done: collections.deque[Item] = collections.deque()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._written = self._drained = 0     # bytes of the wake pipe: written by the worker, read by ready()
        self._worker = threading.Thread(target=self._work, name=name, daemon=True)
        self._worker.start()

    def fileno(self) -> int:
        return self._wake_r

    def passes(self, identity: bytes, frames: list) -> bool:
        """True if :meth:`admit` would hand this message straight back, alone and unchanged (no
        HELLO, nothing of its connection held): the caller may then handle it without an Item."""
        return header.command_of(frames[0]) != _HELLO and not (self.held and identity in self.held)

    def admit(self, identity: bytes, frames: list, meta: object = None, peer: str = "") -> list[Item]:
        """The messages to handle now: this one, unless its connection waits for a verdict, and
        those whose turn came because a claim of theirs was displaced (each connection's in order)."""
        item = Item(identity, frames, meta, peer)
        claim = self._claim_of(item)
        waiting = self.held.get(identity)
        if claim is None and waiting is None:
            return [item]
        if waiting is None:
            waiting = self.held[identity] = collections.deque()
        out: list[Item] = []
        if claim is not None:
            self._queue(item, claim, self._share(peer_of(meta, peer)), out)
        elif item.refused is None:
            self._hold(item, waiting[0].share or self._share(peer_of(meta, peer)))
        waiting.append(item)
        out.extend(self._release(identity))
        return out

    def ready(self) -> list[Item]:
        """Messages whose turn came since the last call (a verdict arrived), in each connection's order.

        Cheap when no verdict came (the firmware calls this on each turn it did not wait, and when
        its wait said :meth:`fileno` fired): the wake pipe is read only while a byte the worker
        wrote may be in it (no read syscall and no BlockingIOError per call)."""
        if not self._done and self._drained >= self._written:
            return []
        try:
            while data := os.read(self._wake_r, 4096):
                self._drained += len(data)
        except BlockingIOError:
            pass
        out: list[Item] = []
        while True:
            with self._lock:
                item = self._done.popleft() if self._done else None
            if item is None:
                break
            share, item.share = item.share, None
            out.extend(self._release(item.identity))
            if share is not None:
                self._tidy(share)
        return out

    def close(self) -> None:
        with self._lock:
            self._closing = True
            self._work_cv.notify()
        self._worker.join(timeout=5)
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)

    # --- inside ------------------------------------------------------------------------------------------
    def _claim_of(self, item: Item) -> Claim | None:
        """The claim of a HELLO that claims something, taken apart now; None for any other message,
        and for a HELLO that may claim something from a peer that has MAX_PENDING_PER_PEER claims
        already: that one is refused (CoreBusy) before it is taken apart, which costs syscalls
        (a peer flooding HELLOs costs the loop little more than reading them)."""
        frames = item.frames
        if not frames or header.command_of(frames[0]) != _HELLO:
            return None
        try:
            body = messages.check_body(wire.decode(frames)).body
        except errors.VdspError:
            return None                 # the server answers it as the malformed message it is
        if body.get("owner", 0) != 0 or body.get("role") == "relay":      # may claim (Ownership.take decides)
            share = self.shares.get(peer_of(item.meta, item.peer))
            if share is not None and share.pending >= MAX_PENDING_PER_PEER:
                item.refuse(errors.CoreBusy(f"{share.pending} HELLOs of {share.who()} are being verified (at most "
                                            f"{MAX_PENDING_PER_PEER} of one peer); send HELLO again later"))
                return None
        claim = self.ownership.take(body, item.meta, item.peer)
        if claim.wants is None:
            return None
        return claim

    def _share(self, key: tuple) -> Share:
        share = self.shares.get(key)
        if share is None:
            share = self.shares[key] = Share(key)
        return share

    def _tidy(self, share: Share) -> None:
        """Forget a peer with nothing left in the gate (only this thread adds to a share)."""
        if not share.pending and not share.held and self.shares.get(share.key) is share:
            del self.shares[share.key]

    def _queue(self, item: Item, claim: Claim, share: Share, out: list[Item]) -> None:
        """Queue ``item``'s claim for the worker (its peer has fewer than MAX_PENDING_PER_PEER:
        ``_claim_of`` saw to it), or refuse it (CoreBusy): all places are taken by peers with no
        more claims than it."""
        with self._lock:
            if self.pending >= MAX_PENDING and not self._displace(share, out):
                refusal = f"{MAX_PENDING} HELLOs are being verified; send HELLO again later"
            else:
                item.claim, item.share = claim, share
                share.queued.append(item)
                share.rest_until = max(share.rest_until, claim.not_before)   # a young process waits its own turn
                self.pending += 1
                if not share.in_turn and not share.judging:
                    share.in_turn = True
                    self._turns.append(share)
                    self._work_cv.notify()
                return
        claim.close()
        item.refuse(errors.CoreBusy(refusal))
        self._tidy(share)

    def _displace(self, share: Share, out: list[Item]) -> bool:
        """All places are taken: refuse the newest queued claim of the peer with the most claims
        if it has more than ``share`` would with one more, and say whether a place was freed
        (under ``_lock``). The displaced claim's connection goes on in ``out``."""
        victim = max((s for s in self.shares.values() if s.queued), key=lambda s: s.pending, default=None)
        if victim is None or victim.pending <= share.pending + 1:
            return False
        item = victim.queued.pop()
        if not victim.queued and victim.in_turn:
            victim.in_turn = False
            self._turns.remove(victim)
        self.pending -= 1
        claim, item.claim, item.share = item.claim, None, None
        if claim is not None:
            claim.close()
        item.refuse(errors.CoreBusy(f"{MAX_PENDING} HELLOs are being verified, {victim.pending + 1} of them of "
                                    f"{victim.who()}: this one gave its place to another peer's; send HELLO again later"))
        out.extend(self._release(item.identity))    # under _lock: touches only this thread's state
        self._tidy(victim)
        return True

    def _hold(self, item: Item, share: Share) -> None:
        """Hold ``item`` behind its connection's claim, or refuse it (CoreBusy): its peer holds
        MAX_HELD_BYTES_PER_PEER, or all MAX_HELD_BYTES are held by peers holding no more than it."""
        size = sum(len(f) for f in item.frames)
        if share.held_bytes + size > MAX_HELD_BYTES_PER_PEER:
            item.refuse(errors.CoreBusy(f"{share.held_bytes} bytes of {share.who()} wait for HELLO verdicts (limit "
                                        f"{MAX_HELD_BYTES_PER_PEER} of one peer); this message was not taken, send "
                                        "it again"))
            return
        while self.held_bytes + size > MAX_HELD_BYTES:
            victim = max(self.shares.values(), key=lambda s: s.held_bytes)
            if victim is share or victim.held_bytes <= share.held_bytes + size:
                item.refuse(errors.CoreBusy(f"{self.held_bytes} bytes wait for HELLO verdicts (limit "
                                            f"{MAX_HELD_BYTES}); this message was not taken, send it again"))
                return
            newest = next(reversed(victim.held))
            self._unhold(newest)
            newest.refuse(errors.CoreBusy(f"{self.held_bytes} bytes wait for HELLO verdicts (limit {MAX_HELD_BYTES}), "
                                          f"most of them of {victim.who()}: this message gave its place to another "
                                          "peer's and was not taken, send it again"))
        item.size, item.share = size, share
        share.held[item] = None
        share.held_bytes += size
        self.held_bytes += size

    def _unhold(self, item: Item) -> None:
        share, item.share = item.share, None
        if share is not None:
            del share.held[item]
            share.held_bytes -= item.size
            self._tidy(share)
        self.held_bytes -= item.size
        item.size = 0

    def _release(self, identity: bytes) -> list[Item]:
        """The messages of connection ``identity`` whose turn has come (none waits for a verdict before them)."""
        waiting = self.held.get(identity)
        out: list[Item] = []
        while waiting and waiting[0].claim is None:
            item = waiting.popleft()
            if item.size:
                self._unhold(item)
            out.append(item)
        if waiting is not None and not waiting:
            del self.held[identity]
        return out

    def _next_turn(self) -> Share | None:
        """The first share in turn whose rest is over, taken out of the rotation (under ``_lock``);
        None after waiting (until a rest ends, or something changes)."""
        now = time.monotonic()
        for share in self._turns:
            if share.rest_until <= now:
                self._turns.remove(share)
                share.in_turn = False
                return share
        rests = [share.rest_until - now for share in self._turns]
        self._work_cv.wait(min(rests) if rests else None)
        return None

    def _work(self) -> None:
        while True:
            with self._lock:
                share = None
                while share is None and not self._closing:
                    share = self._next_turn()       # the peers in turn, one claim each
                if share is None:
                    return
                item = share.queued.popleft()
                share.judging += 1
            claim = item.claim
            assert claim is not None
            started = time.monotonic()
            try:
                verdict = self.ownership.judge(claim)
            except Exception as exc:    # a bug must not leave the connection waiting forever
                log.exception("judging a HELLO claim failed")
                verdict = Verdict(None, errors.ClaimRefused(f"the claim could not be checked: {exc}"))
            ended = time.monotonic()
            with self._lock:
                item.meta = verdict
                item.claim = None
                share.judging -= 1
                share.rest_until = ended + (ended - started) * JUDGE_REST
                self.pending -= 1
                self._done.append(item)
                if share.queued and not share.in_turn:
                    share.in_turn = True
                    self._turns.append(share)
            try:
                os.write(self._wake_w, b"!")
            except (BlockingIOError, OSError):
                pass
            else:
                self._written += 1      # after the write: the reader drains while _drained < _written

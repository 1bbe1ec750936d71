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

Bounds: at most MAX_PENDING claims being judged and MAX_HELD_BYTES bytes of messages held, in
all; a message beyond comes back at its turn with ``refused`` = CoreBusy and no frames, for the
server to answer (nothing is dropped silently).
"""
from __future__ import annotations

import collections
import logging
import os
import queue
import threading

from protocol import errors, header, messages, wire
from protocol.constants import Command
from vdsp_board.ownership import Claim, Ownership, Verdict

log = logging.getLogger("vdsp.hellogate")
MAX_PENDING = 256               # HELLO claims queued for the worker, in all
MAX_HELD_BYTES = 64 << 20       # bytes of messages waiting behind a claim, in all


class Item:
    """One message for the server to handle: ``meta`` is the received frame, or a HELLO's Verdict
    (``frame`` stays the received frame, for its properties);
    ``refused`` (then ``frames`` is empty): answer ``msg_id`` with this error instead."""

    __slots__ = ("identity", "frames", "meta", "frame", "peer", "refused", "msg_id", "claim", "size")

    def __init__(self, identity: bytes, frames: list, meta: object, peer: str) -> None:
        self.identity, self.frames, self.meta, self.peer = identity, frames, meta, peer
        self.frame = meta
        self.refused: errors.VdspError | None = None
        self.msg_id = 0
        self.claim: Claim | None = None     # set while its verdict is awaited
        self.size = 0

    def refuse(self, exc: errors.VdspError) -> None:
        self.refused, self.msg_id, self.frames = exc, wire.peek_msg_id(self.frames) or 0, []


class HelloGate:
    """``ownership`` judges the claims; :meth:`fileno` becomes readable when verdicts are ready."""

    def __init__(self, ownership: Ownership, name: str = "hello-gate") -> None:
        self.ownership = ownership
        self.held: dict[bytes, collections.deque[Item]] = {}
        self.held_bytes = 0
        self.pending = 0
        self._todo: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
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
        return identity not in self.held and header.command_of(frames[0]) != Command.HELLO

    def admit(self, identity: bytes, frames: list, meta: object = None, peer: str = "") -> list[Item]:
        """The messages to handle now, in order: this one, unless its connection waits for a verdict."""
        item = Item(identity, frames, meta, peer)
        claim = self._claim_of(item)
        waiting = self.held.get(identity)
        if claim is None and waiting is None:
            return [item]
        if waiting is None:
            waiting = self.held[identity] = collections.deque()
        if claim is not None:
            if self.pending >= MAX_PENDING:
                claim.close()
                item.refuse(errors.CoreBusy(f"{MAX_PENDING} HELLOs are being verified; send HELLO again later"))
            else:
                item.claim = claim
                self.pending += 1
                self._todo.put(item)
        elif waiting:
            size = sum(len(f) for f in frames)
            if self.held_bytes + size > MAX_HELD_BYTES:
                item.refuse(errors.CoreBusy(f"{self.held_bytes} bytes wait for HELLO verdicts (limit "
                                            f"{MAX_HELD_BYTES}); this message was not taken, send it again"))
            else:
                item.size = size
                self.held_bytes += size
        waiting.append(item)
        return self._release(identity)

    def ready(self) -> list[Item]:
        """Messages whose turn came since the last call (a verdict arrived), in each connection's order.

        Cheap when no verdict came (the firmware calls this before every task): the wake pipe is
        read only while a byte the worker wrote may be in it (no read syscall and no
        BlockingIOError per call)."""
        if not self._done and self._drained >= self._written:
            return []
        try:
            while data := os.read(self._wake_r, 4096):
                self._drained += len(data)
        except BlockingIOError:
            pass
        out: list[Item] = []
        while self._done:
            item = self._done.popleft()
            self.pending -= 1
            out.extend(self._release(item.identity))
        return out

    def close(self) -> None:
        self._todo.put(None)
        self._worker.join(timeout=5)
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)

    # --- inside ------------------------------------------------------------------------------------------
    def _claim_of(self, item: Item) -> Claim | None:
        """The claim of a HELLO that claims something, taken apart now; None for any other message."""
        frames = item.frames
        if not frames or header.command_of(frames[0]) != Command.HELLO:
            return None
        try:
            body = messages.check_body(wire.decode(frames)).body
        except errors.VdspError:
            return None                 # the server answers it as the malformed message it is
        claim = self.ownership.take(body, item.meta, item.peer)
        if claim.wants is None:
            return None
        return claim

    def _release(self, identity: bytes) -> list[Item]:
        waiting = self.held.get(identity)
        out: list[Item] = []
        while waiting and waiting[0].claim is None:
            item = waiting.popleft()
            self.held_bytes -= item.size
            out.append(item)
        if waiting is not None and not waiting:
            del self.held[identity]
        return out

    def _work(self) -> None:
        while True:
            item = self._todo.get()
            if item is None:
                return
            claim = item.claim
            assert claim is not None
            try:
                item.meta = self.ownership.judge(claim)
            except Exception as exc:    # a bug must not leave the connection waiting forever
                log.exception("judging a HELLO claim failed")
                item.meta = Verdict(None, errors.ClaimRefused(f"the claim could not be checked: {exc}"))
            item.claim = None
            self._done.append(item)
            try:
                os.write(self._wake_w, b"!")
            except (BlockingIOError, OSError):
                pass
            else:
                self._written += 1      # after the write: the reader drains while _drained < _written

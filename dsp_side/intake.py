"""What a firmware makes of each message it takes in, without sockets or threads.

Inputs: :meth:`Intake.take` (a message of connection ``identity``, past the HELLO gate:
``vdsp_board.identity.hellogate``), :meth:`Intake.take_items` (what the gate hands back), and
:meth:`Intake.hand_out` (fill the run queue). Outputs: :attr:`Intake.out`, the answers to send
now, in order, each ``[identity, *frames]`` (the caller sends and clears it), and
:attr:`Intake.runq`, the tasks handed to the compute side, ``(identity, frames, binding)``.

The run queue is a ``collections.deque`` shared with the compute thread, which pops from its
left (documented thread-safe, each pop atomic) and nothing else; the intake appends to its right
and takes back from its right. A task is *started* once popped, and whichever pop gets an item,
the compute thread's or the intake's, is the only one that does. The intake keeps at most
RUN_AHEAD tasks there, so that the compute thread runs quick tasks back to back without waiting
for the I/O thread between them, and keeps the inbox's order and promises for every task not
started: a task that arrives better placed than one in the run queue, or a CANCEL while any
waits there, first takes them all back into the inbox (``Inbox.give_back``); a task in the run
queue still counts in the inbox's bounds (``Inbox.lend``) until it is seen started
(``Inbox.settle``: when the run queue is shorter than what was handed out).

- A TASK joins the inbox (``dsp_side.inbox``: scheduling order, bounds), or is refused
  HB_DSP_BUSY past the inbox's limits: every TASK gets exactly one answer, here or from the task.
- A HELLO is answered READY and binds its connection to what it proved (its owner, the relay),
  or ERROR ClaimRefused, binding nothing (``vdsp_board.identity.ownership``).
- A CANCEL of a task still waiting releases it (its ERROR TaskCancelled, then the CANCEL's
  RESULT ``cancelled``); of any other (running, done, unknown): RESULT ``unknown``.
- HEARTBEAT and DISCONNECT get no answer; any other command an ERROR; a malformed message an
  ERROR when its msg_id can be read (0 is one-way: no answer).

Which owner a connection proved (:attr:`Intake.bindings`) is read when its task is handed out
to the run queue.
"""
from __future__ import annotations

import collections
import logging
from typing import Callable

from protocol import errors, header, messages, wire
from protocol.cancel import CancelOutcome
from protocol.constants import Command
from dsp_side.inbox import Inbox
from vdsp_board.identity.hellogate import Item
from vdsp_board.observability.log import RateLimited
from vdsp_board.identity.bindings import Bindings
from vdsp_board.identity.ownership import Ownership

log = logging.getLogger("vdsp.firmware")
RUN_AHEAD = 8       # tasks in the run queue, not started, at most


class Intake:
    """The intake of the firmware of ``core`` running image ``version``; ``ownership`` judges HELLOs."""

    def __init__(self, core: str, version: str, ownership: Ownership, inbox: Inbox | None = None,
                 run_ahead: int = RUN_AHEAD) -> None:
        self.core, self.version, self.ownership = core, version, ownership
        self.inbox = inbox if inbox is not None else Inbox()
        self.run_ahead = run_ahead
        self.runq: collections.deque[tuple[bytes, list, int | None]] = collections.deque()
        # the inbox entries handed out and not seen started, in order: runq holds the last
        # len(runq) of them (the compute thread pops the first ones)
        self.lent: collections.deque[tuple] = collections.deque()
        self.running = 0        # tasks handed out whose reply has not come back (:meth:`replied`)
        # Which owner each connection proved in its HELLO (or RELAY): its tasks may use that
        # owner's memory and what other owners granted it, nothing else (vdsp_board.identity.ownership).
        self.bindings = Bindings()
        self.out: list[list] = []
        self.warn = RateLimited(log)        # one line per peer per 10 s, however bad the flood

    def take_items(self, items: list[Item]) -> None:
        """What the HELLO gate handed back: each message, or the refusal of one it did not take."""
        for item in items:
            if item.refused is not None:
                if item.msg_id:
                    self.out.append([item.identity, *wire.encode(messages.error(item.msg_id, item.refused))])
            else:
                self.take(item.identity, item.frames, item.meta, item.peer)

    def take(self, identity: bytes, frames: list, meta: object = None, peer: str = "") -> None:
        """One message of connection ``identity``. ``meta``: a frame of it received with
        ``copy=False`` (its properties tell who sent a HELLO) or the gate's Verdict on its HELLO;
        ``peer``: the CURVE name on tcp."""
        try:
            queued = self._offer(identity, frames)
        except errors.CoreBusy as exc:          # bounded: the excess is refused, not held
            self.warn.warn(identity, "%s: refused a task of peer %s: %s", self.core, identity.hex(), exc.message)
            self.out.append([identity, *wire.encode(messages.error(wire.peek_msg_id(frames) or 0, exc))])
            return
        if not queued:
            self._answer(identity, frames, meta, peer)
        elif self.runq and self.inbox.best_key() < self.lent[-1][0]:    # type: ignore[operator]
            self._recall()          # it goes before a task not started yet: the order is made again

    def _offer(self, identity: bytes, frames: list) -> bool:
        """``Inbox.offer``, counting as started every task the compute thread has popped so far."""
        try:
            return self.inbox.offer(identity, frames)
        except errors.CoreBusy:
            if not self._settle():
                raise
        return self.inbox.offer(identity, frames)

    def hand_out(self) -> bool:
        """Fill the run queue with the best waiting tasks, up to ``run_ahead`` not started;
        whether any was added."""
        self._settle()
        runq, inbox = self.runq, self.inbox
        added = False
        while inbox and len(runq) < self.run_ahead:
            entry = inbox.lend()
            identity = entry[1]
            self.lent.append(entry)
            runq.append((identity, entry[2], self.bindings.get(identity)))
            self.running += 1
            added = True
        return added

    def replied(self) -> None:
        """The compute side is done with a task handed out (its reply, if any, came back)."""
        self.running -= 1

    def next_task(self) -> tuple[bytes, list, int | None] | None:
        """The best waiting task, started now by the caller (no run queue in between):
        ``(identity, frames, binding)``; None if none waits."""
        if not self.inbox:
            return None
        _, identity, frames = self.inbox.lend()
        self.inbox.settle(identity)
        return identity, frames, self.bindings.get(identity)

    def quick_task(self, quick: Callable[[list], bool]) -> tuple[bytes, list, int | None] | None:
        """The best waiting task, started now by the caller (as :meth:`next_task`), when nothing
        is handed out and ``quick(frames)`` says it is quick; else None."""
        if self.running or not self.inbox:
            return None
        entry = self.inbox.best()
        if entry is None or not quick(entry[2]):
            return None
        self._settle()
        return self.next_task()

    def _settle(self) -> int:
        """The tasks the compute thread took from the run queue have started: out of the inbox's
        bounds. How many."""
        lent, inbox = self.lent, self.inbox
        started = len(lent) - len(self.runq)        # runq only shrinks meanwhile: the rest next time
        for _ in range(started):
            inbox.settle(lent.popleft()[1])
        return started

    def _recall(self) -> None:
        """Take back every task of the run queue not started yet: into the inbox, in its order."""
        runq, lent = self.runq, self.lent
        while True:
            try:
                runq.pop()                  # atomic: this one has not started, and now will not
            except IndexError:
                break
            self.inbox.give_back(lent.pop())        # the same task: runq is the end of lent
            self.running -= 1
        self._settle()                      # what is left was started

    # --- answered now ---------------------------------------------------------------------------
    def _answer(self, identity: bytes, frames: list, meta: object, peer: str) -> None:
        if len(frames) >= 2 and header.command_of(frames[0]) == Command.CANCEL:
            self._cancel(identity, frames)
            return
        try:
            msg = messages.check_body(wire.decode(frames))
        except errors.VdspError as exc:
            msg_id = wire.peek_msg_id(frames)
            self.warn.warn("malformed", "%s: rejected malformed message: %s", self.core, exc)
            if msg_id:      # 0 = one-way
                self.out.append([identity, *wire.encode(messages.error(msg_id, exc))])
            return
        if msg.command is Command.HELLO:
            reply = self._hello(msg, identity, meta, peer)
        elif msg.command in (Command.HEARTBEAT, Command.DISCONNECT):
            return
        else:
            reply = messages.error(msg.msg_id, errors.ApiUseError(
                f"the firmware endpoint of {self.core} accepts TASK, CANCEL and HELLO, not {msg.command.name}"))
        self.out.append([identity, *wire.encode(reply)])

    def _cancel(self, identity: bytes, frames: list) -> None:
        try:
            msg = messages.check_body(wire.decode(frames))
        except errors.VdspError as exc:
            self.out.append([identity, *wire.encode(messages.error(wire.peek_msg_id(frames) or 0, exc))])
            return
        target = msg.body["target"]
        if self.runq:
            self._recall()      # a task not started is in the inbox again: it can be released
        if self.inbox.cancel(identity, target) is None:     # running, done or never seen
            self.out.append([identity, *wire.encode(messages.result(msg.msg_id, {
                "state": CancelOutcome.UNKNOWN.value, "target": target}))])
            return
        released = errors.TaskCancelled(f"task {target} released before it started on {self.core}")
        self.out.append([identity, *wire.encode(messages.error(target, released))])
        self.out.append([identity, *wire.encode(messages.result(msg.msg_id, {
            "state": CancelOutcome.CANCELLED.value, "target": target}))])

    def _hello(self, msg: wire.Message, identity: bytes, meta: object, peer: str) -> wire.Message:
        """READY, binding the connection to what it proved; ERROR ClaimRefused (and no binding) otherwise."""
        try:
            binding = self.ownership.claim(msg.body, meta, peer)
        except errors.ClaimRefused as exc:
            self.bindings.set(identity, None)
            return messages.error(msg.msg_id, exc)
        self.bindings.set(identity, binding)
        return messages.ready(msg.msg_id, self.core, "firmware", firmware_version=self.version, state="running")

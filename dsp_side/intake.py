"""What a firmware makes of each message it takes in, without sockets or threads.

Inputs: :meth:`Intake.take` (a message of connection ``identity``, past the HELLO gate:
``vdsp_board.hellogate``), :meth:`Intake.take_items` (what the gate hands back), and
:meth:`Intake.next_task` (the compute side is free: the best waiting task, with the binding of
its connection). Output: :attr:`Intake.out`, the answers to send now, in order, each
``[identity, *frames]``; the caller sends and clears it.

- A TASK joins the inbox (``dsp_side.inbox``: scheduling order, bounds), or is refused
  HB_DSP_BUSY past the inbox's limits: every TASK gets exactly one answer, here or from the task.
- A HELLO is answered READY and binds its connection to what it proved (its owner, the relay),
  or ERROR ClaimRefused, binding nothing (``vdsp_board.ownership``).
- A CANCEL of a task still waiting releases it (its ERROR TaskCancelled, then the CANCEL's
  RESULT ``cancelled``); of any other (running, done, unknown): RESULT ``unknown``.
- HEARTBEAT and DISCONNECT get no answer; any other command an ERROR; a malformed message an
  ERROR when its msg_id can be read (0 is one-way: no answer).

Which owner a connection proved (:attr:`Intake.bindings`) is read when its task is handed out,
so a HELLO answered before a task starts binds that task.
"""
from __future__ import annotations

import logging

from protocol import errors, header, messages, wire
from protocol.cancel import CancelOutcome
from protocol.constants import Command
from dsp_side.inbox import Inbox
from vdsp_board.hellogate import Item
from vdsp_board.log import RateLimited
from vdsp_board.ownership import Bindings, Ownership

log = logging.getLogger("vdsp.firmware")


class Intake:
    """The intake of the firmware of ``core`` running image ``version``; ``ownership`` judges HELLOs."""

    def __init__(self, core: str, version: str, ownership: Ownership, inbox: Inbox | None = None) -> None:
        self.core, self.version, self.ownership = core, version, ownership
        self.inbox = inbox if inbox is not None else Inbox()
        # Which owner each connection proved in its HELLO (or RELAY): its tasks may use that
        # owner's memory and what other owners granted it, nothing else (vdsp_board.ownership).
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
            queued = self.inbox.offer(identity, frames)
        except errors.CoreBusy as exc:          # bounded: the excess is refused, not held
            self.warn.warn(identity, "%s: refused a task of peer %s: %s", self.core, identity.hex(), exc.message)
            self.out.append([identity, *wire.encode(messages.error(wire.peek_msg_id(frames) or 0, exc))])
            return
        if not queued:
            self._answer(identity, frames, meta, peer)

    def next_task(self) -> tuple[bytes, list, int | None] | None:
        """The best waiting task, taken out of the inbox: (connection, frames, its binding); None if none waits."""
        if not self.inbox:
            return None
        identity, frames = self.inbox.pop()
        return identity, frames, self.bindings.get(identity)

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

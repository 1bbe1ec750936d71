"""Replies that leave a firmware together, without sockets or a clock (the I/O thread gives the times).

Replies sent back to back wake the peer's I/O once, not once per reply, so the reply of a task
may wait for the next task's (it is *held*), and only while each of these holds:

- another task runs next (``more``): its reply follows soon;
- the task computed for less than HOLD_TASK_S (a slow task's reply is never held);
- fewer than HOLD_MAX replies are held, the first of them for less than HOLD_S.

Past HOLD_S the held replies are due (:meth:`ReplyBatch.due_in`: the I/O thread waits no longer
than that for the next task's reply). An answer that is not a task's reply (a refusal, a
CANCEL's answer, READY) leaves at once, after the held replies (:meth:`ReplyBatch.answer`):
every reply leaves in the order it was made, and a flood's refusals leave while the flood is
read, not as one burst past the peer's high-water mark.

Each reply is a list of frames, the connection's identity first; what a method returns is to
be sent, in order.
"""
from __future__ import annotations

HOLD_TASK_S, HOLD_S, HOLD_MAX = 50e-6, 200e-6, 16


class ReplyBatch:
    __slots__ = ("held", "since", "hold_task_s", "hold_s", "hold_max")

    def __init__(self, hold_task_s: float = HOLD_TASK_S, hold_s: float = HOLD_S, hold_max: int = HOLD_MAX) -> None:
        self.hold_task_s, self.hold_s, self.hold_max = hold_task_s, hold_s, hold_max
        self.held: list[list] = []      # in the order they were made
        self.since = 0.0                # when the first of them was held

    def reply(self, frames: list, took_s: float, now: float, more: bool) -> list[list]:
        """The reply ``frames`` of a task that computed ``took_s`` seconds, back at ``now``;
        ``more``: another task runs next. The replies to send now (the held ones and this one,
        in order), or [] while they wait for the next task's."""
        held = self.held
        if not held:
            self.since = now
        held.append(frames)
        if more and took_s < self.hold_task_s and len(held) < self.hold_max and now - self.since < self.hold_s:
            return []
        self.held = []
        return held

    def answer(self, frames: list) -> list[list]:
        """An answer that leaves at once: the held replies, then it."""
        out, self.held = self.held, []
        out.append(frames)
        return out

    def due_in(self, now: float) -> float | None:
        """Seconds until the held replies are due (0 or less: now); None while none is held."""
        return self.since + self.hold_s - now if self.held else None

    def take(self) -> list[list]:
        """The held replies (they are due, or the firmware unloads)."""
        out, self.held = self.held, []
        return out

    def __len__(self) -> int:
        return len(self.held)

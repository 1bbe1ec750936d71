"""The firmware's task slices in the SoC trace (``vdsp_board.observability.trace``).

Tasks are recorded as tuples (``trace.SCHEMAS["task"]``); each operator's name once per file
(an ``opname`` event).

While tracing is on, each task the firmware runs becomes one ``task`` event stamped at its
end with its start: the msg_id and operator from the header, the connection's binding (the
relay, or the direct client's DDR owner: ``vdsp_board.identity.ownership``), which is how the
merge finds the task's other slices, and the error code (0: RESULT; ``crash`` when the
operator took the firmware down, written out before the process exits) and the task's
board-time estimate in µs (``board_us``: RESULT's, None when it has none; PROTOCOL.md §5.3).

What an operator reports of its task (``OperatorContext.note``: a C kernel's TCM bank
conflicts) is an event of its own kind stamped when reported, a map with the task's ``id``
and ``op`` beside the operator's fields (``bank_conflict``: ``kernel``, ``count``, ``first``).
"""
from __future__ import annotations

import time

from protocol import errors, header, wire
from protocol.constants import Command
from vdsp_board.observability import trace

IDLE_FLUSH_S = 0.05


class TaskTrace:
    def __init__(self, core: str, names=None) -> None:
        self.rec = trace.Recorder("firmware", core)
        self.names = names or (lambda op: "")     # op id -> operator name
        self.named: set[int] = set()             # operators whose name this session's file has
        self.session: str | None = None
        self.cur: tuple | None = None
        self.last_flush = 0.0

    def begin(self, frames: list, binding) -> None:
        """A task starts (call only while ``rec.on``)."""
        self.cur = (trace.now_ns(), frames[0], binding)

    def note(self, kind: str, fields: dict) -> None:
        """An event ``kind`` of the running task (nothing when it is not traced)."""
        if self.cur is None:
            return
        head = self.cur[1]
        op = int.from_bytes(head[4:6], "little") if len(head) == header.SIZE else 0
        self.rec.emit(kind, {"id": header.msg_id_of(head), "op": op, **fields})

    def end(self, reply: list | None, code=None, board_us: float | None = None) -> None:
        if self.cur is None:
            return
        t0, head, binding = self.cur
        self.cur = None
        if code is None:
            code = 0
            if reply and header.command_of(reply[0]) == Command.ERROR:
                try:
                    code = int(wire.unpack_body(bytes(reply[1])).get("code", 0))
                except (errors.VdspError, TypeError, ValueError, IndexError):
                    code = errors.OperatorFailed.code
        op = int.from_bytes(head[4:6], "little") if len(head) == header.SIZE else 0
        if self.session != self.rec.session:        # a new file: the operators' names again
            self.session, self.named = self.rec.session, set()
        if op not in self.named:
            self.named.add(op)
            try:
                name = self.names(op)
            except Exception:
                name = ""
            self.rec.emit("opname", {"op": op, "name": name}, t0)
        self.rec.emit("task", (t0, header.msg_id_of(head), op, binding, code, board_us))

    def poll(self, idle: bool = False) -> None:
        """Look at the switch (``trace.Recorder.poll``); ``idle``: the firmware is about to wait
        for work, so write what was recorded (at most every IDLE_FLUSH_S): a SIGKILL then
        loses little."""
        if idle and self.rec.events:
            now = time.monotonic()
            if now - self.last_flush >= IDLE_FLUSH_S:
                self.last_flush = now
                self.rec.flush()
        self.rec.poll()

    def crashed(self) -> None:
        """The running task crashes the firmware: record it and write everything out now."""
        if self.cur is not None:
            self.end(None, "crash")
            self.rec.flush()

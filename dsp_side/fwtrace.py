"""The firmware's task slices in the SoC trace (``vdsp_sim.board.trace``).

While tracing is on, each task the firmware runs becomes one ``task`` event stamped at its
end with its start: the msg_id and operator from the header, the connection's binding (the
relay, or the direct client's DDR owner: ``vdsp_sim.board.ownership``), which is how the
merge finds the task's other slices, and the error code (0: RESULT; ``crash`` when the
operator took the firmware down, written out before the process exits).
"""
from __future__ import annotations

from protocol import errors, header, wire
from protocol.constants import Command
from vdsp_sim.board import trace


class TaskTrace:
    def __init__(self, core: str, names=None) -> None:
        self.rec = trace.Recorder("firmware", core)
        self.names = names or (lambda op: "")     # op id -> operator name
        self.cur: tuple | None = None

    def begin(self, frames: list, binding) -> None:
        """A task starts (call only while ``rec.on``)."""
        self.cur = (trace.now_ns(), frames[0], binding)

    def end(self, reply: list | None, code=None) -> None:
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
        try:
            name = self.names(op)
        except Exception:
            name = ""
        self.rec.emit("task", {"t0": t0, "id": header.msg_id_of(head), "op": op, "name": name,
                               "bind": binding, "code": code})

    def crashed(self) -> None:
        """The running task crashes the firmware: record it and write everything out now."""
        if self.cur is not None:
            self.end(None, "crash")
            self.rec.flush()

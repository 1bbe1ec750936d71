"""A firmware's I/O thread: the one owner of the firmware's socket, from its start to the close.

The socket is made and bound by the main thread, then passed once to this thread
(``Thread.start`` is the full memory barrier ZeroMQ asks for when a socket changes threads);
from then on no other thread touches it or what it feeds: the HELLO gate's intake side
(``vdsp_board.identity.hellogate``), the :class:`~dsp_side.intake.Intake` (inbox, bindings, CANCEL,
refusals) and the :class:`~dsp_side.replybatch.ReplyBatch`. It hands the compute thread tasks
over :attr:`FirmwareIO.jobs` (the intake's run queue: a few ahead, taken back when the order
or a CANCEL asks) and takes the replies back over :attr:`FirmwareIO.done` (``dsp_side.handoff``:
a queue and an eventfd each), so everything that arrives is answered while a task computes: a
CANCEL of a waiting task, a HELLO, a refusal past the inbox's limits.

One turn of the loop: wait (unless something is known to wait) for the socket, the gate's
verdicts, the compute thread's replies, or the held replies' due time; take in at most
INTAKE_MAX messages (a flood that never stops arriving does not keep the replies and the next
tasks waiting); pass on the gate's verdicts; take the compute thread's replies; fill its run
queue (after the quick path, below); send what is due.

The quick path: when nothing is handed out and the best waiting task is quick by the firmware's
word (``runner.quick``: its body checked before, its runs under 50 µs, one preempted run
forgiven: a no-op, a small copy), this thread runs it itself, holding ``runner.computing`` (the
compute thread holds it but while it waits, so one task runs at a time still), and sends its
reply; then the next one, while quick, for QUICK_TURN_S at most (a quick task left then
waits for the next turn, which does
not sleep); what is not quick is handed out. A sequential caller's task then
wakes no thread of the firmware but this one, as a raw worker's would (before: this thread woke
the compute thread and was woken by it, two thread switches and two turns of this loop per
task), and a flood of quick tasks costs no hand-over each. A turn of quick tasks delays what
arrives meanwhile by QUICK_TURN_S and one task at most (the held replies' HOLD_S is as long).

The GIL: this thread needs it for each turn. An operator that lets go
of it while it computes (OpenCV, numba, numpy's large loops, C kernels, ``time.sleep``) leaves
it free; one that holds it (pure Python loops) lets this thread run once per switch interval
(5 ms by default), and a turn then waits that long at most before it runs; quick tasks in the
run queue run back to back, and this thread runs when the queue is empty.
"""
from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import Any

import zmq
from zmq.backend import zmq_poll

from dsp_side.handoff import Mailbox
from dsp_side.intake import Intake
from dsp_side.replybatch import ReplyBatch
from vdsp_board.identity import curve
from vdsp_board.identity.admission import Admission
from vdsp_board.identity.hellogate import HelloGate
from vdsp_board.sockets.zsock import NOBLOCK, recv_routed, send_frames

log = logging.getLogger("vdsp.firmware")
INTAKE_MAX = 256        # messages taken in per turn, at most
QUICK_TURN_S = 200e-6   # quick tasks run on this thread one after another for so long at most (a turn)
IO_FAILED_EXIT = 71     # the I/O thread failed (a bug): the process exits, the core sees it die
STOP = None             # on ``done``: the firmware unloads (send what is held, close, end the thread)
STOP_WAIT_S = 5.0       # how long stop() waits for the thread to end
_POLLIN = int(zmq.POLLIN)


class FirmwareIO:
    """Serves ``sock`` (a bound ROUTER; ``tcp``: it authenticates peers with CURVE) on a thread of its own.

    The compute thread pops ``(identity, frames, binding)`` from the left of :attr:`jobs`'s
    queue (clearing its doorbell before it waits) and puts ``(identity, reply frames or None,
    seconds computed)`` on :attr:`done`, one per task, in order."""

    def __init__(self, sock: zmq.Socket, admission: Admission, intake: Intake, *, tcp: bool, name: str,
                 runner: Any = None) -> None:
        """``runner``: what runs a quick task on this thread (``dsp_side.firmware.Firmware``: its
        ``computing`` lock, ``quick(frames)`` and ``run_job(job, idle)``); None: no quick path."""
        self.sock, self.admission, self.intake, self.tcp = sock, admission, intake, tcp
        self.runner = runner
        self.jobs, self.done = Mailbox(intake.runq), Mailbox()
        self.batch = ReplyBatch()
        self.hellos = HelloGate(intake.ownership, f"{name}-hello")     # HELLO claims judged off this thread
        self._io_thread = threading.Thread(target=self._run, name=f"{name}-io", daemon=True)

    def start(self) -> None:
        """From now on only the I/O thread uses the socket."""
        self._io_thread.start()

    def stop(self) -> None:
        """The firmware unloads (from the compute thread): the replies it put on :attr:`done`
        leave, the held ones too, then the thread closes the socket and ends."""
        self.done.put(STOP)
        self._io_thread.join(STOP_WAIT_S)
        if self._io_thread.is_alive():
            log.error("the firmware's I/O thread did not end within %.0f s", STOP_WAIT_S)

    # --- the I/O thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._serve()
        except BaseException:   # a bug: a firmware that no longer reads its socket must not live on
            log.critical("the firmware's I/O thread failed: the firmware exits", exc_info=True)
            os._exit(IO_FAILED_EXIT)
        finally:
            self.hellos.close()
            self.admission.stop()
            self.sock.close(0)

    def _serve(self) -> None:
        sock, done, batch, intake, hellos = self.sock, self.done, self.batch, self.intake, self.hellos
        done_fd, verdict_fd = done.fileno(), hellos.fileno()
        # zmq_poll itself (zmq.Poller.poll is a Python frame a turn)
        items: list[tuple] = [(sock, _POLLIN), (verdict_fd, _POLLIN), (done_fd, _POLLIN)]
        arrived = False             # a message is known to wait on the socket
        quick = False               # quick tasks wait for the next turn of the quick path
        while True:
            returned = bool(done)   # a reply is known to wait on ``done``
            verdicts = True         # the gate's verdicts are looked for, unless this turn's wait said none came
            if not arrived and not returned:
                due = batch.due_in(time.monotonic())
                timeout = 0 if quick else -1 if due is None else max(0, math.ceil(due * 1000))
                verdicts = False
                for what, _ in zmq_poll(items, timeout):
                    if what is sock:
                        arrived = True
                    elif what == done_fd:
                        returned = True
                    elif what == verdict_fd:    # the gate's worker writes after it queues a verdict
                        verdicts = True
            arrived = self._take_in(arrived)
            if verdicts:    # verdicts reached off this thread, and what waited on them
                intake.take_items(hellos.ready())
            if intake.out:
                self._answer()
            quick = self._quick()
            handed = not quick and intake.hand_out()    # rung at the end of the turn (below)
            if returned:
                for item in done.take():
                    if item is STOP:
                        self._send(batch.take())
                        return
                    identity, reply, took = item
                    intake.replied()
                    if reply is not None:       # held while another task's reply follows
                        more = intake.running > 0 or bool(intake.inbox)
                        self._send(batch.reply([identity, *reply], took, time.monotonic(), more))
            due = batch.due_in(time.monotonic())
            if due is not None and due <= 0:
                self._send(batch.take())
            if handed:      # last thing before this thread waits: the compute thread it wakes finds the GIL free
                self.jobs.bell.ring()

    def _quick(self) -> bool:
        """The quick path (module docstring): the best waiting tasks, while each is quick, for
        QUICK_TURN_S at most. True: its turn ended with a quick task waiting (left for the next
        turn, not handed out)."""
        runner, intake, batch = self.runner, self.intake, self.batch
        if runner is None or intake.running or not intake.inbox:
            return False
        if not runner.computing.acquire(False):     # the compute thread is between tasks (positional: no kwargs dict)
            return False
        try:
            end = time.monotonic() + QUICK_TURN_S
            while True:
                job = intake.quick_task(runner.quick)
                if job is None:
                    return False
                reply, took = runner.run_job(job, not intake.inbox)     # idle
                now = time.monotonic()
                if reply is not None:       # held while another task's reply follows
                    self._send(batch.reply([job[0], *reply], took, now, bool(intake.inbox)))
                if now >= end:
                    best = intake.inbox.best()
                    return best is not None and runner.quick(best[2])
        finally:
            runner.computing.release()

    def _take_in(self, arrived: bool) -> bool:
        """Take in what has arrived, INTAKE_MAX messages at most, answering as it goes; whether
        more may wait. It receives until none waits: the last, failed receive (no exception in the
        compiled build) has libzmq look at its commands as an EVENTS read would, once a turn
        instead of once a message (0.9 µs each here; and no pyzmq Frame a message: 0.8 µs)."""
        if not arrived:
            return False
        sock, intake, hellos = self.sock, self.intake, self.hellos
        for _ in range(INTAKE_MAX):
            got = recv_routed(sock)
            if got is None:
                return False
            identity, frames, meta = got    # meta: the identity frame's properties (the peer's credentials)
            if frames:
                peer = curve.peer_name(meta) if self.tcp else ""
                if hellos.passes(identity, frames):
                    intake.take(identity, frames, meta, peer)
                else:
                    intake.take_items(hellos.admit(identity, frames, meta, peer))
                if intake.out:
                    self._answer()
        return True

    def _answer(self) -> None:
        """The intake's answers leave now, after the replies held before them."""
        out = self.intake.out
        self._send(self.batch.answer(out[0]))
        self._send(out[1:])
        out.clear()

    def _send(self, replies: list[list]) -> None:
        """Send each of ``replies`` (identity first). NOBLOCK: a ROUTER without router_mandatory
        never waits (past a connection's SNDHWM, or to a peer gone, ZeroMQ drops the message), and
        a call that cannot wait keeps the GIL (the compiled build's frame calls): 0.36 µs a send
        less here, 1-2 µs of the firmware's CPU a task under a pipelined load (alternated SoCs)."""
        sock = self.sock
        for frames in replies:
            try:
                send_frames(sock, frames, NOBLOCK)
            except zmq.Again:       # not from such a socket; if ever, the reply is dropped as at SNDHWM
                log.warning("a reply to %s was dropped: its connection takes no more", frames[0].hex())

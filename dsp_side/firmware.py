"""The firmware process of one core: binds the task endpoint and runs tasks one at a time.

Started by the core (forked from its starter, or ``python -m dsp_side.firmware_main ...``). It prints one JSON
line on stdout once it serves (firmware version and operator table), or
``{"refused": why}`` if the image fails verification (signature, header, payload,
manifest: see ``dsp_side.fw_image.load``) and exits; its stdout closing tells the
core it died; ``{"failed": why}`` if it cannot serve (it could not bind its endpoint).
A task is validated (operator, buffer
counts, parameters, handles) before compute, so a bad task is an error reply;
an exception that is not a ``VdspError`` escaping an operator is a firmware
crash: a crash report is written and the process exits with ``CRASH_EXIT``.

Two threads, each the one owner of what it touches. The *I/O thread* (``dsp_side.fwio``) owns
the socket for good: it takes in and answers what arrives (HELLO, CANCEL, refusals: the
sans-I/O ``dsp_side.intake``), batches the replies (``dsp_side.replybatch``) and hands the
*compute thread* the tasks to run in order, each with the binding of its connection, over a
queue and an eventfd (``dsp_side.handoff``: a few ahead, taken back while not started when a
better-placed task or a CANCEL arrives); the compute thread runs them one at a time and hands
each reply back. So whatever arrives is answered while a task computes, and no thread ever
waits for a socket another one holds.

The compute thread is the main thread. What decides it: Python runs signal handlers on the
main thread only, and the core's SIGUSR1 (unload) must end the compute loop, which waits on the
signals' wake-up fd (``signal.set_wakeup_fd`` may be set there only); and the operators' init
and destroy hooks run on the main thread, before and after serving, so a kernel computes on the
thread that made its state (thread-local state; ``signal.signal`` in a kernel, which Python
allows on the main thread only). What does not need it, checked: OpenCV (headless) and numba
compute on any thread, the latter's workqueue layer only refuses two threads at once, which
one compute thread never is; a crash is ``os._exit`` after the crash report, from any thread,
and a fatal signal in C code ends the whole process, which the core sees die; the watchdog
word is written around each task by the thread that runs it, beaten by a thread of its own,
and judged by the core from outside.

Whose memory a task may touch is decided first: each connection is bound to the
owner its HELLO proved, or to the relay once it proved itself (``vdsp_board.identity.ownership``);
a direct client's handles must be its own or granted to it, the relay's were
checked by the relay.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import select
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import zmq

from protocol import errors, header, messages, schema, wire
from protocol.constants import DEFAULT_WATCHDOG_MS, MAX_RAW_FRAME, Command
from dsp_side import heap, fw_image, signing
from dsp_side.ckernel import board_model
from dsp_side.ddr_resolver import Resolver
from dsp_side.fwio import FirmwareIO
from dsp_side.fwtrace import TaskTrace
from dsp_side.intake import Intake
from dsp_side.registry import OperatorState, Registry
from dsp_side.watchdog import WatchdogWord
from vdsp_board.processes import proc, rundir
from vdsp_board.observability import log as soclog
from vdsp_board.identity import curve, peerproof
from vdsp_board.identity.admission import Admission
from vdsp_board.identity.ownership import Ownership

CRASH_EXIT = 70
PURGE_EVERY_S = 1.0
EXCEPTION_TEXT_MAX = 300  # characters of a crashing operator's exception passed on (type: message)
REPLY_SNDHWM = 4096       # replies queued for one connection (see open_endpoint())
PLAN_MAX, PLAN_BODY_MAX, PLAN_BYTES = 256, 16 << 10, 1 << 20    # TASK bodies whose plan is kept (_Plan)
_RESULT = int(Command.RESULT)   # a plain int: struct packs it without an IntEnum's __index__ call
QUICK_S = 50e-6           # a planned task that runs in less is quick (Firmware.quick: the I/O thread may run it)
# A quick plan stays quick through one run over QUICK_S and turns slow at QUICK_STRIKES in a row. On
# a busy host a preemption makes one run of a no-op slow, and when one such run turned the plan
# slow, the next tasks went to the compute thread, a hand-over each: direct mode ran 6 % fewer
# tasks/s and its firmwares spent 1.4 µs more CPU a task (8 alternated pairs of SoCs).
QUICK_STRIKES = 2
# Tried and rejected: ZeroMQ's I/O thread as SCHED_BATCH (ctx.set(zmq.THREAD_SCHED_POLICY, ...)) saved the
# firmwares ~1.5 µs of CPU per PING task under a pipelined load, but delayed each reply until this
# thread waits or a CPU is idle: the no-op p50 through the relay was 20-40 µs worse (1.36-1.48x the
# raw-pyzmq baseline vs 1.26-1.33x without, alternated 4x; tasks/s unchanged). os.sched_yield() after
# sending gave the CPU away to any other process under load: rejected too.
log = logging.getLogger("vdsp.firmware")


class OperatorContext:
    """What an operator sees of its environment."""

    __slots__ = ("core", "log", "msg_id", "watchdog_ms", "state", "board", "note", "crash_file")

    def __init__(self, core: str, watchdog_ms: int = DEFAULT_WATCHDOG_MS) -> None:
        self.core = core
        self.log = logging.getLogger(f"vdsp.op.{core}")
        self.msg_id = 0
        self.watchdog_ms = watchdog_ms      # the core kills a task that runs this long
        self.state: Any = None              # the running operator's OperatorState (lifecycle hooks)
        self.board: Any = None               # a C kernel's board-time estimate of the running task
        self.note: Callable[[str, dict], None] | None = None   # an event of the running task's trace
        self.crash_file: str | None = None  # where a crash report goes (C kernels: an ASan image's stop)


class _Plan:
    """What checking a TASK body gave: its operator, handles and validated parameters.

    Kept per body bytes (at most PLAN_MAX bodies of at most PLAN_BODY_MAX bytes, PLAN_BYTES in
    all): a task whose body is byte for byte one checked before (same operator in its header)
    skips the decode and
    the body, count and parameter checks, which are functions of those bytes alone (the schema
    memo did that for parameters already). What can change between two such tasks is still
    checked on every task: the ownership of the handles (grants come and go), and each handle's
    memory (freed, replaced or resized segments: ``Resolver.array``); a body with no handles has
    neither to check. ``quick``: its last run through the plan took under QUICK_S, or it was
    quick and fewer than QUICK_STRIKES runs in a row since took longer (:meth:`Firmware.quick`)."""

    __slots__ = ("op", "body", "spec", "state", "inputs", "outputs", "params", "quick", "slow", "table_us", "tabled")

    def __init__(self, op: int, body: dict, spec, state: OperatorState, inputs: list, outputs: list,
                 params: dict) -> None:
        self.op, self.body, self.spec = op, body, spec
        self.state = state      # the operator's (Registry.state: one object from its registration on)
        self.inputs, self.outputs, self.params = inputs, outputs, params
        self.quick = False
        self.slow = 0       # runs in a row over QUICK_S since it was last quick
        # the operator's table estimate (board_model.table_us): a function of its name and its
        # buffers' sizes, which are the handles' sizes (Resolver.array), so of the plan alone
        self.table_us: float | None = None
        self.tabled = False     # table_us is known


class Firmware:
    """Sans-socket task executor (the compute thread's): a TASK's frames and binding in, reply frames out."""

    def __init__(self, core: str, version: str, registry: Registry, watchdog: WatchdogWord | None,
                 crash_file: str | None, watchdog_ms: int = DEFAULT_WATCHDOG_MS) -> None:
        self.core, self.version, self.registry = core, version, registry
        self.watchdog, self.crash_file = watchdog, crash_file
        self.resolver = Resolver()
        self.ctx = OperatorContext(core, watchdog_ms)
        self.ctx.crash_file = crash_file
        self.warn = soclog.RateLimited(log)
        # Judges HELLOs (the intake's, on the I/O thread and the HELLO gate's worker) and checks
        # each task's handles against its connection's binding (here): ownership.check_task reads
        # only the access lists, whose reader is thread-safe (vdsp_board.memory.acl.Reader)
        self.ownership = Ownership(f"{core} firmware", accept_relay=True, accepted=peerproof.accept_records())
        self.board: float | None = None     # the last task's board_us (its trace event's), None: no estimate
        self.unloading = False      # set by SIGUSR1 (the core stops us): serve returns, destroy hooks run
        # An in-process host of this firmware (the loopback SoC, the fuzzer) handles an operator's
        # crash here instead of the report and the exit (a compiled class's methods are not replaced)
        self.on_crash: Callable[[wire.Message, str, dict], None] | None = None
        self.trace = TaskTrace(core, lambda op: self.registry.get(op).name)   # task slices while tracing is on
        self.ctx.note = self.trace.note     # what an operator reports of its task (C kernels: bank conflicts)
        self._plans: dict[bytes, _Plan] = {}    # TASK body bytes -> what checking them gave (see _Plan)
        self._plan_bytes = 0
        # Held by the thread that computes (a task, or the compute thread's work between tasks:
        # the trace, the purge): one task at a time, whichever thread runs it (:meth:`quick`).
        self.computing = threading.Lock()

    def init_operators(self) -> None:
        """The operators' init hooks (registry.init_all). Raises what a hook raises."""
        self.registry.init_all(self.ctx)

    def destroy_operators(self) -> None:
        """The operators' destroy hooks, at unload."""
        self.registry.destroy_all(self.ctx, log)

    def intake(self) -> Intake:
        """A fresh intake for this firmware's endpoint (its I/O thread's), judging HELLOs with our ownership."""
        return Intake(self.core, self.version, self.ownership)

    def run(self, frames: list, binding: int | None = None) -> list | None:
        """Reply frames for one TASK (frames without the identity) of a connection bound to
        ``binding`` (its verified owner, RELAY, or None), or None (malformed with msg_id 0)."""
        self.board = None
        if len(frames) == 2:            # a TASK whose body bytes were checked before (see _Plan)
            plan = self._plans.get(frames[1]) if type(frames[1]) is bytes else None
            if plan is not None:
                msg_id = header.task_id_of(frames[0], plan.op)     # None: the full decode below answers it
                if msg_id is not None:
                    t0 = time.perf_counter()
                    reply = self.execute(msg_id, plan, binding, t0)
                    if time.perf_counter() - t0 < QUICK_S:
                        plan.quick, plan.slow = True, 0
                    elif plan.quick:
                        plan.slow += 1
                        plan.quick = plan.slow < QUICK_STRIKES
                    return self._encode_result(msg_id, plan.op, reply)
        try:
            msg = messages.check_body(wire.decode(frames))
        except errors.VdspError as exc:
            msg_id = wire.peek_msg_id(frames)
            self.warn.warn("malformed", "%s: rejected malformed message: %s", self.core, exc)
            return wire.encode(messages.error(msg_id, exc)) if msg_id else None  # 0 = one-way
        if msg.command is not Command.TASK:     # the inbox queues TASK headers only
            return wire.encode(messages.error(msg.msg_id, errors.ApiUseError(f"{msg.command.name} is not a TASK")))
        key = frames[1] if type(frames[1]) is bytes and len(frames) == 2 else None
        return self._encode_result(msg.msg_id, msg.op, self.run_task(msg, binding, key))

    def quick(self, frames: list) -> bool:
        """Whether the TASK ``frames`` (without the identity) is quick: its body is byte for byte
        one checked before, for the operator in its header, and its plan is quick (its last run
        took under QUICK_S, or fewer than QUICK_STRIKES runs in a row took longer since one did:
        a preemption does not make a no-op slow).
        The I/O thread (``dsp_side.fwio``) runs a quick task itself when nothing else is handed
        out and it holds :attr:`computing`: a no-op's reply then leaves with no thread woken."""
        if len(frames) != 2 or type(frames[1]) is not bytes or self.unloading:
            return False
        plan = self._plans.get(frames[1])
        if plan is None or not plan.quick:
            return False
        return header.task_id_of(frames[0], plan.op) is not None     # the check run() makes

    def run_job(self, job: tuple, idle: bool = False) -> tuple[list | None, float]:
        """Run the handed-out task ``job`` (``(identity, frames, binding)``; the caller holds
        :attr:`computing`): its reply frames (None: none to send, or the firmware unloads: as on
        a powered-off DSP the result is never sent) and the seconds it computed. ``idle``: no
        task follows (the quick path): the trace is written as before the compute thread waits."""
        _, frames, binding = job
        trace = self.trace
        rec = trace.rec
        if time.monotonic() >= rec.due:     # before then the call only answers ``on``: a Python call a task saved
            rec.poll()      # the trace switch (one stat every 0.25 s), before the task: traced if it is on
        traced = rec.on
        if traced:
            trace.begin(frames, binding)
        started = time.perf_counter()
        reply = self.run(frames, binding)
        took = time.perf_counter() - started
        if traced:
            trace.end(reply, board_us=self.board)
            if idle:
                trace.poll(idle=True)
        return (None if self.unloading else reply), took

    @staticmethod
    def _encode_result(msg_id: int, op: int, reply: dict | wire.Message) -> list:
        """The frames of ``reply``: a RESULT's body (packed as ``wire.encode`` packs a
        ``messages.result``, without the Message: ~3 µs a task) or an ERROR."""
        try:
            if isinstance(reply, dict):
                return [header.pack(_RESULT, msg_id), wire.pack_body(reply)]
            return wire.encode(reply)
        except errors.VdspError as exc:  # an operator returned values msgpack cannot carry
            return wire.encode(messages.error(msg_id, errors.OperatorFailed(
                f"operator 0x{op:04x}: result is not encodable: {exc.message}")))

    def _operator(self, op_id: int):
        """The operator's spec; raises UnknownOperator naming this core and its firmware."""
        try:
            return self.registry.get(op_id)
        except errors.UnknownOperator:
            raise errors.UnknownOperator(
                f"{self.core}: no operator 0x{op_id:04x} in its firmware {self.version} "
                f"({len(self.registry)} operators; a custom image replaces the stock one's)") from None

    def _buffers(self, handles: list, writable: bool, what: str) -> list:
        array = self.resolver.array
        try:
            return [array(h[0], h[1], writable) for h in handles]   # the same arrays as last task's
        except errors.HandleError:
            pass
        for i, (phys, size, _flags) in enumerate(handles):     # which one, for the message
            try:
                array(phys, size, writable)
            except errors.HandleError as exc:
                raise type(exc)(f"{what}[{i}]: {exc.message}") from None
        raise AssertionError("unreachable")   # pragma: no cover

    def run_task(self, msg: wire.Message, binding: int | None = None, key: bytes | None = None) -> dict | wire.Message:
        """RESULT body or ERROR for one TASK of a connection bound to ``binding`` (its verified owner,
        RELAY, or None); a non-VdspError from compute crashes the process. ``key``: the body's
        bytes, under which its checked plan is kept for the next task with the same body."""
        t0 = time.perf_counter()
        body = msg.body
        try:
            self.ownership.check_task(binding, body)    # first, from addresses alone (PROTOCOL.md §6.4)
            spec = self._operator(msg.op)
            inputs_h, outputs_h = body.get("inputs", []), body.get("outputs", [])
            spec.check_counts(len(inputs_h), len(outputs_h))
            params = schema.validate(spec.name, spec.params, body.get("params", {}))
        except errors.VdspError as exc:
            return messages.error(msg.msg_id, exc)
        plan = _Plan(msg.op, body, spec, self.registry.state(spec.id), inputs_h, outputs_h, params)
        if key is not None and len(key) <= PLAN_BODY_MAX and key not in self._plans:
            while self._plans and (len(self._plans) >= PLAN_MAX or self._plan_bytes + len(key) > PLAN_BYTES):
                oldest = next(iter(self._plans))
                del self._plans[oldest]
                self._plan_bytes -= len(oldest)
            self._plans[key] = plan
            self._plan_bytes += len(key)
        return self.execute(msg.msg_id, plan, binding, t0, checked=True)

    def execute(self, msg_id: int, plan: "_Plan", binding: int | None, t0: float,
                checked: bool = False) -> dict | wire.Message:
        """RESULT body or ERROR of the task ``plan`` (its body checked before) for a connection bound to
        ``binding``: the ownership check (unless ``checked`` just now), the handles resolved (each
        segment still the one mapped, the range inside it), then compute. ``t0``: when exec_us starts."""
        spec = plan.spec
        inputs: list = []
        outputs: list = []
        if plan.inputs or plan.outputs:     # else no memory to check or resolve
            try:
                if not checked:
                    self.ownership.check_task(binding, plan.body)    # grants change: every task
                inputs = self._buffers(plan.inputs, spec.inputs_writable, "inputs")
                outputs = self._buffers(plan.outputs, True, "outputs")
            except errors.VdspError as exc:
                return messages.error(msg_id, exc)
        params = plan.params
        self.ctx.msg_id = msg_id
        self.ctx.board = self.board = None
        watchdog = self.watchdog
        if watchdog:
            watchdog.task_begin(msg_id)
        try:
            if spec.prepare is None:        # Registry.prepare's whole work then, without its call
                self.ctx.state = plan.state
            else:
                self.registry.prepare(spec, self.ctx, inputs, outputs, params)   # sets ctx.state
            values = spec.fn(self.ctx, inputs, outputs, **params) or {}
        except errors.VdspError as exc:
            return messages.error(msg_id, exc)
        except BaseException:  # an operator bug: the DSP takes an exception
            self.crash(wire.Message(Command.TASK, msg_id, plan.body, plan.op), spec.name, params)
        finally:
            if watchdog:
                watchdog.task_end()
        # PROTOCOL.md §5.3: the estimate of the task's time on a J5 DSP: a C kernel's counted
        # cycles, else the operator's table entry (None: it has none)
        counted = self.ctx.board
        board_us: float | None
        if counted is not None:
            board_us, model = int(counted.us * 1000.0 + 0.5) / 1000.0, counted.model
        else:
            if not plan.tabled:
                plan.table_us, plan.tabled = board_model.table_us(spec.name, inputs, outputs), True
            board_us, model = plan.table_us, "table"
        del inputs, outputs
        exec_us = int((time.perf_counter() - t0) * 1e6)
        body = {"values": values, "core": self.core, "exec_us": exec_us}
        if board_us is not None:
            self.board = body["board_us"] = board_us
            body["board_model"] = model
        return body

    def crash(self, msg: wire.Message, op_name: str, params: dict) -> None:
        """Write the crash report (with the exception's type and message, which the core passes on
        in its crash EVENT) and die like a DSP taking an exception (:attr:`on_crash` set: it
        runs instead, within the ``except`` that caught the operator's exception)."""
        if self.on_crash is not None:
            self.on_crash(msg, op_name, params)
            return
        tb = traceback.format_exc()
        raised = sys.exc_info()[1]
        what = f"{type(raised).__name__}: {raised}" if str(raised) else type(raised).__name__
        what = what if len(what) <= EXCEPTION_TEXT_MAX else what[:EXCEPTION_TEXT_MAX - 3] + "..."
        log.error("%s: operator %s raised, firmware crashes\n%s", self.core, op_name, tb)
        if self.crash_file:
            report = {"type": "exception", "exception": what, "core": self.core, "firmware_version": self.version,
                      "task": {"msg_id": msg.msg_id, "op": msg.op, "name": op_name,
                               "params": _plain(params), "inputs": msg.body.get("inputs", []),
                               "outputs": msg.body.get("outputs", [])},
                      "traceback": tb, "time": time.time()}
            try:
                with open(self.crash_file, "w", encoding="utf-8") as fh:
                    json.dump(report, fh, indent=1)
            except OSError:
                log.exception("cannot write crash report %s", self.crash_file)
        self.trace.crashed()
        sys.stderr.flush()
        os._exit(CRASH_EXIT)


def _plain(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def open_endpoint(fw: Firmware, endpoint: str) -> tuple[zmq.Socket, Admission]:
    """Bind ``endpoint`` (a ROUTER, bounded) and say so on stdout; exit 3 if it cannot be bound."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.linger = 0
    sock.router_mandatory = False
    # replies waiting for one connection that has not read them yet (a flood's refusals are answered
    # while it is read): past it ZeroMQ drops them; a few hundred bytes each, per connection
    sock.sndhwm = REPLY_SNDHWM
    # a larger frame closes that connection before it is read; unauthenticated peers are bounded
    admission = Admission(sock, f"{fw.core} firmware", max_frame=MAX_RAW_FRAME,
                          accepted=fw.ownership.accepted)
    gate = curve.Gate(ctx, curve.keys_dir()) if curve.is_tcp(endpoint) else None   # runs while we serve
    # over tcp, a key pair of our own, made now: a firmware runs image code, so it holds no key of the
    # SoC's; the core announces our public key to its peers (READY's fw_server_key, PROTOCOL.md §16)
    server_key = curve.own_server(sock, endpoint)
    try:
        sock.bind(rundir.check_endpoint(endpoint))
    except (zmq.ZMQError, errors.VdspError) as exc:     # in use, too long, no such directory...
        why = exc.message if isinstance(exc, errors.VdspError) else os.strerror(exc.errno or 0)
        log.error("%s: could not bind %s: %s", fw.core, endpoint, why)
        print(json.dumps({"failed": f"could not bind {endpoint}: {why}"}), flush=True)   # the core reports it
        sys.exit(3)
    fw.ownership.gate = gate
    try:        # where relay.pid tells which process is the relay (ipc)
        fw.ownership.rt = rundir.runtime_dir(create=False)
    except errors.VdspError:
        fw.ownership.rt = None      # then no ipc peer can prove it is the relay
    print(json.dumps({"version": fw.version, "operators": fw.registry.table(), "pid": os.getpid(),
                      **({"server_key": server_key} if server_key else {})}), flush=True)
    return sock, admission


def serve(fw: Firmware, endpoint: str) -> None:
    """Bind ``endpoint`` and serve until unloaded (SIGUSR1) or killed: the socket passes to the
    I/O thread (``dsp_side.fwio``), and this thread, the main one, computes what it hands over."""
    sock, admission = open_endpoint(fw, endpoint)
    if fw.watchdog:
        fw.watchdog.start_ticker()
    log.info("%s: firmware %s serving %d operators", fw.core, fw.version, len(fw.registry))
    io = FirmwareIO(sock, admission, fw.intake(), tcp=curve.is_tcp(endpoint), name=fw.core, runner=fw)
    del sock, admission     # the I/O thread's from now on
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)     # a signal (SIGUSR1: unload) wakes the wait
    signal.set_wakeup_fd(wake_w)
    waiter = select.poll()
    waiter.register(io.jobs.fileno(), select.POLLIN)
    waiter.register(wake_r, select.POLLIN)
    io.start()
    try:
        compute(fw, io, waiter, wake_r)
    finally:
        io.stop()       # the replies of tasks that ended before the unload leave
        log.info("%s: firmware %s unloading", fw.core, fw.version)
        fw.trace.rec.close()


def compute(fw: Firmware, io: FirmwareIO, waiter: select.poll, wake_r: int) -> None:
    """The compute thread's loop: run each task of ``io``'s run queue, in order, and hand its
    reply back; purge unused mappings every PURGE_EVERY_S; return once unloading. It holds
    ``fw.computing`` but while it waits (the I/O thread runs a quick task then: ``fw.quick``)."""
    trace, runq, bell, done, computing = fw.trace, io.jobs.items, io.jobs.bell, io.done, fw.computing
    replied = False     # a reply was queued on ``done`` and its doorbell not rung yet
    next_purge = time.monotonic() + PURGE_EVERY_S
    while not fw.unloading:
        with computing:
            try:
                job = runq.popleft()        # started: the I/O thread cannot take it back now
            except IndexError:
                job = None
                trace.poll(idle=True)       # about to wait: write the trace (a SIGKILL loses little)
                bell.clear()                # before looking again: a task handed out from now on rings again
            else:
                if replied:                 # the last task's reply leaves while this one computes
                    done.bell.ring()
                    replied = False
                reply, took = fw.run_job(job)
                if fw.unloading:    # stopped while the task ran: its result is never sent; the core's
                    return          # "offline" fails it (HB_DSP_CORE_OFFLINE)
                done.items.append((job[0], reply, took))
                replied = True
            if time.monotonic() >= next_purge:
                fw.resolver.purge()
                next_purge = time.monotonic() + PURGE_EVERY_S
        if job is None:
            if replied:                 # rung last thing before waiting: the I/O thread it wakes finds the GIL free
                done.bell.ring()
                replied = False
            if not runq:
                for fd, _ in waiter.poll(max(1, int((next_purge - time.monotonic()) * 1000))):
                    if fd == wake_r:    # read only when woken (no syscall and exception per wait)
                        try:
                            os.read(wake_r, 64)
                        except BlockingIOError:
                            pass


def main(argv: list[str] | None = None, forked: bool = False) -> None:
    """``forked``: this process was forked from the core's starter (``vdsp_board.processes.starter``),
    which already made it die with the starter, and so with the core."""
    ap = argparse.ArgumentParser(prog="python -m dsp_side.firmware_main",
                                 description="Firmware process of one simulated DSP core (started by the core).")
    ap.add_argument("--core", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--image", required=True, help="firmware image file")
    ap.add_argument("--workdir", required=True, help="where the image's code is unpacked")
    ap.add_argument("--watchdog-file")
    ap.add_argument("--crash-file")
    ap.add_argument("--watchdog-ms", type=int, default=DEFAULT_WATCHDOG_MS,
                    help="the core's watchdog: operators refuse work they declare to last this long")
    signer = ap.add_mutually_exclusive_group(required=True)   # the core's verdict on the image, checked again here
    signer.add_argument("--signer", metavar="BASE64", help="the only public key the image may be signed by")
    signer.add_argument("--allow-unsigned", action="store_true", help="the image is unsigned, and the core allows it")
    args = ap.parse_args(argv)
    proc.title(f"{args.core} firmware", f"{args.core}.fw")
    # The core unloads the firmware with SIGUSR1 (destroy hooks run, then we exit), then SIGKILL
    # if it lingers; terminal and group signals are the core's to handle.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    unload_requested = []
    signal.signal(signal.SIGUSR1, lambda signum, frame: unload_requested.append(signum))
    if not forked:
        proc.die_with_parent()
    proc.private_umask()
    soclog.setup("dsp")
    if not heap.keep_heap():
        log.info("%s: mallopt is not available: operator temporaries are mapped per task", args.core)
    log.info("%s: %d MiB of working memory touched at boot", args.core, heap.prefault() >> 20)
    try:   # signature, header, payload digest, then import, then registry == signed manifest
        trust = signing.Trust.only(None if args.allow_unsigned else args.signer)
        header, registry = fw_image.load(Path(args.image), Path(args.workdir), trust)
    except errors.VdspError as exc:
        log.error("%s: cannot load firmware %s: %s", args.core, args.image, exc.message)
        print(json.dumps({"refused": exc.message}), flush=True)   # instead of READY: the core reports why
        sys.exit(3)
    print(f"[DSP] DSP version = {header['version']}", file=sys.stderr, flush=True)
    watchdog = WatchdogWord(args.watchdog_file) if args.watchdog_file else None
    fw = Firmware(args.core, header["version"], registry, watchdog, args.crash_file, args.watchdog_ms)
    try:    # like a DSP operator setting up its TCM buffers when the image loads
        fw.init_operators()
    except Exception as exc:
        why = exc.message if isinstance(exc, errors.VdspError) else f"{type(exc).__name__}: {exc}"
        log.error("%s: an operator's init hook failed: %s", args.core, why)
        print(json.dumps({"refused": f"operator init failed: {why}"}), flush=True)
        sys.exit(3)
    signal.signal(signal.SIGUSR1, lambda signum, frame: setattr(fw, "unloading", True))
    fw.unloading = bool(unload_requested)
    serve(fw, args.endpoint)
    fw.destroy_operators()
    log.info("%s: firmware %s unloaded", args.core, header["version"])
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

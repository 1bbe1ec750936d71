"""The firmware process of one core: binds the task endpoint and runs tasks one at a time.

Started by the core (``python -m dsp_side.firmware ...``). It prints one JSON
line on stdout once it serves (firmware version and operator table), or
``{"refused": why}`` if the image fails verification (signature, header, payload,
manifest: see ``dsp_side.fw_image.load``) and exits; its stdout closing tells the
core it died; ``{"failed": why}`` if it cannot serve (it could not bind its endpoint).
A task is validated (operator, buffer
counts, parameters, handles) before compute, so a bad task is an error reply;
an exception that is not a ``VdspError`` escaping an operator is a firmware
crash: a crash report is written and the process exits with ``CRASH_EXIT``.

Tasks run one at a time on the main thread; the socket is served meanwhile too: once a task has
run for a while, a thread of its own takes in and answers what arrives (CANCEL, HELLO, refusals
past the inbox's limits; TASKs join the inbox) until the task ends (``dsp_side.busyio``).

Whose memory a task may touch is decided first: each connection is bound to the
owner its HELLO proved, or to the relay once it proved itself (``vdsp_board.ownership``);
a direct client's handles must be its own or granted to it, the relay's were
checked by the relay.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import zmq

from protocol import errors, header, messages, schema, wire
from protocol.cancel import CancelOutcome
from protocol.constants import DEFAULT_WATCHDOG_MS, MAX_RAW_FRAME, Command
from dsp_side import heap, fw_image, signing
from dsp_side.busyio import BusyIO
from dsp_side.ddr_resolver import Resolver
from dsp_side.fwtrace import TaskTrace
from dsp_side.inbox import Inbox
from dsp_side.registry import Registry
from dsp_side.watchdog import WatchdogWord
from vdsp_board import curve, log as soclog, peerproof, proc, rundir
from vdsp_board.admission import Admission
from vdsp_board.hellogate import HelloGate
from vdsp_board.ownership import Bindings, Ownership
from vdsp_board.zsock import NOBLOCK, readable, recv_frames, send_frames
from vdsp_board.zsock import _recv as recv_frame     # the backend's recv (no sugar wrapper)

CRASH_EXIT = 70
PURGE_EVERY_S = 1.0
EXCEPTION_TEXT_MAX = 300  # characters of a crashing operator's exception passed on (type: message)
REPLY_SNDHWM = 4096       # replies queued for one connection (see serve())
INTAKE_MAX = 256          # messages taken in before the best waiting task runs: a flood that never
#                           stops arriving (HELLOs, refused tasks) does not stop the tasks
HOLD_TASK_S, HOLD_S, HOLD_MAX = 50e-6, 200e-6, 16     # replies sent together: see serve()
PLAN_MAX, PLAN_BODY_MAX, PLAN_BYTES = 256, 16 << 10, 1 << 20    # TASK bodies whose plan is kept (_Plan)
# Tried and rejected: ZeroMQ's I/O thread as SCHED_BATCH (ctx.set(zmq.THREAD_SCHED_POLICY, ...)) saved the
# firmwares ~1.5 µs of CPU per PING task under a pipelined load, but delayed each reply until this
# thread waits or a CPU is idle: the no-op p50 through the relay was 20-40 µs worse (1.36-1.48x the
# raw-pyzmq baseline vs 1.26-1.33x without, alternated 4x; tasks/s unchanged). os.sched_yield() after
# sending gave the CPU away to any other process under load: rejected too.
log = logging.getLogger("vdsp.firmware")


class OperatorContext:
    """What an operator sees of its environment."""

    __slots__ = ("core", "log", "msg_id", "watchdog_ms", "state")

    def __init__(self, core: str, watchdog_ms: int = DEFAULT_WATCHDOG_MS) -> None:
        self.core = core
        self.log = logging.getLogger(f"vdsp.op.{core}")
        self.msg_id = 0
        self.watchdog_ms = watchdog_ms      # the core kills a task that runs this long
        self.state = None                   # the running operator's OperatorState (lifecycle hooks)


class _Plan:
    """What checking a TASK body gave: its operator, handles and validated parameters.

    Kept per body bytes (at most PLAN_MAX bodies of at most PLAN_BODY_MAX bytes, PLAN_BYTES in
    all): a task whose body is byte for byte one checked before (same operator in its header)
    skips the decode and
    the body, count and parameter checks, which are functions of those bytes alone (the schema
    memo did that for parameters already). What can change between two such tasks is still
    checked on every task: the ownership of the handles (grants come and go), and each handle's
    memory (freed, replaced or resized segments: ``Resolver.array``)."""

    __slots__ = ("op", "body", "spec", "inputs", "outputs", "params")

    def __init__(self, op: int, body: dict, spec, inputs: list, outputs: list, params: dict) -> None:
        self.op, self.body, self.spec = op, body, spec
        self.inputs, self.outputs, self.params = inputs, outputs, params


class Firmware:
    """Sans-socket task executor: frames in, reply frames out."""

    def __init__(self, core: str, version: str, registry: Registry, watchdog: WatchdogWord | None,
                 crash_file: str | None, watchdog_ms: int = DEFAULT_WATCHDOG_MS) -> None:
        self.core, self.version, self.registry = core, version, registry
        self.watchdog, self.crash_file = watchdog, crash_file
        self.resolver = Resolver()
        self.ctx = OperatorContext(core, watchdog_ms)
        self.warn = soclog.RateLimited(log)
        # Which owner each connection proved in its HELLO (or RELAY): its tasks may use that
        # owner's memory and what other owners granted it, nothing else (vdsp_board.ownership).
        self.ownership = Ownership(f"{core} firmware", accept_relay=True, accepted=peerproof.accept_records())
        self.bindings = Bindings()
        self.unloading = False      # set by SIGUSR1 (the core stops us): serve returns, destroy hooks run
        self.trace = TaskTrace(core, lambda op: self.registry.get(op).name)   # task slices while tracing is on
        self._plans: dict[bytes, _Plan] = {}    # TASK body bytes -> what checking them gave (see _Plan)
        self.busy: BusyIO | None = None         # while serving: hands the socket over while a task computes
        self._plan_bytes = 0

    def init_operators(self) -> None:
        """The operators' init hooks (registry.init_all). Raises what a hook raises."""
        self.registry.init_all(self.ctx)

    def destroy_operators(self) -> None:
        """The operators' destroy hooks, at unload."""
        self.registry.destroy_all(self.ctx, log)

    def handle(self, frames: list, identity: bytes = b"", meta: object = None, peer: str = "") -> list | None:
        """Reply frames for one request of connection ``identity`` (frames without the identity), or None.

        ``meta`` is a frame of the message received with ``copy=False`` (its properties tell
        who sent a HELLO), ``peer`` the CURVE name on tcp.
        """
        if len(frames) == 2:            # a TASK whose body bytes were checked before (see _Plan)
            plan = self._plans.get(frames[1]) if type(frames[1]) is bytes else None
            if plan is not None:
                try:
                    head = wire.parse_header(bytes(frames[0]))
                except errors.VdspError:
                    head = None         # the full decode below answers it
                if head is not None and head.command is Command.TASK and head.op == plan.op:
                    return self._encode_result(head.msg_id, head.op, self.execute(
                        head.msg_id, plan, self.bindings.get(identity), time.perf_counter()))
        try:
            msg = messages.check_body(wire.decode(frames))
        except errors.VdspError as exc:
            msg_id = wire.peek_msg_id(frames)
            self.warn.warn("malformed", "%s: rejected malformed message: %s", self.core, exc)
            return wire.encode(messages.error(msg_id, exc)) if msg_id else None  # 0 = one-way
        if msg.command is Command.TASK:
            key = frames[1] if type(frames[1]) is bytes and len(frames) == 2 else None
            return self._encode_result(msg.msg_id, msg.op, self.run_task(msg, self.bindings.get(identity), key))
        if msg.command is Command.HELLO:
            return wire.encode(self.hello(msg, identity, meta, peer))
        if msg.command in (Command.HEARTBEAT, Command.DISCONNECT):
            return None
        return wire.encode(messages.error(msg.msg_id, errors.ApiUseError(
            f"the firmware endpoint of {self.core} accepts TASK, CANCEL and HELLO, not {msg.command.name}")))

    @staticmethod
    def _encode_result(msg_id: int, op: int, reply: wire.Message) -> list:
        try:
            return wire.encode(reply)
        except errors.VdspError as exc:  # an operator returned values msgpack cannot carry
            return wire.encode(messages.error(msg_id, errors.OperatorFailed(
                f"operator 0x{op:04x}: result is not encodable: {exc.message}")))

    def hello(self, msg: wire.Message, identity: bytes, meta: object, peer: str) -> wire.Message:
        """READY, binding the connection to what it proved; ERROR ClaimRefused (and no binding) otherwise."""
        try:
            binding = self.ownership.claim(msg.body, meta, peer)
        except errors.ClaimRefused as exc:
            self.bindings.set(identity, None)
            return messages.error(msg.msg_id, exc)
        self.bindings.set(identity, binding)
        return messages.ready(msg.msg_id, self.core, "firmware", firmware_version=self.version, state="running")

    def handle_now(self, frames: list, identity: bytes, inbox: Inbox, meta: object = None,
                   peer: str = "") -> list[list]:
        """Replies to a request that is not queued (CANCEL, HELLO, garbage...)."""
        if len(frames) >= 2 and header.command_of(frames[0]) == Command.CANCEL:
            try:
                msg = messages.check_body(wire.decode(frames))
            except errors.VdspError as exc:
                return [wire.encode(messages.error(wire.peek_msg_id(frames) or 0, exc))]
            target = msg.body["target"]
            cancelled = inbox.cancel(identity, target)
            if cancelled is None:
                return [wire.encode(messages.result(msg.msg_id, {"state": CancelOutcome.UNKNOWN.value,
                                                                 "target": target}))]
            released = errors.TaskCancelled(f"task {target} released before it started on {self.core}")
            return [wire.encode(messages.error(target, released)),
                    wire.encode(messages.result(msg.msg_id, {"state": CancelOutcome.CANCELLED.value, "target": target}))]
        reply = self.handle(frames, identity, meta, peer)
        return [] if reply is None else [reply]

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

    def run_task(self, msg: wire.Message, binding: int | None = None, key: bytes | None = None) -> wire.Message:
        """RESULT or ERROR for one TASK of a connection bound to ``binding`` (its verified owner,
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
        plan = _Plan(msg.op, body, spec, inputs_h, outputs_h, params)
        if key is not None and len(key) <= PLAN_BODY_MAX and key not in self._plans:
            while self._plans and (len(self._plans) >= PLAN_MAX or self._plan_bytes + len(key) > PLAN_BYTES):
                oldest = next(iter(self._plans))
                del self._plans[oldest]
                self._plan_bytes -= len(oldest)
            self._plans[key] = plan
            self._plan_bytes += len(key)
        return self.execute(msg.msg_id, plan, binding, t0, checked=True)

    def execute(self, msg_id: int, plan: "_Plan", binding: int | None, t0: float,
                checked: bool = False) -> wire.Message:
        """RESULT or ERROR of the task ``plan`` (its body checked before) for a connection bound to
        ``binding``: the ownership check (unless ``checked`` just now), the handles resolved (each
        segment still the one mapped, the range inside it), then compute. ``t0``: when exec_us starts."""
        spec = plan.spec
        try:
            if not checked:
                self.ownership.check_task(binding, plan.body)    # grants change: every task
            inputs = self._buffers(plan.inputs, spec.inputs_writable, "inputs")
            outputs = self._buffers(plan.outputs, True, "outputs")
        except errors.VdspError as exc:
            return messages.error(msg_id, exc)
        params = plan.params
        self.ctx.msg_id = msg_id
        watchdog = self.watchdog
        if watchdog:
            watchdog.task_begin(msg_id)
        busy = self.busy
        try:
            if busy is not None:
                busy.begin()        # the socket may be served meanwhile (dsp_side.busyio)
            try:
                self.registry.prepare(spec, self.ctx, inputs, outputs, params)   # sets ctx.state
                values = spec.fn(self.ctx, inputs, outputs, **params) or {}
            finally:
                if busy is not None:
                    busy.end()
        except errors.VdspError as exc:
            return messages.error(msg_id, exc)
        except BaseException:  # an operator bug: the DSP takes an exception
            self.crash(wire.Message(Command.TASK, msg_id, plan.body, plan.op), spec.name, params)
        finally:
            if watchdog:
                watchdog.task_end()
        del inputs, outputs
        exec_us = int((time.perf_counter() - t0) * 1e6)
        return messages.result(msg_id, {"values": values, "core": self.core, "exec_us": exec_us})

    def crash(self, msg: wire.Message, op_name: str, params: dict) -> None:
        """Write the crash report (with the exception's type and message, which the core passes on
        in its crash EVENT) and die like a DSP taking an exception."""
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


def serve(fw: Firmware, endpoint: str) -> None:
    """Bind ``endpoint`` and serve until unloaded (SIGUSR1) or killed.

    One thread at a time uses the socket: the main thread between tasks, and while a task has run
    for a while the busy thread (``dsp_side.busyio``), which takes in and answers what arrives
    (CANCEL of a waiting task, HELLO, refusals; TASKs join the inbox) until the task ends."""
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
    curve.secure_server(sock, endpoint)
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
    print(json.dumps({"version": fw.version, "operators": fw.registry.table(), "pid": os.getpid()}),
          flush=True)
    if fw.watchdog:
        fw.watchdog.start_ticker()
    log.info("%s: firmware %s serving %d operators", fw.core, fw.version, len(fw.registry))
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    wake_r, wake_w = os.pipe()      # SIGUSR1 (unload) wakes the poll through this
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    poller.register(wake_r, zmq.POLLIN)
    inbox = Inbox()
    busy = soclog.RateLimited(log)
    hellos = HelloGate(fw.ownership, f"{fw.core}-hello")     # HELLO claims judged off this loop
    poller.register(hellos.fileno(), zmq.POLLIN)

    # Replies wait in ``held`` (in order) and leave together: at the end of each turn, except while
    # quick tasks (under HOLD_TASK_S each) are still waiting here, for up to HOLD_S / HOLD_MAX
    # replies. Replies sent back to back wake the peer's I/O once, not once per reply. A slow
    # task's reply is never held; a held reply waits at most HOLD_S plus the task that runs next
    # (at most HANDOFF_S of it: the busy thread sends it when it takes the socket).
    held: list[list] = []
    held_since = 0.0

    def send_held() -> None:
        for frames in held:
            send_frames(sock, frames)
        held.clear()

    def answer_now(frames: list) -> None:
        """A refusal or an immediate answer leaves at once, after the replies held before it: a flood's
        refusals go out while it is read, not as one burst past the peer's high-water mark (where
        ZeroMQ would drop them)."""
        send_held()
        send_frames(sock, frames)

    def take(items: list) -> None:
        """Messages past the HELLO gate: queue a task, answer the rest now."""
        for item in items:
            identity = item.identity
            if item.refused is not None:
                if item.msg_id:
                    answer_now([identity, *wire.encode(messages.error(item.msg_id, item.refused))])
                continue
            try:
                queued = inbox.offer(identity, item.frames)
            except errors.CoreBusy as exc:          # bounded: the excess is refused, not held
                busy.warn(identity, "%s: refused a task of peer %s: %s", fw.core, identity.hex(), exc.message)
                answer_now([identity, *wire.encode(messages.error(wire.peek_msg_id(item.frames) or 0, exc))])
                continue
            if not queued:
                for answer in fw.handle_now(item.frames, identity, inbox, item.meta, item.peer):
                    answer_now([identity, *answer])

    def take_in(arrived: bool) -> None:
        """Take in what has arrived (EVENTS, not a zmq.Again per turn), INTAKE_MAX messages at most:
        then the best waiting task runs (main thread), or the busy thread looks whether the running
        one ended (a flood that never stops arriving must not keep the socket from either)."""
        intake = INTAKE_MAX
        while arrived and intake:
            intake -= 1
            try:
                meta = recv_frame(sock, NOBLOCK, False)   # the identity: it carries the peer's credentials
            except zmq.Again:
                break
            if meta.more:
                peer = curve.peer_name(meta) if gate is not None else ""
                take(hellos.admit(meta.bytes, recv_frames(sock, NOBLOCK), meta, peer))
            arrived = readable(sock)

    busy_poller = zmq.Poller()
    busy_poller.register(sock, zmq.POLLIN)
    busy_poller.register(hellos.fileno(), zmq.POLLIN)

    def serve_while_busy(wake_fd: int, timeout_ms: int) -> None:
        """The busy thread's turn (it holds the socket): what waited, then what arrives until woken."""
        send_held()
        ready = {fd for fd, _ in busy_poller.poll(timeout_ms)} if not readable(sock) else {sock}
        if wake_fd in ready:
            io.drain()
        take_in(sock in ready or readable(sock))
        take(hellos.ready())

    io = BusyIO(serve_while_busy, f"{fw.core}-busy-io")
    busy_poller.register(io.wake_fd(), zmq.POLLIN)
    fw.busy = io
    next_purge = time.monotonic() + PURGE_EVERY_S
    while not fw.unloading:
        arrived = readable(sock)
        if not inbox and not arrived:
            for fd, _ in poller.poll(int(PURGE_EVERY_S * 1000)):
                if fd is sock:
                    arrived = True
                elif fd == wake_r:      # read only when woken (no syscall and exception per poll)
                    try:
                        os.read(wake_r, 64)
                    except BlockingIOError:
                        pass
            if fw.unloading:
                break
        take_in(arrived)
        take(hellos.ready())                        # verdicts reached off the loop, and what waited on them
        fw.trace.rec.poll()     # the trace switch (one stat every 0.25 s), before the task: traced if it is on
        if inbox:                                   # then run the best waiting task
            identity, frames = inbox.pop()
            traced = fw.trace.rec.on
            if traced:
                fw.trace.begin(frames, fw.bindings.get(identity))
            started = time.perf_counter()
            reply = fw.handle(frames, identity)     # the busy thread may serve the socket while it computes
            if traced:
                fw.trace.end(reply)
            if fw.unloading:     # stopped while the task ran: as on a powered-off DSP its result is
                break            # never sent; the core's "offline" fails it (HB_DSP_CORE_OFFLINE)
            if reply is not None:
                if not held:
                    held_since = started
                held.append([identity, *reply])
            fw.trace.poll(idle=not inbox)     # about to idle: write the trace (a SIGKILL loses little)
            if held and inbox and len(held) < HOLD_MAX:
                now = time.perf_counter()
                if now - started < HOLD_TASK_S and now - held_since < HOLD_S:
                    continue
        if held:
            send_held()
        if time.monotonic() >= next_purge:
            fw.resolver.purge()
            next_purge = time.monotonic() + PURGE_EVERY_S
    send_held()     # the replies of tasks that ended before the unload
    log.info("%s: firmware %s unloading", fw.core, fw.version)
    fw.busy = None
    io.close()
    hellos.close()
    fw.trace.rec.close()
    admission.stop()
    sock.close(0)


def main(argv: list[str] | None = None, forked: bool = False) -> None:
    """``forked``: this process was forked from the core's firmware template
    (``dsp_side.fwtemplate``), which already made it die with the core."""
    ap = argparse.ArgumentParser(prog="python -m dsp_side.firmware",
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

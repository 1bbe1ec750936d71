"""One DSP core's conversation, without sockets, processes or files: its peers (HELLO/READY,
heartbeats, liveness), CONTROL on the remoteproc device, QUERY, and what happens to its
firmware (booted, ready, crashed, watchdog, recovery, coredump).

Inputs: :meth:`on_message` (a peer's message), :meth:`tick` (the clock, with the firmware's
watchdog word), :meth:`fw_booted` / :meth:`boot_failed` (what the adapter's boot did),
:meth:`fw_ready`, :meth:`fw_died`. Outputs, in :attr:`out` for the adapter to carry out in
order: the effects of ``dsp_side.core_effects`` — ``ToPeer``, ``KmsgLine``, ``Boot``, ``StopFw``,
``KillFw``, ``Coredump``.
Lifecycle instants (boot, boot failed, stop, crash, recovery, watchdog) go to the injected
trace sink :attr:`trace` while it is on (``vdsp_board.observability.trace``; off by default).
"""
from __future__ import annotations

import logging
import time

from protocol import errors, messages, wire
from protocol.constants import HUNG_AFTER_MS, HUNG_HARD_FACTOR, MAX_SLEEP_MS, SLEEP_SHARE_OF_WATCHDOG, Command
from protocol.liveness import Liveness, ProcFact
from protocol.remoteproc import Action
from dsp_side.core_effects import Boot, Coredump, CoreEffect, KillFw, KmsgLine, StopFw, ToPeer
from dsp_side.remoteproc import Device
from vdsp_board.observability.log import RateLimited
from vdsp_board.observability.trace import NullRecorder, Recorder

log = logging.getLogger("vdsp.core")
BOOT_TIMEOUT_S = 60.0


class Peer:
    __slots__ = ("identity", "role", "liveness")

    def __init__(self, identity: bytes, role: str, now: float, interval_ms: int, hung_ms: int) -> None:
        self.identity, self.role = identity, role
        self.liveness = Liveness(now, interval_ms, hung_ms)


class RunningFirmware:
    """The running firmware process as the engine knows it."""

    __slots__ = ("pid", "signer", "started", "info")

    def __init__(self, pid: int, signer: str, started: float) -> None:
        self.pid, self.signer, self.started = pid, signer, started
        self.info: dict | None = None      # its READY line, once it is up


class CoreEngine:
    """``admin_only_writes``: CONTROL writes need an admin peer (tcp), told by ``is_admin(name)``;
    ``hung_ms``: a peer silent this long is dropped (we stop heartbeating it); ``facts(pid, now)``:
    what the kernel says of the firmware process (``protocol.liveness.ProcFact``), asked before a
    boot that takes longer than ``BOOT_TIMEOUT_S`` is killed."""

    def __init__(self, name: str, fw_bind: str, device: Device, *, heartbeat_ms: int, watchdog_s: float,
                 allow_unsigned: bool = False, pid: int = 0, coredump_dir: str = "coredump",
                 admin_only_writes: bool = False, is_admin=lambda peer: False, hung_ms: int = HUNG_AFTER_MS,
                 facts=lambda pid, now: ProcFact.UNKNOWN, log_path: str = "") -> None:
        self.name, self.fw_bind, self.device = name, fw_bind, device
        self.log_path = log_path        # where this core and its firmware log ("": not a file)
        self.heartbeat_ms, self.watchdog_s, self.hung_ms, self.facts = heartbeat_ms, watchdog_s, hung_ms, facts
        self.allow_unsigned, self.pid, self.coredump_dir = allow_unsigned, pid, coredump_dir
        self.admin_only_writes, self.is_admin = admin_only_writes, is_admin
        self.fw: RunningFirmware | None = None
        self.pending: list[tuple[bytes, int]] = []  # CONTROL writes answered when an action ends
        self.peers: dict[bytes, Peer] = {}
        self.names: dict[bytes, str] = {}           # peer identity -> CURVE name (tcp only)
        self.warn = RateLimited(log)                # one line per peer per 10 s, however bad the flood
        self.out: list[CoreEffect] = []
        self.trace: Recorder | NullRecorder = NullRecorder()     # the adapter injects its trace recorder
        self.reason = ""        # why the core is in its state: the reason of its last EVENT
        self.identity = ""      # how its firmware proves ipc peers (vdsp_board.identity.peerproof.describe; the adapter's)

    def instant(self, what: str, **fields) -> None:
        """A lifecycle instant on this core's trace track (while tracing is on)."""
        if self.trace.on:
            self.trace.emit(what, {"core": self.name, **fields})

    # --- outputs --------------------------------------------------------------------------
    def send(self, identity: bytes, msg: wire.Message) -> None:
        self.out.append(ToPeer(identity, wire.encode(msg)))

    def kmsg(self, line: str) -> None:
        self.out.append(KmsgLine(line))

    def ready_body(self) -> dict:
        snap = self.device.snapshot()
        info = self.fw.info if self.fw and self.fw.info else {}
        return {"state": snap["state"], "firmware": snap["firmware"],
                "firmware_version": info.get("version", ""), "operators": info.get("operators", []),
                "fw_endpoint": self.fw_bind, "fw_server_key": info.get("server_key", ""),
                "heartbeat_ms": self.heartbeat_ms, "hung_ms": self.hung_ms,
                "crash_count": snap["crash_count"], "pid": self.pid,
                "fw_pid": self.fw.pid if self.fw and info else None,
                "firmware_signer": self.fw.signer if self.fw and info else "", "allow_unsigned": self.allow_unsigned,
                "watchdog_ms": round(self.watchdog_s * 1000),
                "max_sleep_ms": int(min(MAX_SLEEP_MS, self.watchdog_s * 1000 * SLEEP_SHARE_OF_WATCHDOG)),
                "reason": self.reason}

    def broadcast_state(self, reason: str, crash: dict | None = None) -> None:
        self.reason = reason
        body = self.ready_body()
        body.pop("state")
        body.pop("reason")
        if crash:
            body["crash"] = crash
        msg = messages.event(self.name, self.device.state.value, reason=reason, **body)
        for identity in list(self.peers):
            self.send(identity, msg)

    def _answer_pending(self, exc: errors.VdspError | None) -> None:
        for identity, msg_id in self.pending:
            self.send(identity, messages.error(msg_id, exc) if exc else
                      messages.result(msg_id, {"value": self.device.state.value}))
        self.pending.clear()

    # --- peers ----------------------------------------------------------------------------
    def on_message(self, identity: bytes, frames: list, now: float, peer_name: str = "") -> None:
        if peer_name:
            self.names[identity] = peer_name
        try:
            msg = messages.check_body(wire.decode(frames))
        except errors.VdspError as exc:
            msg_id = wire.peek_msg_id(frames)
            self.warn.warn(("bad", identity), "%s: rejected message from %r: %s", self.name, identity, exc)
            if msg_id:  # 0 = one-way message (heartbeat, event): nobody to answer
                self.send(identity, messages.error(msg_id, exc))
            return
        peer = self.peers.get(identity)
        if peer:
            peer.liveness.heard(now)
        cmd = msg.command
        if cmd is Command.HELLO:
            self.peers[identity] = Peer(identity, msg.body["role"], now, self.heartbeat_ms, self.hung_ms)
            self.send(identity, messages.ready(msg.msg_id, self.name, "core", **self.ready_body()))
        elif cmd is Command.HEARTBEAT:
            pass
        elif cmd is Command.DISCONNECT:
            self.peers.pop(identity, None)
            self.names.pop(identity, None)
        elif cmd is Command.CONTROL:
            self.control(identity, msg)
        elif cmd is Command.QUERY:
            self.send(identity, messages.result(msg.msg_id, {**self.device.snapshot(), **self.ready_body(),
                                                             "fw_pid": self.fw.pid if self.fw else None,
                                                             "identity": self.identity}))
        elif cmd is Command.TASK:
            self.send(identity, messages.error(msg.msg_id, errors.ApiUseError(
                f"tasks go to the firmware endpoint {self.fw_bind} announced in READY, not to {self.name}'s "
                "control endpoint")))
        else:
            self.send(identity, messages.error(msg.msg_id, errors.ApiUseError(
                f"{self.name} does not accept {cmd.name}")))

    def control(self, identity: bytes, msg: wire.Message) -> None:
        attr, value = msg.body["attr"], msg.body.get("value")
        try:
            if msg.body["core"] != self.name:
                raise errors.InvalidCore(f"this is {self.name}, not {msg.body['core']!r}")
            if value is None:
                return self.send(identity, messages.result(msg.msg_id, {"value": self.device.read(attr)}))
            if self.admin_only_writes and not self.is_admin(self.names.get(identity, "")):
                raise errors.RemoteprocDenied(f"writing {attr!r} of {self.name} needs an admin key over tcp")
            action = self.device.write(attr, value)
        except errors.VdspError as exc:
            return self.send(identity, messages.error(msg.msg_id, exc))
        if action is None:
            return self.send(identity, messages.result(msg.msg_id, {"value": self.device.read(attr)}))
        if action is Action.SHUTDOWN:
            self.shutdown_firmware()
            return self.send(identity, messages.result(msg.msg_id, {"value": self.device.state.value}))
        self.pending.append((identity, msg.msg_id))
        self.out.append(Boot(action))

    # --- the firmware ---------------------------------------------------------------------
    def start(self) -> None:
        """Autostart: boot the firmware named by the device."""
        self.device.begin(Action.BOOT)
        self.out.append(Boot(Action.BOOT))

    def fw_booted(self, pid: int, signer: str, now: float) -> None:
        """The adapter started the firmware process (its READY comes later: :meth:`fw_ready`)."""
        self.fw = RunningFirmware(pid, signer, now)

    def boot_failed(self, exc: errors.VdspError) -> None:
        """The adapter's boot found no image or an invalid one: the action ends at once (offline)."""
        self.device.finish(False)
        self.broadcast_state(f"boot failed: {exc.message}")
        self._answer_pending(exc)

    def fw_ready(self, info: dict) -> None:
        assert self.fw is not None      # READY comes from the firmware this core just booted
        self.fw.info = info
        self.device.finish(True)
        self.instant("boot", fw_pid=self.fw.pid, version=info.get("version", ""))
        self.kmsg(f"remote processor {self.name} is now up")
        self.broadcast_state("booted")   # before the reply: peers know the state when it arrives
        self._answer_pending(None)

    def fw_died(self, kind: str, report: dict, refusal: str | None = None, failure: str | None = None) -> None:
        """The firmware process is gone (``kind``: exception, watchdog, killed by SIG…, exit N,
        stopped); ``report`` its crash report, ``refusal`` why it refused its image, ``failure``
        why it could not serve (bind its endpoint)."""
        fw, self.fw = self.fw, None
        if kind == "stopped":
            return
        if fw is None or fw.info is None:  # died before READY: the boot failed
            self.device.finish(False)
            self.instant("boot_failed", kind=kind, refusal=refusal or "")
            if refusal:   # the firmware process refused the image before running any of it
                self.kmsg(f"{self.name}: firmware {self.device.firmware} is not valid: {refusal}")
                self.broadcast_state(f"boot failed: {refusal}")
                return self._answer_pending(errors.RemoteprocInvalid(f"{self.name}: {refusal}"))
            if failure:   # it could not serve: say why, not only how it exited
                self.kmsg(f"{self.name}: firmware {self.device.firmware} failed to boot: {failure}")
                self.broadcast_state(f"boot failed: {failure}")
                return self._answer_pending(errors.RemoteprocInvalid(f"{self.name}: firmware failed to boot: {failure}"))
            self.kmsg(f"{self.name}: firmware {self.device.firmware} failed to boot ({kind})")
            self.broadcast_state(f"boot failed: {kind}")
            return self._answer_pending(errors.RemoteprocInvalid(
                f"{self.name}: firmware failed to boot ({kind}); see its log"))
        if not self.device.crash():
            return  # only the first crash is handled
        self.kmsg(f"crash detected in {self.name}: type {kind}")
        task = report.get("task") or {}
        self.instant("crash", kind=kind, fw_pid=fw.pid, crash=self.device.crash_count,
                     task=task.get("msg_id") if isinstance(task, dict) else None)
        dump = self._coredump(kind, fw.info, report)
        details = self._crash_details(kind, report)
        self.broadcast_state(f"crash: {kind}" + (f": {'; '.join(details.values())}" if details else ""),
                             crash={"type": kind, "task": report.get("task"), **details, **dump})
        if self.device.recovery == "enabled":
            self.kmsg(f"handling crash #{self.device.crash_count} in {self.name}")
            self.instant("recovery", crash=self.device.crash_count)
            self.device.begin(Action.RECOVER)
            self.out.append(Boot(Action.RECOVER))

    def _crash_details(self, kind: str, report: dict) -> dict:
        """What a crash's reason adds to its type: for an exception (or an ASan image's stop), what
        it was and the operator (from the firmware's report), and where the core's log is."""
        details = {}
        what, task = report.get("exception"), report.get("task")
        if kind in ("exception", "AddressSanitizer report") and isinstance(what, str) and what:
            name = task.get("name") if isinstance(task, dict) else None
            details["exception"] = what + (f" in operator {name}" if isinstance(name, str) and name else "")
        if self.log_path:
            details["log"] = f"core log {self.log_path}"
        return details

    def _coredump(self, kind: str, info: dict, report: dict) -> dict:
        """The dump (coredump enabled/inline): its path, and the dump itself if inline."""
        mode = self.device.coredump
        if mode == "disabled":
            return {}
        dump = {"core": self.name, "crash": self.device.crash_count, "type": kind,
                "firmware": self.device.firmware, "firmware_version": info.get("version", ""),
                "task": report.get("task"), "traceback": report.get("traceback", ""),
                "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
        path = f"{self.coredump_dir}/{self.name}-crash{self.device.crash_count}.json"
        self.out.append(Coredump(path, dump))
        self.kmsg(f"{self.name}: coredump written to {path}")
        return {"coredump": path, **({"dump": dump} if mode == "inline" else {})}

    def shutdown_firmware(self) -> None:
        if self.fw is not None:
            self.fw = None
            self.out.append(StopFw())
        self.device.finish(True)
        self.instant("stop")
        self.kmsg(f"stopped remote processor {self.name}")
        self.broadcast_state("stopped")

    # --- time -----------------------------------------------------------------------------
    def tick(self, now: float, watchdog: tuple[float, int, float] | None = None) -> None:
        """Heartbeats, hung peers dropped, and the watchdog: ``watchdog`` is the firmware's
        word read now (seconds since its last beat, the running task's msg_id, seconds it ran)."""
        for identity, peer in list(self.peers.items()):
            if peer.liveness.hung(now):
                log.info("%s: peer %s (%s) silent for %.1f s, dropped", self.name, identity.hex(), peer.role,
                         peer.liveness.silent(now))
                del self.peers[identity]
                self.names.pop(identity, None)
            elif peer.liveness.send_due(now):
                self.send(identity, messages.heartbeat())
        fw = self.fw
        if fw is None:
            return
        if fw.info is None:    # booting: a slow boot on a loaded host goes on while its process progresses
            booting = now - fw.started
            if booting > BOOT_TIMEOUT_S and (booting > BOOT_TIMEOUT_S * HUNG_HARD_FACTOR or self.facts(fw.pid, now)
                                             not in (ProcFact.PROGRESSING, ProcFact.PENDING)):
                self.out.append(KillFw("boot-timeout"))
            return
        if watchdog is None:
            return
        since_beat, msg_id, task_s = watchdog
        # The sample's rule: a task running past the watchdog is killed (a stopped firmware too:
        # its task's start time stays put). A firmware whose beat stopped while no task runs is
        # killed when its process is stopped or idle, not while it is merely starved of CPU.
        silent = since_beat > self.watchdog_s and (
            since_beat > self.watchdog_s * HUNG_HARD_FACTOR
            or self.facts(fw.pid, now) not in (ProcFact.PROGRESSING, ProcFact.PENDING))
        if silent or task_s > self.watchdog_s:
            log.error("%s: watchdog: firmware %s for %.1fs", self.name,
                      f"stuck in task {msg_id}" if task_s > self.watchdog_s else "silent", max(since_beat, task_s))
            self.instant("watchdog", task=msg_id, since_beat_s=round(since_beat, 3), task_s=round(task_s, 3))
            self.out.append(KillFw("watchdog"))

    def exiting(self) -> None:
        """The core process ends: stop the firmware, tell every peer."""
        if self.fw is not None:
            self.fw = None
            self.out.append(StopFw())
        for identity in list(self.peers):
            self.send(identity, messages.event(self.name, "offline", reason="core exiting"))

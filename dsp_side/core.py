"""One DSP core process: the remoteproc device, its firmware process, its control endpoint.

The core binds its control endpoint (ROUTER). Peers (the relay, direct-mode
clients, tools) say HELLO and get READY with the firmware's task endpoint and
operator table; tasks then go straight to the firmware process, which binds
that endpoint itself. The core answers CONTROL (remoteproc attributes) and
QUERY, heartbeats its peers, watches the firmware (exit, watchdog) and sends
EVENT on every state change.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import time
from pathlib import Path

import zmq

from protocol import errors, messages, wire
from protocol.constants import DEFAULT_WATCHDOG_MS, HEARTBEAT_INTERVAL_MS, Command
from protocol.liveness import Liveness
from protocol.remoteproc import Action, State
from dsp_side import image, signing
from dsp_side.fwproc import FirmwareProcess
from dsp_side.kmsg import Kmsg
from dsp_side.remoteproc import Device
from vdsp_sim.board import curve, ddr, log as soclog, proc, runtime

log = logging.getLogger("vdsp.core")
BOOT_TIMEOUT_S = 60.0
REAP_EVERY_S = 1.0


class Peer:
    __slots__ = ("identity", "role", "liveness")

    def __init__(self, identity: bytes, role: str, now: float, interval_ms: int) -> None:
        self.identity, self.role = identity, role
        self.liveness = Liveness(now, interval_ms)


class CoreServer:
    def __init__(self, name: str, bind: str, fw_bind: str, rt: Path, *, firmware: str | None = None,
                 autostart: bool = True, watchdog_ms: int = DEFAULT_WATCHDOG_MS,
                 heartbeat_ms: int = HEARTBEAT_INTERVAL_MS, allow_unsigned: bool = False) -> None:
        self.name, self.bind, self.fw_bind, self.rt = name, bind, fw_bind, rt
        self.allow_unsigned = allow_unsigned   # development: boot images that carry no signature
        self.device = Device(name, firmware or name)
        self.autostart, self.watchdog_s, self.heartbeat_ms = autostart, watchdog_ms / 1000, heartbeat_ms
        self.kmsg = Kmsg(rt, name)
        self.fw: FirmwareProcess | None = None
        self.pending: list[tuple[bytes, int]] = []  # CONTROL writes answered when an action ends
        self.peers: dict[bytes, Peer] = {}
        self.running = True
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.linger = 0
        self.sock.router_mandatory = False
        self.sock.sndhwm = 10000
        self.warn = soclog.RateLimited(log)     # one line per peer per 10 s, however bad the flood
        self.gate = curve.Gate(self.ctx, curve.keys_dir()) if curve.is_tcp(bind) else None
        curve.secure_server(self.sock, bind)
        self.names: dict[bytes, str] = {}   # peer identity -> CURVE name (tcp only)
        self.sock.bind(bind)
        self.poller = zmq.Poller()
        self.poller.register(self.sock, zmq.POLLIN)

    # --- firmware lifecycle ---------------------------------------------------------------
    def boot(self, action: Action) -> None:
        """Find and verify the image, start the firmware process; the state changes when it
        reports READY. Raises RemoteprocNoEnt (no image) / RemoteprocInvalid (corrupt image,
        unsigned, unknown key, bad signature), leaving the device as it was (the caller's action
        is then over)."""
        if action is Action.RECOVER:
            self.kmsg.write(f"recovering {self.name}")
        try:
            path = image.find(self.device.firmware, runtime.firmware_search(self.rt))
            # the trusted keys are read at every boot: 'vdsp firmware trust|untrust' apply at the next one
            try:
                trust = signing.Trust.of(curve.keys_dir(self.rt), allow_unsigned=self.allow_unsigned)
            except errors.InvalidArgument as exc:   # an unsafe key directory: trust nothing in it
                raise errors.RemoteprocInvalid(f"cannot read the trusted firmware keys: {exc.message}") from None
            # bounded reads: the firmware process verifies the payload against the signed header
            header, size, signer = image.check(path, trust)
        except errors.FileNotFound as exc:
            self.kmsg.write(f"Direct firmware load for {self.device.firmware} failed with error -2")
            raise errors.RemoteprocNoEnt(f"{self.name}: {exc.message}") from None
        except errors.RemoteprocInvalid as exc:
            self.kmsg.write(f"{self.name}: firmware {self.device.firmware} is not valid: {exc.message}")
            raise
        self.kmsg.write(f"powering up {self.name}")
        if signer.unsigned:
            self.kmsg.write(f"{self.name}: booting UNSIGNED firmware {self.device.firmware}: "
                            "--allow-unsigned is set (development only)")
            log.warning("%s: booting UNSIGNED firmware %s: this core runs with --allow-unsigned, which is for "
                        "development only", self.name, path)
        self.kmsg.write(f"Booting fw image {self.device.firmware}, size {size}, version {header['version']}, "
                        f"signed by {signer}")
        self.fw = FirmwareProcess(self.name, self.fw_bind, self.rt, path, watchdog_ms=round(self.watchdog_s * 1000),
                                  signer=signer)
        self.poller.register(self.fw.fd, zmq.POLLIN)
        log.info("%s: booting firmware %s %s (pid %d)", self.name, path, header["version"], self.fw.pid)

    def start_action(self, action: Action) -> errors.VdspError | None:
        """Run a boot-type action the device accepted; an error ends it at once (offline)."""
        try:
            self.boot(action)
        except errors.VdspError as exc:
            self.device.finish(False)
            self._broadcast_state(f"boot failed: {exc.message}")
            return exc
        return None

    def _fw_readable(self) -> None:
        event = self.fw.on_readable()
        if event == "ready":
            self.device.finish(True)
            self.kmsg.write(f"remote processor {self.name} is now up")
            self._broadcast_state("booted")   # before the reply: peers know the state when it arrives
            self._answer_pending(None)
        elif event == "dead":
            self._fw_died()

    def _fw_died(self) -> None:
        fw, self.fw = self.fw, None
        self.poller.unregister(fw.fd)
        kind = fw.reap()
        report = fw.crash_report() or {}
        fw.close()
        if kind == "stopped":
            return
        if fw.info is None:  # died before READY: the boot failed
            self.device.finish(False)
            if fw.refusal:   # the firmware process refused the image before running any of it
                self.kmsg.write(f"{self.name}: firmware {self.device.firmware} is not valid: {fw.refusal}")
                self._broadcast_state(f"boot failed: {fw.refusal}")
                self._answer_pending(errors.RemoteprocInvalid(f"{self.name}: {fw.refusal}"))
                return
            self.kmsg.write(f"{self.name}: firmware {self.device.firmware} failed to boot ({kind})")
            self._broadcast_state(f"boot failed: {kind}")
            self._answer_pending(errors.RemoteprocInvalid(f"{self.name}: firmware failed to boot ({kind}); see its log"))
            return
        if not self.device.crash():
            return  # only the first crash is handled
        self.kmsg.write(f"crash detected in {self.name}: type {kind}")
        dump = self._coredump(kind, fw.info or {}, report)
        self._broadcast_state(f"crash: {kind}", crash={"type": kind, "task": report.get("task"), **dump})
        if self.device.recovery == "enabled":
            self.kmsg.write(f"handling crash #{self.device.crash_count} in {self.name}")
            self.device.begin(Action.RECOVER)
            self.start_action(Action.RECOVER)

    def _coredump(self, kind: str, info: dict, report: dict) -> dict:
        """Write the dump file (coredump enabled/inline); its path, and the dump if inline."""
        mode = self.device.coredump
        if mode == "disabled":
            return {}
        dump = {"core": self.name, "crash": self.device.crash_count, "type": kind,
                "firmware": self.device.firmware, "firmware_version": info.get("version", ""),
                "task": report.get("task"), "traceback": report.get("traceback", ""),
                "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
        directory = self.rt / "coredump"
        directory.mkdir(exist_ok=True)
        path = directory / f"{self.name}-crash{self.device.crash_count}.json"
        path.write_text(json.dumps(dump, indent=1))
        self.kmsg.write(f"{self.name}: coredump written to {path}")
        return {"coredump": str(path), **({"dump": dump} if mode == "inline" else {})}

    def shutdown_firmware(self) -> None:
        fw, self.fw = self.fw, None
        if fw is not None:
            self.poller.unregister(fw.fd)
            fw.stop()
        self.device.finish(True)
        self.kmsg.write(f"stopped remote processor {self.name}")
        self._broadcast_state("stopped")

    def _check_watchdog(self) -> None:
        fw = self.fw
        if fw is None:
            return
        if fw.info is None:
            if time.monotonic() - fw.started > BOOT_TIMEOUT_S:
                fw.kill("boot-timeout")
            return
        since_beat, msg_id, task_s = fw.watchdog_state(time.monotonic_ns())
        if since_beat > self.watchdog_s or task_s > self.watchdog_s:
            log.error("%s: watchdog: firmware %s for %.1fs", self.name,
                      f"stuck in task {msg_id}" if task_s > self.watchdog_s else "silent", max(since_beat, task_s))
            fw.kill("watchdog")

    # --- messages -------------------------------------------------------------------------
    def _answer_pending(self, exc: errors.VdspError | None) -> None:
        for identity, msg_id in self.pending:
            reply = messages.error(msg_id, exc) if exc else messages.result(msg_id, {"value": self.device.state.value})
            self._send(identity, reply)
        self.pending.clear()

    def _send(self, identity: bytes, msg: wire.Message) -> None:
        try:
            self.sock.send_multipart([identity, *wire.encode(msg)], zmq.NOBLOCK)
        except zmq.Again:
            self.warn.warn(("slow", identity), "%s: peer %r not reading; dropped %s", self.name, identity,
                           msg.command.name)

    def ready_body(self) -> dict:
        snap = self.device.snapshot()
        info = self.fw.info if self.fw and self.fw.info else {}
        return {"state": snap["state"], "firmware": snap["firmware"],
                "firmware_version": info.get("version", ""), "operators": info.get("operators", []),
                "fw_endpoint": self.fw_bind, "heartbeat_ms": self.heartbeat_ms,
                "crash_count": snap["crash_count"], "pid": os.getpid(), "fw_pid": self.fw.pid if info else None,
                "firmware_signer": str(self.fw.signer) if info else "", "allow_unsigned": self.allow_unsigned}

    def _broadcast_state(self, reason: str, crash: dict | None = None) -> None:
        body = self.ready_body()
        body.pop("state")
        if crash:
            body["crash"] = crash
        msg = messages.event(self.name, self.device.state.value, reason=reason, **body)
        for identity in list(self.peers):
            self._send(identity, msg)

    def handle(self, identity: bytes, frames: list) -> None:
        try:
            msg = messages.check_body(wire.decode(frames))
        except errors.VdspError as exc:
            msg_id = wire.peek_msg_id(frames)
            self.warn.warn(("bad", identity), "%s: rejected message from %r: %s", self.name, identity, exc)
            if msg_id:  # 0 = one-way message (heartbeat, event): nobody to answer
                self._send(identity, messages.error(msg_id, exc))
            return
        now = time.monotonic()
        peer = self.peers.get(identity)
        if peer:
            peer.liveness.heard(now)
        cmd = msg.command
        if cmd is Command.HELLO:
            self.peers[identity] = Peer(identity, msg.body["role"], now, self.heartbeat_ms)
            self._send(identity, messages.ready(msg.msg_id, self.name, "core", **self.ready_body()))
        elif cmd is Command.HEARTBEAT:
            pass
        elif cmd is Command.DISCONNECT:
            self.peers.pop(identity, None)
            self.names.pop(identity, None)
        elif cmd is Command.CONTROL:
            self._control(identity, msg)
        elif cmd is Command.QUERY:
            body = {**self.device.snapshot(), **self.ready_body(), "pid": os.getpid(),
                    "fw_pid": self.fw.pid if self.fw else None}
            self._send(identity, messages.result(msg.msg_id, body))
        elif cmd is Command.TASK:
            self._send(identity, messages.error(msg.msg_id, errors.ApiUseError(
                f"tasks go to the firmware endpoint {self.fw_bind} announced in READY, not to {self.name}'s control endpoint")))
        else:
            self._send(identity, messages.error(msg.msg_id, errors.ApiUseError(
                f"{self.name} does not accept {cmd.name}")))

    def _control(self, identity: bytes, msg: wire.Message) -> None:
        attr, value = msg.body["attr"], msg.body.get("value")
        try:
            if msg.body["core"] != self.name:
                raise errors.InvalidCore(f"this is {self.name}, not {msg.body['core']!r}")
            if value is None:
                self._send(identity, messages.result(msg.msg_id, {"value": self.device.read(attr)}))
                return
            if self.gate is not None and not curve.is_admin(self.names.get(identity, "")):
                raise errors.RemoteprocDenied(f"writing {attr!r} of {self.name} needs an admin key over tcp")
            action = self.device.write(attr, value)
        except errors.VdspError as exc:
            self._send(identity, messages.error(msg.msg_id, exc))
            return
        if action is None:
            self._send(identity, messages.result(msg.msg_id, {"value": self.device.read(attr)}))
            return
        if action is Action.SHUTDOWN:
            self.shutdown_firmware()
            self._send(identity, messages.result(msg.msg_id, {"value": self.device.state.value}))
            return
        exc = self.start_action(action)
        if exc is not None:
            self._send(identity, messages.error(msg.msg_id, exc))
        else:
            self.pending.append((identity, msg.msg_id))

    # --- loop -----------------------------------------------------------------------------
    def _timers(self, now: float) -> None:
        for identity, peer in list(self.peers.items()):
            if peer.liveness.dead(now):
                log.info("%s: peer %s (%s) gone silent, dropped", self.name, identity.hex(), peer.role)
                del self.peers[identity]
                self.names.pop(identity, None)
            elif peer.liveness.send_due(now):
                self._send(identity, messages.heartbeat())
        self._check_watchdog()

    def run(self) -> None:
        log.info("%s: control endpoint %s, firmware endpoint %s", self.name, self.bind, self.fw_bind)
        if self.autostart:
            self.device.begin(Action.BOOT)
            exc = self.start_action(Action.BOOT)
            if exc is not None:
                log.error("%s: stays offline: %s", self.name, exc)
        next_reap = 0.0
        while self.running:
            for sock, _ in self.poller.poll(100):
                if sock is self.sock and self.gate is None:
                    frames = self.sock.recv_multipart()
                    self.handle(frames[0], frames[1:])
                elif sock is self.sock:   # CURVE: remember who the peer is
                    parts = self.sock.recv_multipart(copy=False)
                    if len(parts) > 1:
                        self.names[parts[0].bytes] = curve.peer_name(parts[1])
                    self.handle(parts[0].bytes, [p.bytes for p in parts[1:]])
                elif self.fw is not None and sock == self.fw.fd:
                    self._fw_readable()
            now = time.monotonic()
            self._timers(now)
            if now >= next_reap:
                ddr.reap()
                next_reap = now + REAP_EVERY_S
        self.close()

    def close(self) -> None:
        if self.fw is not None:
            self.fw.stop()
            self.fw = None
        for identity in list(self.peers):
            self._send(identity, messages.event(self.name, "offline", reason="core exiting"))
        self.sock.close(0)
        if self.gate is not None:
            self.gate.stop()
        self.ctx.term()
        runtime.unlink_ipc(self.bind)
        runtime.unlink_ipc(self.fw_bind)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="vdsp core", description="Run one simulated DSP core (remoteproc device + firmware process).")
    add_arguments(ap)
    run_from_args(ap.parse_args(argv))


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--name", default="vdsp0", help="core name (vdsp0, vdsp1)")
    ap.add_argument("--bind", help="control endpoint (default: this core's entry in VDSP_CORE_ENDPOINTS, "
                                   "else ipc://$VDSP_RUNTIME_DIR/<name>.sock)")
    ap.add_argument("--fw-bind", help="firmware task endpoint (default: next to the control endpoint)")
    ap.add_argument("--firmware", help="firmware image name (default: the core name)")
    ap.add_argument("--no-autostart", action="store_true", help="stay offline until 'start' is written to state")
    ap.add_argument("--watchdog-ms", type=int, default=DEFAULT_WATCHDOG_MS, help="kill a firmware stuck this long in one task")
    ap.add_argument("--heartbeat-ms", type=int, default=HEARTBEAT_INTERVAL_MS)
    ap.add_argument("--allow-unsigned", action="store_true",
                    help="DEVELOPMENT ONLY: also boot images that carry no signature (logged at every boot, "
                         "shown by 'vdsp status'); images signed by an unknown key or with a bad signature "
                         "are still refused")


def run_from_args(args: argparse.Namespace) -> None:
    proc.die_with_parent()
    soclog.setup("dsp")
    rt = runtime.runtime_dir()
    bind = args.bind or runtime.core_endpoints(rt).get(args.name) or runtime.ipc(rt / f"{args.name}.sock")
    fw_bind = args.fw_bind or runtime.fw_endpoint_for(bind)
    server = CoreServer(args.name, bind, fw_bind, rt, firmware=args.firmware, autostart=not args.no_autostart,
                        watchdog_ms=args.watchdog_ms, heartbeat_ms=args.heartbeat_ms,
                        allow_unsigned=args.allow_unsigned)
    if args.allow_unsigned:
        log.warning("%s: --allow-unsigned: this core also boots UNSIGNED firmware images (development only)",
                    args.name)

    def stop(signum, frame):
        server.running = False
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.run()


if __name__ == "__main__":
    main()

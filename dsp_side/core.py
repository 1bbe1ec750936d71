"""One DSP core process: the ZeroMQ adapter of :class:`CoreEngine`, its firmware process and files.

The core binds its control endpoint (ROUTER). Peers (the relay, direct-mode clients, tools)
say HELLO and get READY with the firmware's task endpoint and operator table; tasks then go
straight to the firmware process, which binds that endpoint itself. The conversation (CONTROL,
QUERY, heartbeats, crash handling) is in ``dsp_side.core_engine``; this module polls, boots
and stops the firmware process (after checking its signed image), writes the kernel log and
coredumps, and sends what the engine returns.
"""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import assert_never

import zmq

from protocol import errors
from protocol.constants import DEFAULT_WATCHDOG_MS, HEARTBEAT_INTERVAL_MS, HUNG_AFTER_MS, MAX_RAW_FRAME
from protocol.remoteproc import Action
from dsp_side import fw_image, signing
from dsp_side.core_effects import Boot, Coredump, KillFw, KmsgLine, StopFw, ToPeer
from dsp_side.core_engine import CoreEngine
from dsp_side.fwproc import FirmwareProcess
from dsp_side.kmsg import Kmsg
from dsp_side.remoteproc import Device
from vdsp_board.processes import proc, rundir
from vdsp_board.observability import log as soclog, trace
from vdsp_board.memory import ddr
from vdsp_board.identity import curve, peerproof
from vdsp_board.identity.admission import Admission
from vdsp_board.processes.procfacts import ProcFacts
from vdsp_board.processes.starter import Starter

log = logging.getLogger("vdsp.core")
REAP_EVERY_S = 1.0


class CoreServer:
    def __init__(self, name: str, bind: str, fw_bind: str, rt: Path, starter: Starter, *,
                 firmware: str | None = None, autostart: bool = True, watchdog_ms: int = DEFAULT_WATCHDOG_MS,
                 heartbeat_ms: int = HEARTBEAT_INTERVAL_MS, hung_ms: int = HUNG_AFTER_MS,
                 allow_unsigned: bool = False, wake_fd: int | None = None) -> None:
        """``starter``: the core's starter (``dsp_side.core_main.firmware_starter``), made before
        this reads its key; it starts the firmwares and is closed with the server. ``wake_fd``: a
        pipe a signal makes readable (``proc.signal_wake_fd``): the loop polls it, so that a SIGTERM's
        handler clearing ``running`` ends it at once, not when its poll times out."""
        self.name, self.bind, self.fw_bind, self.rt = name, bind, fw_bind, rt
        self.starter = starter
        self.autostart, self.watchdog_ms = autostart, watchdog_ms
        self.kmsg = Kmsg(rt, name)
        self.fw: FirmwareProcess | None = None
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.linger = 0
        self.sock.router_mandatory = False
        self.sock.sndhwm = 10000
        # a larger frame closes that connection before it is read; unauthenticated peers are bounded
        self.admission = Admission(self.sock, name, max_frame=MAX_RAW_FRAME)
        self.gate = curve.Gate(self.ctx, curve.keys_dir()) if curve.is_tcp(bind) else None
        curve.secure_server(self.sock, bind)
        self.sock.bind(bind)
        self.engine = CoreEngine(name, fw_bind, Device(name, firmware or name), heartbeat_ms=heartbeat_ms,
                                 watchdog_s=watchdog_ms / 1000, allow_unsigned=allow_unsigned, pid=os.getpid(),
                                 coredump_dir=str(rt / "coredump"), admin_only_writes=self.gate is not None,
                                 is_admin=curve.is_admin, hung_ms=hung_ms, facts=ProcFacts().fact,
                                 log_path=soclog.stderr_file())
        self.engine.trace = self.trace = trace.Recorder("core", name, rt=rt)
        self.engine.identity = peerproof.describe()     # its firmware's proof: the same kernel and settings
        self.poller = zmq.Poller()
        self.poller.register(self.sock, zmq.POLLIN)
        self.poller.register(starter.fileno(), zmq.POLLIN)     # exits it reports
        self.wake_fd = wake_fd
        if wake_fd is not None:
            self.poller.register(wake_fd, zmq.POLLIN)
        self.running = True
        self.exit_code = 0

    # --- the engine's outputs ---------------------------------------------------------------
    def flush(self) -> None:
        engine = self.engine
        while engine.out:       # carrying one out (a boot) may add more
            effect = engine.out.pop(0)
            match effect:
                case ToPeer(identity, frames):
                    try:
                        self.sock.send_multipart([identity, *frames], zmq.NOBLOCK)
                    except zmq.Again:
                        engine.warn.warn(("slow", identity), "%s: peer %r not reading; dropped a message",
                                         self.name, identity)
                case KmsgLine(line):
                    self.kmsg.write(line)
                case Boot(action):
                    self.boot(action)
                case StopFw():
                    self._drop_fw().stop()
                case KillFw(reason):
                    if self.fw is not None:
                        self.fw.kill(reason)
                case Coredump(path, dump):
                    Path(path).parent.mkdir(exist_ok=True)
                    Path(path).write_text(json.dumps(dump, indent=1))
                case _:
                    assert_never(effect)

    def boot(self, action: Action) -> None:
        """Find and verify the image, start the firmware process (it reports READY later). A
        missing (ENOENT) or invalid image (corrupt, unsigned, unknown key, bad signature) ends
        the action at once: the core stays offline."""
        engine, device = self.engine, self.engine.device
        if action is Action.RECOVER:
            self.kmsg.write(f"recovering {self.name}")
        try:
            path = fw_image.find(device.firmware, rundir.firmware_search(self.rt))
            try:   # the trusted keys are read at every boot: 'vdsp firmware trust|untrust' apply at the next one
                trust = signing.Trust.of(curve.keys_dir(self.rt), allow_unsigned=engine.allow_unsigned)
            except errors.InvalidArgument as exc:   # an unsafe key directory: trust nothing in it
                raise errors.RemoteprocInvalid(f"cannot read the trusted firmware keys: {exc.message}") from None
            header, size, signer = fw_image.check(path, trust)   # bounded reads; the firmware checks the payload
        except errors.FileNotFound as exc:
            self.kmsg.write(f"Direct firmware load for {device.firmware} failed with error -2")
            return engine.boot_failed(errors.RemoteprocNoEnt(f"{self.name}: {exc.message}"))
        except errors.RemoteprocInvalid as exc:
            self.kmsg.write(f"{self.name}: firmware {device.firmware} is not valid: {exc.message}")
            return engine.boot_failed(exc)
        self.kmsg.write(f"powering up {self.name}")
        if signer.unsigned:
            self.kmsg.write(f"{self.name}: booting UNSIGNED firmware {device.firmware}: "
                            "--allow-unsigned is set (development only)")
            log.warning("%s: booting UNSIGNED firmware %s: this core runs with --allow-unsigned, which is for "
                        "development only", self.name, path)
        self.kmsg.write(f"Booting fw image {device.firmware}, size {size}, version {header['version']}, "
                        f"signed by {signer}")
        try:
            self.fw = FirmwareProcess(self.name, self.fw_bind, self.rt, path, watchdog_ms=self.watchdog_ms,
                                      signer=signer, starter=self.starter, sanitize=header.get("sanitize"))
        except OSError as exc:
            self.kmsg.write(f"{self.name}: cannot start the firmware process: {exc}")
            self._starter_check()
            return engine.boot_failed(errors.CoreOffline(f"{self.name}: cannot start the firmware process: {exc}"))
        self.poller.register(self.fw.fd, zmq.POLLIN)
        log.info("%s: booting firmware %s %s (pid %d)", self.name, path, header["version"], self.fw.pid)
        engine.fw_booted(self.fw.pid, str(signer), time.monotonic())

    def _drop_fw(self) -> FirmwareProcess:
        fw, self.fw = self.fw, None
        assert fw is not None       # dropped once, after it was booted
        self.poller.unregister(fw.fd)
        return fw

    def _fw_readable(self) -> None:
        assert self.fw is not None      # the poller watches a booted firmware only
        event = self.fw.on_readable()
        if event == "ready":
            assert self.fw.info is not None     # READY carries the firmware's info
            self.engine.fw_ready(self.fw.info)
        elif event == "dead":
            fw = self._drop_fw()
            kind = fw.reap()
            report = fw.crash_report() or {}
            fw.close()
            self.engine.fw_died(kind, report, fw.refusal, fw.failure)

    # --- the loop -------------------------------------------------------------------------
    def run(self) -> None:
        log.info("%s: control endpoint %s, firmware endpoint %s", self.name, self.bind, self.fw_bind)
        if self.autostart:
            self.engine.start()
            self.flush()
            if self.fw is None:
                log.error("%s: stays offline: see 'vdsp dmesg'", self.name)
        next_reap = 0.0
        while self.running:
            for sock, _ in self.poller.poll(100):
                if sock is self.sock:
                    parts = self.sock.recv_multipart(copy=False)
                    peer = curve.peer_name(parts[1]) if self.gate is not None and len(parts) > 1 else ""
                    self.engine.on_message(parts[0].bytes, [p.bytes for p in parts[1:]], time.monotonic(), peer)
                elif self.fw is not None and sock == self.fw.fd:
                    self._fw_readable()
                elif sock == self.starter.fileno():
                    self.starter.collect(0)
                    self._starter_check()
                elif sock == self.wake_fd:
                    proc.drain_wake_fd(sock)
                self.flush()
            now = time.monotonic()
            ready = self.fw is not None and self.fw.info is not None
            self.engine.tick(now, self.fw.watchdog_state(time.monotonic_ns()) if self.fw is not None and ready else None)
            self.flush()
            if now >= next_reap:
                ddr.reap()
                next_reap = now + REAP_EVERY_S
            self.trace.poll()
        self.close()

    def _starter_check(self) -> None:
        """A core whose starter is gone (killed) starts no firmware again: it exits (status 1),
        and whoever supervises it starts it afresh. It makes no new starter: it has read its key
        since, which a starter forked now would hand to every firmware."""
        if self.starter.gone and self.running:
            log.error("%s: its starter (the firmwares' parent) is gone: the core exits", self.name)
            self.running = False
            self.exit_code = 1

    def close(self) -> None:
        self.engine.exiting()
        self.flush()
        self.admission.stop()
        self.sock.close(0)
        if self.gate is not None:
            self.gate.stop()
        self.ctx.term()
        self.starter.close()
        rundir.unlink_ipc(self.bind)
        rundir.unlink_ipc(self.fw_bind)
        self.trace.close()

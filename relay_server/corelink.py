"""The relay's link to one DSP core: its control socket, its firmware socket, its state."""
from __future__ import annotations

import logging

import zmq

from protocol import messages, wire
from protocol.constants import HEARTBEAT_INTERVAL_MS
from protocol.liveness import Liveness
from vdsp_sim.board import curve, runtime

log = logging.getLogger("vdsp.relay")
HELLO_RETRY_S = 0.5


class CoreLink:
    """State: ``unknown`` (never heard), ``running``, ``offline``, ``crashed``, ``dead`` (silent).

    Invariant: ``fw`` is a connected socket only while ``state == "running"``;
    it is closed with linger 0 whenever the core stops running, so no stale
    task can reach a restarted firmware.
    """

    def __init__(self, ctx: zmq.Context, index: int, name: str, endpoint: str, now: float,
                 heartbeat_ms: int = HEARTBEAT_INTERVAL_MS) -> None:
        self.ctx, self.index, self.name, self.endpoint = ctx, index, name, endpoint
        self.heartbeat_ms = heartbeat_ms
        self.state = "unknown"
        self.firmware_version = ""
        self.operators: list = []
        self.crash_count = 0
        self.firmware_signer = ""        # who signed the running image ("UNSIGNED" under --allow-unsigned)
        self.allow_unsigned = False      # the core boots unsigned images (development)
        self.fw: zmq.Socket | None = None
        self.fw_endpoint = ""
        self.inflight: dict[int, object] = {}
        self.liveness = Liveness(now, heartbeat_ms)
        self.next_hello = now
        self.hello_id = 0
        log.info("Connect to vdsp core%d...", index)
        self.ctl = self._socket(endpoint)

    def _socket(self, endpoint: str) -> zmq.Socket:
        sock = self.ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.sndhwm = sock.rcvhwm = 100000
        sock.reconnect_ivl = 50
        curve.secure_client(sock, endpoint, key_file=curve.keys_dir() / "relay.key_secret")
        sock.connect(endpoint)
        return sock

    def send_ctl(self, msg: wire.Message) -> None:
        try:
            self.ctl.send_multipart(wire.encode(msg), zmq.NOBLOCK)
        except zmq.Again:
            log.warning("%s: control queue full, dropped %s", self.name, msg.command.name)

    def maybe_hello(self, now: float, msg_id: int) -> None:
        """(Re)send HELLO while the core has not answered."""
        if self.state in ("unknown", "dead") and now >= self.next_hello:
            self.hello_id = msg_id
            self.send_ctl(messages.hello(msg_id, "relay", name="dsp_relay_server"))
            self.next_hello = now + HELLO_RETRY_S

    def apply(self, body: dict, state: str) -> None:
        """Take the core's announcement (READY or EVENT); opens/closes the firmware socket."""
        self.firmware_version = body.get("firmware_version", self.firmware_version)
        self.operators = body.get("operators", self.operators)
        self.crash_count = body.get("crash_count", self.crash_count)
        self.firmware_signer = body.get("firmware_signer", self.firmware_signer)
        self.allow_unsigned = body.get("allow_unsigned", self.allow_unsigned)
        interval = body.get("heartbeat_ms")
        if isinstance(interval, int) and interval > 0 and interval != self.heartbeat_ms:
            self.heartbeat_ms = interval
            self.liveness = Liveness(self.liveness.last_heard, interval)
        if state == "running":
            fw_endpoint = runtime.connectable(body.get("fw_endpoint", ""), self.endpoint)
            if self.fw is None or fw_endpoint != self.fw_endpoint:
                self.close_fw()
                self.fw_endpoint = fw_endpoint
                self.fw = self._socket(fw_endpoint)
                log.info("Connect to vdsp core%d success!", self.index)
        else:
            self.close_fw()
        self.state = state

    def close_fw(self) -> None:
        if self.fw is not None:
            self.fw.close(0)
            self.fw = None

    def describe(self) -> dict:
        return {"name": self.name, "index": self.index, "endpoint": self.endpoint, "state": self.state,
                "firmware_version": self.firmware_version, "operators": self.operators,
                "crash_count": self.crash_count, "inflight": len(self.inflight),
                "firmware_signer": self.firmware_signer, "allow_unsigned": self.allow_unsigned}

    def close(self) -> None:
        self.close_fw()
        self.ctl.close(0)

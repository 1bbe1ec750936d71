"""A whole SoC in this process, for tests without processes or sockets: the relay's engine, each
core's engine and its firmware executor, wired to each other and to the SDK as a transport.

::

    loop = LoopbackTransport()                # relay mode; LoopbackTransport("direct") for direct
    with Soc(transport=loop) as soc:
        loop.pause("vdsp0")                   # its firmware takes tasks but runs none
        task = soc.rpc(opids.SLEEP, params={"ms": 1}, core=CORE_0)
        loop.crash("vdsp0")                   # as if the firmware process died: recovery follows
        task.wait()                           # raises CoreCrashed

What differs from the processes: everything runs when a link sends or drains, under one lock,
so the order of events is exact and a test needs no sleeps; a firmware's crash is raised, not
an exit, and has no core dump file; there is no watchdog and a core never falls silent (the
engines' own tests cover silence with a hand-held clock). One transport serves any number of
``Soc`` objects (``Soc(transport=…)`` leaves it open: close it with :meth:`close`). Every HELLO comes from this process, so
the ownership judge grants this process's owner (and the relay) without asking the kernel;
handle checks, grants and everything else are the real code.
"""
from __future__ import annotations

import collections
import itertools
import os
import threading
import time
from typing import assert_never

from arm_side.discovery import Servers
from arm_side.transport import Transport
from dsp_side import fw_image
from dsp_side.core_effects import Boot, Coredump, KillFw, KmsgLine, StopFw, ToPeer
from dsp_side.core_engine import CoreEngine
from dsp_side.firmware import Firmware
from dsp_side.firmware_src.stock import firmware as stock
from dsp_side.intake import Intake
from dsp_side.remoteproc import Device
from protocol import errors, wire
from protocol.constants import HEARTBEAT_INTERVAL_MS
from relay_server.effects import CloseFwLink, OpenFwLink, ToClient, ToCtl, ToFw
from relay_server.engine import CREDIT, RelayEngine
from vdsp_board.memory import ddr
from vdsp_board.identity.ownership import Claim, Ownership

RELAY_CTL, RELAY_FW = b"\x00relay-ctl", b"\x00relay-fw"
TICK_S = 0.02


class _ThisProcess(Ownership):
    """Claims are true when they name this process's owner (or the in-process relay)."""

    def _prove_owner(self, claim: Claim) -> None:
        owner = claim.body.get("owner")
        if owner != ddr.current_owner().id:
            raise errors.ClaimRefused(f"owner {owner} is not this process's")

    def _prove_relay(self, claim: Claim) -> None:
        pass


class _Crash(Exception):
    pass


class Link:
    """One connection of the SDK to an in-process server; replies wait in ``inbox`` and a byte
    in a pipe makes ``fd`` readable while they do."""

    def __init__(self, loop: "LoopbackTransport", endpoint: str, name: str, identity: bytes) -> None:
        self.loop, self.endpoint, self.name, self.identity = loop, endpoint, name, identity
        self.peer = None
        self.closed = False
        self.inbox: collections.deque = collections.deque()
        self.fd, self._w = os.pipe()
        os.set_blocking(self.fd, False)
        os.set_blocking(self._w, False)

    def send(self, frames: list) -> bool:
        """Hand ``frames`` to the in-process SoC, which runs what it can now; the replies wait in
        ``inbox`` for the SDK's reader (``fd`` stays readable while they do: nothing to wake)."""
        with self.loop.lock:
            if not self.closed:
                self.loop.from_sdk(self, [bytes(f) for f in frames])
                self.loop.run()
            return False

    def goodbye(self, frames: list) -> None:
        """The DISCONNECT of a client that closes: as ``send``."""
        self.send(frames)

    def drain(self) -> list[list]:
        with self.loop.lock:
            if self.closed:
                return []
            self.loop.run()
            out = list(self.inbox)
            self.inbox.clear()
            try:
                os.read(self.fd, 65536)
            except BlockingIOError:
                pass
            return out

    def push(self, frames: list) -> None:
        if not self.closed:
            self.inbox.append(frames)
            try:
                os.write(self._w, b"m")
            except BlockingIOError:
                pass

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)
            os.close(self._w)


class _Core:
    def __init__(self, loop: "LoopbackTransport", index: int, name: str, now: float) -> None:
        self.loop, self.index, self.name = loop, index, name
        self.engine = CoreEngine(name, f"loop://{name}.fw", Device(name, name), heartbeat_ms=loop.heartbeat_ms,
                                 watchdog_s=3600.0, pid=os.getpid(), coredump_dir="")
        self.fw: Firmware | None = None
        self.intake: Intake | None = None        # the firmware's endpoint: its inbox, its connections' bindings
        self.paused = False
        self.kmsg: list[str] = []
        self.ran: list[int] = []                 # msg_ids of the tasks its firmware ran, in order
        self.boots = 0

    def flush(self) -> None:
        engine = self.engine
        while engine.out:
            effect = engine.out.pop(0)
            match effect:
                case ToPeer(identity, frames):
                    self.loop.to_peer(self, identity, frames)
                case KmsgLine(line):
                    self.kmsg.append(line)
                case Boot():
                    self._boot()
                case StopFw():
                    self._drop()
                case KillFw(reason):
                    self._drop()
                    engine.fw_died(reason, {})
                case Coredump():
                    pass
                case _:
                    assert_never(effect)

    def _boot(self) -> None:
        version, registry = fw_image.registry_of_source(stock, "stock")
        fw = Firmware(self.name, version, registry, None, None)
        fw.ownership = _ThisProcess(f"{self.name} firmware", accept_relay=True)

        def crash(msg, op_name, params):
            raise _Crash(f"operator {op_name} raised")
        fw.on_crash = crash
        fw.init_operators()
        self.fw, self.intake, self.boots = fw, fw.intake(), self.boots + 1
        self.engine.fw_booted(os.getpid(), "loopback", self.loop.now())
        self.engine.fw_ready({"version": version, "operators": registry.table(), "pid": os.getpid()})

    def _drop(self) -> None:
        self.fw, self.intake = None, None   # what it had not run is lost, as with its process

    def to_fw(self, identity: bytes, frames: list) -> None:
        intake = self.intake
        if intake is None:
            return               # nobody listens at the firmware endpoint: the message is lost
        intake.take(identity, frames)
        for answer in intake.out:
            self.loop.from_fw(self, answer[0], answer[1:])
        intake.out.clear()

    def step(self) -> bool:
        """Run the best waiting task; False if there is none (or the core is paused)."""
        fw, intake = self.fw, self.intake
        job = None if fw is None or intake is None or self.paused else intake.next_task()
        if fw is None or job is None:
            return False
        identity, frames, binding = job
        self.ran.append(wire.peek_msg_id(frames) or 0)
        try:
            reply = fw.run(frames, binding)
        except _Crash:
            self.crash("exception")
            return True
        if reply is not None:
            self.loop.from_fw(self, identity, reply)
        return True

    def crash(self, kind: str = "exception") -> None:
        self._drop()
        self.engine.fw_died(kind, {})
        self.flush()


class LoopbackTransport(Transport):
    """``mode``: ``relay`` (the SDK talks to the relay engine) or ``direct`` (to the cores);
    ``credit``: tasks the relay sends a core ahead; ``clock``: the time the engines see."""

    def __init__(self, mode: str = "relay", *, cores: tuple[str, ...] = ("vdsp0", "vdsp1"), credit: int = CREDIT,
                 heartbeat_ms: int = HEARTBEAT_INTERVAL_MS, clock=time.monotonic) -> None:
        self.clock, self.heartbeat_ms = clock, heartbeat_ms
        self.discovery = Servers(mode, {"relay": "loop://relay"} if mode == "relay" else
                                 {name: f"loop://{name}" for name in cores})
        self.lock = threading.RLock()
        self.ids = itertools.count(1)
        self.links: dict[bytes, Link] = {}
        now = self.now()
        self.relay = RelayEngine({name: f"loop://{name}" for name in cores}, now,
                                 ownership=_ThisProcess("relay"), pid=os.getpid(), heartbeat_ms=heartbeat_ms,
                                 credit=credit)
        self.fw_open = [False] * len(cores)
        self.cores = {name: _Core(self, i, name, now) for i, name in enumerate(cores)}
        self._next_tick = 0.0
        with self.lock:
            for core in self.cores.values():
                core.engine.start()
                core.flush()
            self._tick(force=True)
            self.run()

    def now(self) -> float:
        return self.clock()

    # --- the Transport interface (a link factory; its servers: ``self.discovery``) -----------
    def open(self, endpoint: str, name: str, *, watch: bool = False, server_key: str = "") -> Link:
        link = Link(self, endpoint, name, b"\x00sdk%d" % next(self.ids))
        with self.lock:
            self.links[link.identity] = link
        return link

    def release(self, link: Link) -> None:
        with self.lock:
            self.links.pop(link.identity, None)
            link.close()

    # --- what tests do --------------------------------------------------------------------
    def pause(self, core: str) -> None:
        """``core``'s firmware keeps taking tasks in but runs none until :meth:`resume`."""
        with self.lock:
            self.cores[core].paused = True

    def resume(self, core: str) -> None:
        with self.lock:
            self.cores[core].paused = False
            self.run()

    def crash(self, core: str, kind: str = "exception") -> None:
        """``core``'s firmware dies as its process would (recovery follows if enabled)."""
        with self.lock:
            self.cores[core].crash(kind)
            self.run()

    def waiting(self, core: str) -> int:
        """Tasks ``core``'s firmware holds, not yet run."""
        intake = self.cores[core].intake
        return 0 if intake is None else len(intake.inbox)

    # --- wiring ---------------------------------------------------------------------------
    def from_sdk(self, link: Link, frames: list) -> None:
        if self.mode == "relay":
            self.relay.on_client(link.identity, frames, self.now())
            self._relay_out()
            return
        name, _, fw = link.endpoint[len("loop://"):].partition(".")
        core = self.cores[name]
        if fw:
            core.to_fw(link.identity, frames)
        else:
            core.engine.on_message(link.identity, frames, self.now())
            core.flush()

    def to_peer(self, core: _Core, identity: bytes, frames: list) -> None:
        """A core's control message to ``identity`` (the relay, or an SDK link)."""
        if identity == RELAY_CTL:
            self.relay.on_ctl(core.index, frames, self.now())
            self._relay_out()
        elif identity in self.links:
            self.links[identity].push(frames)

    def from_fw(self, core: _Core, identity: bytes, frames: list) -> None:
        if identity == RELAY_FW:
            if self.fw_open[core.index]:
                self.relay.on_fw(core.index, frames, self.now())
                self._relay_out()
        elif identity in self.links:
            self.links[identity].push(frames)

    def _relay_out(self) -> None:
        relay = self.relay
        while relay.out:
            effect = relay.out.pop(0)
            match effect:
                case ToClient(identity, frames):
                    if identity in self.links:
                        self.links[identity].push(frames)
                case ToCtl(index, frames):
                    core = list(self.cores.values())[index]
                    core.engine.on_message(RELAY_CTL, frames, self.now())
                    core.flush()
                case ToFw(index, frames):
                    if self.fw_open[index]:
                        list(self.cores.values())[index].to_fw(RELAY_FW, frames)
                case OpenFwLink(index):
                    self.fw_open[index] = True
                case CloseFwLink(index):
                    self.fw_open[index] = False
                case _:
                    assert_never(effect)

    def _tick(self, force: bool = False) -> None:
        now = self.now()
        if not force and now < self._next_tick:
            return
        self._next_tick = now + TICK_S
        for core in self.cores.values():
            core.engine.tick(now, None)
            core.flush()
        self.relay.tick(now)
        self._relay_out()

    def run(self) -> None:
        """Everything that can happen now: ticks, then every runnable task, until none is left."""
        with self.lock:
            self._tick()
            while any([core.step() for core in self.cores.values()]):
                pass

    def close(self) -> None:
        with self.lock:
            for link in list(self.links.values()):
                link.close()
            self.links.clear()
            for core in self.cores.values():
                if core.fw is not None:
                    core.fw.destroy_operators()
                    core.fw.resolver.close()
                    core.fw = None

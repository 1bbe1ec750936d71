"""Structure-aware fuzzing of every peer: ``vdsp fuzz``.

A seeded generator builds messages the way a confused or hostile client would:
headers with wrong magic, versions, commands, cores and priorities; too few or
too many frames; bodies that are not msgpack, not maps, nested deep, wide, or
well-formed bodies of every command with wrong types; and TASKs for every
operator of the firmware's own table whose parameters follow the schema to its
edges and past them (image and tensor descriptors included), on real shared
buffers and on bogus, freed or out-of-bounds handles.

Two ways to run it:

- :func:`fuzz_firmware` feeds the messages to a firmware executor in this
  process (no sockets): an operator that raises something other than a
  ``VdspError`` is reported with its message and traceback.
- :func:`fuzz_soc` sends them to a running SoC, spread over the relay, both
  cores' control endpoints and both firmware endpoints, in batches; after each
  batch every core must answer PING through the relay and directly, and no
  process may have died, restarted or crashed.

Nothing here writes a remoteproc attribute: a CONTROL write that stops a core
is a correct answer, not a finding, so CONTROL bodies only read or name
attributes that do not exist.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import random
import struct
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Iterator

import msgpack

from protocol import errors, header, opids
from protocol.constants import MAX_HANDLES, Command
from vdsp_board.config import clihelp
from vdsp_board.processes import rundir
from vdsp_board.sockets import ipclink

_FORMATS = ("Y", "U8", "U16", "S16", "S32", "F32", "RGB", "BGR", "YUV444", "NV12", "NV12_SEPARATE")
_DTYPES = ("S8", "U8", "S16", "U16", "S32", "U32", "S64", "U64", "F32", "F64", "S4", "U4", "F16")
_LAYOUTS = ("NHWC", "NCHW", "NC1HWC2", "NONE")
_EDGE_INTS = (0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 31, 33, 63, 64, 255, 256, 65535, 1 << 31, (1 << 63) - 1, -1, -2,
              -(1 << 63))
_EDGE_FLOATS = (0.0, -0.0, 1e-30, 0.5, 1.0, -1.0, 1e30, math.inf, -math.inf, math.nan, 255.0, 1e9)
_SLOW_PARAMS = {"ms"}           # never ask a task to take long: it would be a stall, not a finding
BUFFER_SIZE = 1 << 16


@dataclasses.dataclass
class Buffer:
    phys: int
    size: int


class Generator:
    """Seeded message factory. ``table`` is the firmware's operator table (READY/QUERY),
    ``buffers`` real DDR buffers tasks may point at, ``owner`` the owner id tasks claim."""

    def __init__(self, seed: int, table: list[dict], buffers: list[Buffer], owner: int) -> None:
        self.rng = random.Random(seed)
        self.table, self.buffers, self.owner = table, buffers, owner
        self.msg_id = 0
        self.hostile = True      # per task: hostile values, or values that pass validation and probe edges
        self.shape = ("Y", 1, 1)  # per task: the (format, width, height) its images share when not hostile

    # --- scalars ----------------------------------------------------------------------------
    def _junk(self, depth: int = 0) -> Any:
        r = self.rng
        kind = r.randrange(9 if depth < 3 else 6)
        if kind == 0:
            return r.choice(_EDGE_INTS)
        if kind == 1:
            return r.choice(_EDGE_FLOATS)
        if kind == 2:
            return r.choice(["", "x", "NV12", "S8", "nearest", "reflect101", "\x00", "é" * 3, "a" * 300])
        if kind == 3:
            return r.choice([None, True, False])
        if kind == 4:
            return bytes(r.randrange(256) for _ in range(r.randrange(8)))
        if kind == 5:
            return r.randrange(-1000, 1000)
        if kind == 6:
            return [self._junk(depth + 1) for _ in range(r.randrange(5))]
        if kind == 7:
            return {r.choice(["a", "format", "dtype", "width", "roi", "quant"]): self._junk(depth + 1)
                    for _ in range(r.randrange(4))}
        return [[self._junk(depth + 2)]]

    def _int(self, spec: dict) -> Any:
        r = self.rng
        lo, hi = spec.get("min"), spec.get("max")
        if not self.hostile:
            if "choices" in spec:
                return r.choice(spec["choices"])
            lo = int(lo) if lo is not None else -4
            hi = int(hi) if hi is not None else lo + 64
            return r.choice((lo, hi, r.randint(lo, min(hi, lo + 8)), r.randint(lo, hi)))
        pick = r.randrange(10)
        if pick < 4 and lo is not None and hi is not None and hi - lo < 1 << 20:
            return r.randint(int(lo), int(hi))
        if pick < 6 and "choices" in spec:
            return r.choice(spec["choices"])
        if pick == 6 and lo is not None:
            return int(lo) - r.choice((0, 1))
        if pick == 7 and hi is not None:
            return int(hi) + r.choice((0, 1))
        if pick == 8:
            return self._junk()
        return r.choice(_EDGE_INTS)

    def _float(self, spec: dict) -> Any:
        r = self.rng
        lo, hi = spec.get("min"), spec.get("max")
        if not self.hostile:
            lo = float(lo) if lo is not None else -2.0
            hi = float(hi) if hi is not None else lo + 10.0
            return r.choice((lo, hi, r.uniform(lo, min(hi, lo + 1.0)), r.uniform(lo, hi)))
        pick = r.randrange(8)
        if pick < 4 and lo is not None and hi is not None:
            return r.uniform(float(lo), float(hi))
        if pick == 4:
            return self._junk()
        if pick == 5:
            return r.randint(-5, 50)
        return r.choice(_EDGE_FLOATS)

    def _list(self, spec: dict, item) -> Any:
        r = self.rng
        n = spec.get("len", r.randrange(1, 6))
        if not self.hostile:
            return [item(spec if "min" in spec else {}) for _ in range(n)]
        if r.random() < 0.15:
            n = r.choice((0, 1, n + 1, max(0, n - 1), 40))
        if r.random() < 0.1:
            return self._junk()
        return [item({}) for _ in range(n)]

    def _image(self) -> Any:
        r = self.rng
        if self.hostile and r.random() < 0.08:
            return self._junk()
        fmt = r.choice(_FORMATS)
        w, h = r.choice((1, 2, 3, 4, 8, 16, 17, 32, 64, 0, -1)), r.choice((1, 2, 3, 4, 8, 16, 32, 64, 0))
        if not self.hostile:
            fmt, w, h = self.shape if r.random() < 0.8 else (fmt, r.choice((1, 2, 3, 4, 5, 8, 16, 17, 31, 64)),
                                                               r.choice((1, 2, 3, 4, 6, 8, 16, 33, 64)))
        bpp = {"U16": 2, "S16": 2, "S32": 4, "F32": 4, "RGB": 3, "BGR": 3, "YUV444": 3}.get(fmt, 1)
        strides = (w * bpp, w * bpp + 16) if not self.hostile else (w * bpp, w * bpp + 16, w, 0, 1 << 20, w * bpp - 1)
        desc: dict = {"format": fmt, "width": w, "height": h, "stride": r.choice(strides)}
        if r.random() < 0.3:
            desc["roi"] = [r.randrange(0, 2), r.randrange(0, 2), r.randrange(1, w + 1) if w > 0 else 0,
                           r.randrange(1, h + 1) if h > 0 else 0]
            if self.hostile:
                desc["roi"] = [r.randrange(-1, 4), r.randrange(-1, 4), r.randrange(-1, 70), r.randrange(-1, 70)]
        if self.hostile and r.random() < 0.1:
            desc[r.choice(["format", "width", "height", "stride", "roi", "extra"])] = self._junk()
        return desc

    def _tensor(self) -> Any:
        r = self.rng
        if self.hostile and r.random() < 0.08:
            return self._junk()
        ndim = r.choice((1, 2, 3, 4, 4, 4, 5, 0) if self.hostile else (1, 2, 3, 4, 4, 4))
        shape = [r.choice((1, 1, 2, 3, 4, 8, 16, 0) if self.hostile else (1, 1, 2, 3, 4, 8)) for _ in range(ndim)]
        item = r.choice((1, 2, 4, 8))
        stride: list[int] = []
        acc = item
        for n in reversed(shape):
            stride.insert(0, acc)
            acc *= max(n, 1)
        desc: dict = {"dtype": r.choice(_DTYPES), "layout": r.choice(_LAYOUTS), "valid_shape": shape,
                      "aligned_shape": list(shape) if r.random() < 0.8 else [v + 1 for v in shape],
                      "stride": stride if r.random() < 0.8 else [r.choice(_EDGE_INTS) for _ in shape],
                      "aligned_byte_size": acc if r.random() < 0.8 else r.choice(_EDGE_INTS)}
        if not self.hostile:
            desc["aligned_shape"], desc["stride"], desc["aligned_byte_size"] = list(shape), stride, acc
            desc["dtype"] = r.choice({1: ("S8", "U8"), 2: ("S16", "U16"), 4: ("S32", "U32", "F32"),
                                      8: ("S64", "U64", "F64")}[item])
        q = r.randrange(4 if self.hostile else 3)
        if q == 1:
            desc["quant"] = {"type": "SCALE", "scale": [r.choice(_EDGE_FLOATS)], "zero_point": [0],
                             "axis": -1 if self.hostile else r.randrange(0, ndim)}
        elif q == 2:
            desc["quant"] = {"type": "SHIFT", "shift": [r.randrange(-2, 40) if self.hostile else r.randrange(0, 8)],
                             "axis": r.randrange(-2, 5) if self.hostile else r.randrange(0, ndim)}
        elif q == 3:
            desc["quant"] = self._junk()
        if self.hostile and r.random() < 0.1:
            desc[r.choice(list(desc))] = self._junk()
        return desc

    def _value(self, name: str, spec: dict) -> Any:
        kind = spec.get("type")
        if kind == "int":
            value = self._int(spec)
        elif kind == "float":
            value = self._float(spec)
        elif kind == "str":
            value = self.rng.choice(spec["choices"]) if "choices" in spec and self.rng.random() < 0.85 \
                else self._junk()
        elif kind == "bool":
            value = self.rng.choice([True, False]) if self.rng.random() < 0.9 else self._junk()
        elif kind == "int_list":
            value = self._list(spec, self._int)
        elif kind == "float_list":
            value = self._list(spec, self._float)
        elif kind == "any":
            doc = spec.get("doc", "")
            value = self._tensor() if "tensor" in doc else self._image() if "image" in doc or "F32" in doc \
                else self._junk()
        else:
            value = self._junk()
        if name in _SLOW_PARAMS and isinstance(value, (int, float)) and not isinstance(value, bool) \
                and not (isinstance(value, float) and math.isnan(value)) and value > 5:
            value = 5
        return value

    # --- handles ----------------------------------------------------------------------------
    def _handle(self) -> Any:
        r = self.rng
        if not self.hostile and self.buffers:
            buf = r.choice(self.buffers)
            return [buf.phys, buf.size, 0]
        pick = r.randrange(20)
        if pick < 17 and self.buffers:
            buf = r.choice(self.buffers)
            off = r.choice((0, 0, 0, 0, 0, 0, 1, 64, buf.size // 2, buf.size - 1))
            size = r.choice((buf.size - off,) * 6 + (1, 64, 4096, buf.size + 1, (buf.size - off) // 2 or 1))
            return [buf.phys + off, size, 0 if r.random() < 0.95 else r.choice((1, 2, 0xFF))]
        if pick < 19:
            return [r.choice(_EDGE_INTS[:18]) & ((1 << 64) - 1), r.choice((1, 64, 4096)), 0]
        return self._junk()

    def _handles(self, lo_hi: list) -> list:
        r = self.rng
        lo, hi = lo_hi
        n = r.randint(lo, min(hi, 4)) if not self.hostile or r.random() < 0.85 else \
            r.choice((0, hi + 1, MAX_HANDLES + 1))
        return [self._handle() for _ in range(n)]

    # --- messages ---------------------------------------------------------------------------
    def task_body(self, op: dict) -> dict:
        r = self.rng
        self.hostile = r.random() < 0.5
        self.shape = (r.choice(("Y", "Y", "U8", "RGB", "BGR", "NV12", "F32", "S16", "YUV444", "NV12_SEPARATE")),
                      r.choice((1, 2, 3, 4, 5, 8, 16, 17, 31, 64)), r.choice((1, 2, 3, 4, 6, 8, 16, 33, 64)))
        params = {name: self._value(name, spec) for name, spec in op["params"].items()
                  if "default" not in spec or r.random() < 0.6}
        if not self.hostile:
            return {"inputs": self._handles(op["inputs"]), "outputs": self._handles(op["outputs"]),
                    "params": params, "owner": self.owner}
        if r.random() < 0.05:
            params[r.choice(["x", "colour", "size"])] = self._junk()
        if r.random() < 0.05 and params:
            params.pop(r.choice(list(params)))
        body = {"inputs": self._handles(op["inputs"]), "outputs": self._handles(op["outputs"]),
                "params": params, "owner": self.owner if r.random() < 0.9 else self._junk()}
        if r.random() < 0.05:
            body[r.choice(["inputs", "outputs", "params", "owner"])] = self._junk()
        return body

    def body_for(self, cmd: int) -> Any:
        r = self.rng
        if cmd == Command.HELLO:
            return {"role": r.choice(["client", "relay", "tool", 7]), "pid": r.choice(_EDGE_INTS),
                    "owner": r.choice((self.owner, 0, -1, 1 << 40)), "name": "fuzz"}
        if cmd == Command.QUERY:
            return {"what": r.choice(["cores", "stats", "operators", "", self._junk()])}
        if cmd == Command.CANCEL:
            return {"target": r.choice((self.msg_id, self.msg_id - 1, 0, -1, 1 << 63, self._junk()))}
        if cmd == Command.CONTROL:   # reads, and writes of attributes that do not exist
            attr = r.choice(["state", "firmware", "recovery", "coredump", "name"])
            value = None
            if r.random() < 0.4:
                attr, value = r.choice(["nonexistent", "../state", "", "x" * 300]), r.choice(["start", "stop", ""])
            return {"core": r.choice(["vdsp0", "vdsp1", "vdsp9", "", self._junk()]), "attr": attr,
                    "value": value}
        return {r.choice(["state", "core", "code", "message"]): self._junk() for _ in range(r.randrange(3))}

    def header(self, cmd: int, op: int = 0) -> bytes:
        r = self.rng
        self.msg_id += 1
        magic, version = b"VD", 2
        if r.random() < 0.03:
            magic = r.choice((b"XX", b"DV", b"\x00\x00"))
        if r.random() < 0.03:
            version = r.choice((0, 2, 255))
        if r.random() < 0.03:
            cmd = r.randrange(256)
        core = r.choice((0, 0, 0, 1, 2)) if r.random() < 0.95 else r.randrange(256)
        msg_id = self.msg_id if r.random() < 0.95 else r.choice((0, 1 << 63, self.msg_id - 1))
        return struct.pack("<2sBBHBBQq", magic, version, cmd, op, r.randrange(256), core, msg_id,
                           r.choice((0, 0, -1, 1 << 40, -(1 << 63))))

    def frames(self) -> list:
        """One message as a frame list (sometimes not a message at all)."""
        r = self.rng
        roll = r.random()
        if roll < 0.04:                                     # not even a header
            return [bytes(r.randrange(256) for _ in range(r.randrange(40)))] * r.randrange(1, 3)
        if roll < 0.65 and self.table:                      # a task for a real operator
            op = r.choice(self.table)
            opcode = op["id"] if r.random() < 0.95 else r.randrange(1 << 16)
            body = self.task_body(op)
            frames = [self.header(Command.TASK, opcode), self._pack(body)]
            if not self.hostile:
                return frames
        else:
            cmd = r.choice(list(Command))
            frames = [self.header(cmd), self._pack(self.body_for(cmd))]
        roll = r.random()
        if roll < 0.03:
            frames[1] = r.choice([b"", b"\xc1", b"\x91" * 40 + b"\x80", msgpack.packb([1, 2]),
                                  b"\x81\xa1a" + b"\x91" * r.choice((30, 31, 1000)) + b"\x80",
                                  bytes(r.randrange(256) for _ in range(30))])
        elif roll < 0.05:
            frames = frames[:1]
        elif roll < 0.08:
            frames += [bytes(r.randrange(1, 64)) for _ in range(r.choice((1, 2, 70)))]
        return frames

    def _pack(self, body: Any) -> bytes:
        try:
            return msgpack.packb(body, use_bin_type=True)
        except (TypeError, ValueError, OverflowError):
            return msgpack.packb({"junk": True})


# --- in-process: the firmware executor ------------------------------------------------------

@dataclasses.dataclass
class Finding:
    index: int
    frames: list
    traceback: str


def stock_registry():
    from dsp_side import fw_image
    from dsp_side.firmware_src.stock import firmware as stock
    return fw_image.registry_of_source(stock, "stock")


def fuzz_firmware(messages: int, seed: int = 0, limit_findings: int = 20,
                  outcomes: dict | None = None) -> tuple[int, list[Finding]]:
    """Run ``messages`` generated messages through a firmware executor in this process.

    Returns (messages run, findings): each finding is a message on which the executor
    raised or would have crashed the firmware (a non-VdspError escaping an operator).
    ``outcomes``, if given, counts the replies by kind ("ok", an error code, "none").
    """

    class _Crashed(Exception):
        pass

    def crash(msg, op_name, params):     # instead of os._exit: report it (Firmware.on_crash)
        raise _Crashed(traceback.format_exc())

    import logging
    quiet = logging.getLogger("vdsp")
    saved_level = quiet.level
    quiet.setLevel(logging.CRITICAL)      # the firmware's refusals, only for this run
    try:
        return _run_in_process(messages, seed, limit_findings, outcomes, crash, _Crashed)
    finally:
        quiet.setLevel(saved_level)


def _run_in_process(messages, seed, limit_findings, outcomes, crash, _Crashed):
    from arm_side.memory import MemoryManager
    from dsp_side.firmware import Firmware
    version, registry = stock_registry()
    fw = Firmware("vdsp0", version, registry, None, None)
    fw.on_crash = crash
    intake = fw.intake()
    findings: list[Finding] = []
    with MemoryManager() as mm:
        bufs = [mm.alloc(BUFFER_SIZE) for _ in range(6)]
        gen = Generator(seed, registry.table(), [Buffer(b.phys_addr, b.size) for b in bufs], _owner_id())
        for i in range(messages):
            frames = gen.frames()
            # One connection that proved this process's owner (a HELLO here has no peer to verify
            # and would be refused, leaving every later buffer foreign): bound afresh each time.
            intake.bindings.set(b"fuzz", gen.owner)
            try:
                intake.take(b"fuzz", frames)        # what the firmware's I/O thread does with it
                job = intake.next_task()            # and its compute thread, if it is a task
                replies = [answer[1:] for answer in intake.out]
                intake.out.clear()
                if job is not None and (result := fw.run(job[1], job[2])) is not None:
                    replies.append(result)
                if outcomes is not None:
                    for reply in replies or [None]:
                        kind = "none" if reply is None else "ok" if header.command_of(reply[0]) == Command.RESULT \
                            else msgpack.unpackb(reply[1]).get("code")
                        outcomes[kind] = outcomes.get(kind, 0) + 1
            except _Crashed as exc:
                findings.append(Finding(i, frames, str(exc)))
            except Exception:
                findings.append(Finding(i, frames, traceback.format_exc()))
            if len(findings) >= limit_findings:
                return i + 1, findings
        fw.resolver.close()
    return messages, findings


def _owner_id() -> int:
    from vdsp_board.memory import ddr
    return ddr.current_owner().id


# --- live: a running SoC --------------------------------------------------------------------

def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclasses.dataclass
class SocReport:
    sent: int = 0
    replies: int = 0
    batches: int = 0
    crashes: int = 0
    restarts: int = 0
    failures: list = dataclasses.field(default_factory=list)
    rss_before: dict = dataclasses.field(default_factory=dict)
    rss_after: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0

    def ok(self) -> bool:
        return not self.failures and self.crashes == 0 and self.restarts == 0

    def lines(self) -> Iterator[str]:
        yield (f"fuzz: {self.sent} messages in {self.batches} batches, {self.replies} replies, "
               f"{self.seconds:.1f} s ({self.sent / max(self.seconds, 1e-9):.0f} msg/s)")
        yield f"fuzz: crashes {self.crashes}, restarts {self.restarts}, failed checks {len(self.failures)}"
        for name in sorted(self.rss_before):
            yield (f"fuzz: RSS {name:12} {self.rss_before[name] / 1024:8.1f} MiB -> "
                   f"{self.rss_after.get(name, 0) / 1024:8.1f} MiB")
        for failure in self.failures[:10]:
            yield f"fuzz: FAILED {failure}"


def _processes(soc) -> tuple[dict, dict]:
    """({name: pid} of relay, cores and firmwares; {core: crash_count}) as the SoC reports them."""
    pids, crashes = {}, {}
    stats = soc.query("stats")
    pids["relay"] = stats.get("pid")
    for core in soc.query("cores")["cores"]:
        crashes[core["name"]] = core.get("crash_count", 0)
    from arm_side import Soc
    with Soc(mode="direct", autostart_relay=False, connect_timeout_s=5) as direct:
        for core in direct.query("cores")["cores"]:
            pids[core["name"]] = core.get("pid")
            pids[core["name"] + ".fw"] = core.get("fw_pid")
    return pids, crashes


def fuzz_soc(rt: Path, messages: int, *, seed: int = 0, batch: int = 2000, progress=None) -> SocReport:
    """Fuzz the SoC serving runtime dir ``rt`` (relay at ``rt/relay.sock``, cores beside it)."""
    import zmq

    from arm_side import CORE_0, CORE_1, Soc
    report = SocReport()
    t0 = time.monotonic()
    with Soc(autostart_relay=False) as soc:
        pids, crashes = _processes(soc)
        report.rss_before = {n: _rss_kb(p) for n, p in pids.items() if p}
        table = [op for op in soc.query("cores")["cores"][0].get("operators", [])]
        bufs = [soc.mem.alloc(BUFFER_SIZE) for _ in range(6)]
        gen = Generator(seed, table, [Buffer(b.phys_addr, b.size) for b in bufs], _owner_id())
        ctx = zmq.Context()
        socks, dirs = [], []
        where = rundir.socket_dir(rt)
        for name in ("relay.sock", "vdsp0.sock", "vdsp1.sock", "vdsp0.fw.sock", "vdsp1.fw.sock"):
            sock = ctx.socket(zmq.DEALER)
            sock.linger = 0
            sock.sndhwm = sock.rcvhwm = 100000
            socks.append(sock)
            dirs.append(ipclink.connect(sock, f"ipc://{where / name}"))     # once, through the checked directory
        try:
            while report.sent < messages:
                n = min(batch, messages - report.sent)
                for _ in range(n):
                    sock = gen.rng.choice(socks)
                    try:
                        sock.send_multipart(gen.frames(), zmq.NOBLOCK)
                    except zmq.Again:
                        pass
                    report.sent += 1
                    if report.sent % 64 == 0:
                        report.replies += _drain(socks)
                deadline = time.monotonic() + 2.0
                while time.monotonic() < deadline:
                    got = _drain(socks)
                    report.replies += got
                    if not got:
                        time.sleep(0.02)
                        if not _drain(socks):
                            break
                report.batches += 1
                _check(soc, report, pids, crashes, CORE_0, CORE_1)
                if progress:
                    progress(report)
                if report.failures:
                    break
        finally:
            for sock in socks:
                sock.close(0)
            for linked in dirs:
                if linked is not None:
                    linked.close()
            ctx.destroy(linger=0)       # a socket an exception left open too: term() would wait for it
        report.rss_after = {n: _rss_kb(p) for n, p in pids.items() if p}
    report.seconds = time.monotonic() - t0
    return report


def _drain(socks) -> int:
    import zmq
    got = 0
    for sock in socks:
        while True:
            try:
                sock.recv_multipart(zmq.NOBLOCK)
                got += 1
            except zmq.Again:
                break
    return got


def _check(soc, report: SocReport, pids: dict, crashes: dict, *cores) -> None:
    """Every core answers PING via the relay and directly; no pid changed; no crash counted."""
    from arm_side import Soc
    try:
        for core in cores:
            # priority 255 jumps the queues: the check asks "alive?", not "done with the backlog?"
            soc.rpc(opids.PING, core=core, priority=255).wait(10000)
        with Soc(mode="direct", autostart_relay=False, connect_timeout_s=5) as direct:
            for core in cores:
                direct.rpc(opids.PING, core=core, priority=255).wait(10000)
        now_pids, now_crashes = _processes(soc)
    except errors.VdspError as exc:
        report.failures.append(f"after batch {report.batches}: {exc}")
        return
    report.restarts = sum(1 for n, p in pids.items() if now_pids.get(n) != p)
    report.crashes = sum(now_crashes.get(n, 0) - c for n, c in crashes.items())
    if report.restarts or report.crashes:
        report.failures.append(f"after batch {report.batches}: pids {pids} -> {now_pids}, crashes {crashes} -> "
                               f"{now_crashes}")


# --- command line ---------------------------------------------------------------------------

DESCRIPTION = "Structure-aware fuzzing of the relay, the cores and the firmwares."


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of 'vdsp fuzz' (vdsp_sim/commands/fuzz.py)."""
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages to send")
    ap.add_argument("--seed", type=int, default=int(time.time()), help="generator seed (printed; reuse it to "
                    "replay a run)")
    ap.add_argument("--batch", type=int, default=5000, help="messages between two health checks")
    ap.add_argument("--in-process", action="store_true",
                    help="feed a firmware executor in this process instead of a SoC (prints tracebacks)")
    ap.add_argument("--start", action="store_true",
                    help="start a private SoC for the run (else fuzz the one up in $VDSP_RUNTIME_DIR)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vdsp fuzz", description=DESCRIPTION)
    add_arguments(ap)
    return run_args(clihelp.finish(ap).parse_args(argv))


def run_args(args: argparse.Namespace) -> int:
    print(f"fuzz: seed {args.seed}", flush=True)
    if args.in_process:
        outcomes: dict = {}
        t0 = time.monotonic()
        ran, findings = fuzz_firmware(args.messages, args.seed, outcomes=outcomes)
        print(f"fuzz: {ran} messages through the firmware executor in {time.monotonic() - t0:.1f} s, "
              f"{len(findings)} finding(s)")
        print("fuzz: replies by outcome: " + ", ".join(f"{k}: {v}" for k, v in
                                                      sorted(outcomes.items(), key=lambda kv: -kv[1])))
        for f in findings:
            print(f"--- message {f.index}: {f.frames!r:.300}\n{f.traceback}")
        return 1 if findings else 0
    return _live(args)


def _live(args: argparse.Namespace) -> int:
    import contextlib

    from vdsp_sim.soc.private_soc import private_soc

    def progress(rep: SocReport) -> None:
        print(f"fuzz: {rep.sent}/{args.messages} sent, {rep.replies} replies, all processes serving",
              flush=True)
    with private_soc() if args.start else contextlib.nullcontext():
        report = fuzz_soc(rundir.runtime_dir(), args.messages, seed=args.seed, batch=args.batch, progress=progress)
    for line in report.lines():
        print(line)
    return 0 if report.ok() else 1


if __name__ == "__main__":
    sys.exit(main())

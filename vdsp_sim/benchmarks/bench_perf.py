#!/usr/bin/env python3
"""Performance against the floor (issue 18): every row of the issue's table from ONE run, each
with its target and verdict.

Rows (all ratios are taken between figures of the same run, so a shared machine's load hits
both sides alike):

* CV, per operator: the median of (SoC rpc - floor rpc), paired samples (which of a pair goes
  first alternates), <= +100 µs, every operator (``bench_cv``'s cases and floor: the same cv2
  callable in a raw-pyzmq worker, ``floor.py``). A difference, not a ratio: the ratio's
  denominator (floor rpc - in-process) was near zero or negative for half the operators, and
  the ratio with it meaningless;
* CV and NN, per operator: DSP exec - in-process <= 50 µs (``exec_us`` the firmware reports,
  in-process = the cv2 call for CV, the operator function on process-local buffers for NN);
* relay no-op p50 / raw pyzmq baseline p50 <= 1.2 and p99 / p99 <= 1.5 (``bench_rpc``);
* relay tasks/s / baseline tasks/s >= 1.0 (``bench_rpc``'s window of 64);
* CPU µs per task, all processes, relay mode <= 1.0 x the baseline's, the client's <= 1.2 x the
  baseline client's, and each process <= 2 x its counterpart (client / client, relay / relay, the
  two firmwares / the worker) (``bench_rpc.measure_cpu``);
* direct mode (``Soc(mode="direct")``) against the direct floor (``bench_rpc.DirectBaseline``: a
  raw pyzmq client and one echo worker, no relay): p50 <= 1.2, tasks/s >= 1.0, CPU per task of all
  processes <= 1.0 and of the client <= 1.2 (issue 43); the two client rows also give, for
  information, the protocol floor: the raw client plus the per-task work the protocol asks of any
  client, in Python with the protocol's own functions (``Baseline.protocol_throughput``), against
  the raw client and against the SDK's (how much of the SDK's excess is the protocol's); and, for
  information, the native direct floor: the direct floor's topology and messages in C, no Python in
  either process (``native_floor.py``): how much of the Python floor is the machine's;
* first task of each operator on each core after ``vdsp up -d`` returns <= 50 ms (a SoC of
  its own, started by the real command in a private runtime directory, stopped by ``vdsp down``);
  on that SoC: ``vdsp up -d`` itself <= 1 s (the stock image's C kernels compiled into the build
  cache first, as a checkout's first ``vdsp up`` does, and that compile's time reported beside),
  its PSS (all its processes, after one task per core) <= 250 MB, a SIGKILLed firmware serving
  again <= 0.5 s (``footprint.py``);
* CenterPoint 300k / PointPillars 100k median total <= 5 / 2.5 ms, bit-exact with the CPU
  reference (``bench_pointcloud.bench_one``).

Usage::

    .venv/bin/vdsp bench perf [--quick] [--json FILE] [--fail-on-miss]

Exit status 0 when the run completes (met or missed), 1 on error, 3 with ``--fail-on-miss``
when a row is missed. Progress goes to stderr, the table to stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any
from pathlib import Path

import numpy as np

from vdsp_sim.benchmarks import bench_cv, bench_nn, bench_pointcloud, footprint
from vdsp_sim.benchmarks.awake import cpus_kept_awake
from vdsp_sim.benchmarks.bench_rpc import (WINDOW, Baseline, DirectBaseline, FullStack, measure_cpu, pct,
                                           ping_body_size, progress)
from vdsp_sim.benchmarks.floor import Floor
from vdsp_sim.benchmarks.native_floor import NativeFloor
from vdsp_sim.benchmarks.report import Report
from vdsp_board.config import clihelp
from vdsp_board.processes import proc, procfacts

TARGETS = {      # key: (label, comparison, target)
    "cv_diff": ("CV: median of (SoC rpc - floor rpc), every operator (µs)", "<=", 100.0),
    "exec_over": ("CV and NN: DSP exec - in-process, every operator (µs)", "<=", 50.0),
    "relay_p50": ("relay no-op p50 / raw pyzmq baseline p50", "<=", 1.2),
    "relay_p99": ("relay no-op p99 / baseline p99", "<=", 1.5),
    "tput": ("relay tasks/s / baseline tasks/s", ">=", 1.0),
    "cpu": ("CPU µs per task, all processes, relay / baseline", "<=", 1.0),
    "cpu_client": ("CPU µs per task, the client, relay / baseline", "<=", 1.2),
    "cpu_proc": ("CPU µs per task, each process / its baseline counterpart, worst", "<=", 2.0),
    "direct_p50": ("direct no-op p50 / direct floor p50", "<=", 1.2),
    "direct_tput": ("direct tasks/s / direct floor tasks/s", ">=", 1.0),
    "direct_cpu": ("CPU µs per task, all processes, direct / direct floor", "<=", 1.0),
    "direct_cpu_client": ("CPU µs per task, the client, direct / direct floor", "<=", 1.2),
    "first_task": ("first task of each operator after 'vdsp up -d' (ms)", "<=", 50.0),
    "up": ("'vdsp up -d' (s)", "<=", 1.0),
    "pss": ("idle SoC after one task per core: PSS of all its processes (MB)", "<=", 250.0),
    "restart": ("a killed firmware serving again (s), worst core", "<=", 0.5),
    "centerpoint": ("CenterPoint 300k median total (ms), bit-exact", "<=", 5.0),
    "pointpillars": ("PointPillars 100k median total (ms), bit-exact", "<=", 2.5),
}
MED = statistics.median


LAT_BLOCK, LAT_BLOCK_WARM = 100, 5     # paired_latency's blocks


def _us(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e6


class _On:
    """A Soc whose tasks all go to one core and which remembers the last task (for exec_us)."""

    def __init__(self, soc, core: int) -> None:
        self.soc, self.mem, self.core = soc, soc.mem, core
        self.last: Any = None        # the last Task

    def rpc(self, *a, **kw):
        kw["core"] = self.core
        self.last = self.soc.rpc(*a, **kw)
        return self.last


# --- operator cases: (name, op id, input byte arrays, output sizes, params) ------------------------

def nn_cases() -> list[dict]:
    """The NN operators on typical inputs; the yolo chain's inputs come from running the
    previous step in-process (the operator functions on local buffers)."""
    from arm_side import nn
    from arm_side.nn.yolo import F4, HEADER, RECORD
    from protocol.contract import nn_ids as ids
    rng = np.random.default_rng(1)
    shape = (1, 64, 56, 56)
    x = rng.standard_normal(shape).astype(np.float32)
    q = nn.Quantization.scale_(0.02)
    f32, s8 = nn.dense(shape, nn.DataType.F32, nn.Layout.NCHW), nn.aligned(shape, nn.DataType.S8, nn.Layout.NCHW, quant=q)
    s8d = nn.dense(shape, nn.DataType.S8, nn.Layout.NCHW, quant=q)
    xq = np.clip(np.rint(x / 0.02), -128, 127).astype(np.int8)
    c2 = nn.nc1hwc2(1, 64, 56, 56, nn.DataType.S8, platform="RK3588")
    logits = nn.dense((8, 1000), nn.DataType.F32, nn.Layout.NONE)
    probs = nn.dense((8, 1000), nn.DataType.F32, nn.Layout.NONE)
    b = lambda a: np.frombuffer(np.ascontiguousarray(a).tobytes(), np.uint8)   # noqa: E731
    io = lambda s, d: {"input": s.to_wire(), "output": d.to_wire()}           # noqa: E731
    cases = [
        dict(name="quantize", op=ids.QUANTIZE, inputs=[b(x)], outputs=[s8.aligned_byte_size], params=io(f32, s8)),
        dict(name="dequantize", op=ids.DEQUANTIZE, inputs=[b(xq)], outputs=[f32.aligned_byte_size],
             params=io(s8d, f32)),
        dict(name="softmax", op=ids.SOFTMAX, inputs=[b(rng.standard_normal((8, 1000)).astype(np.float32))],
             outputs=[probs.aligned_byte_size], params={**io(logits, probs), "axis": -1}),
        dict(name="layout", op=ids.LAYOUT, inputs=[b(xq)], outputs=[c2.aligned_byte_size],
             params={**io(s8d, c2), "channels": -1, "platform": "RK3588"}),
    ]
    p, batch, cap = bench_nn.yolo_params(), 1, 16384
    maps = []
    for w, h in zip(p.map_w, p.map_h):
        m = rng.standard_normal((batch, 3, 85, w * h)).astype(np.float32)
        m[:, :, 4] -= 3.0
        maps.append(b(m))
    cases.append(dict(name="yolov3_detection_output", op=ids.YOLOV3_DETECTION_OUTPUT, inputs=maps,
                      outputs=[p.output_bytes(batch)],
                      params={**p.geometry(), "max_box_num": p.max_box_num, "confidence_thresh": p.confidence_thresh,
                              "nms_thresh": p.nms_thresh, "batch": batch, "batch_offset": 0}))
    block = batch * (HEADER + RECORD * cap) * F4
    chain = [
        ("yolo_decode", ids.YOLO_DECODE, batch * p.boxes * (5 + p.class_num) * F4, {**p.geometry(), "batch": batch}),
        ("yolo_filter", ids.YOLO_FILTER, block, {"class_num": p.class_num, "boxes": p.boxes,
                                                 "confidence_thresh": p.confidence_thresh, "capacity": cap,
                                                 "batch": batch}),
        ("yolo_nms", ids.YOLO_NMS, block, {"nms_thresh": p.nms_thresh, "capacity": cap, "batch": batch}),
        ("yolo_topk", ids.YOLO_TOPK, p.output_bytes(batch), {"max_box_num": p.max_box_num, "capacity": cap,
                                                             "batch": batch}),
    ]
    local, ins = Local(), maps
    for name, op, size, params in chain:
        case = dict(name=name, op=op, inputs=ins, outputs=[size], params=params)
        cases.append(case)
        ins = [local.run(case)[0].copy()]
    return cases


def pointcloud_cases() -> list[dict]:
    """Stage 1 of a CenterPoint 300k cloud and stage 2 on half-full pillars."""
    from arm_side.pointcloud import synthetic
    from arm_side.pointcloud.params import TYPICAL_POINTS, preset
    from protocol.contract.pointcloud_ids import ENCODE, TRANSPOSE
    p = preset("centerpoint")
    n = TYPICAL_POINTS["centerpoint"]
    pts = np.ascontiguousarray(synthetic.generate(n, p.dim), np.float32).view(np.uint8).reshape(-1)
    cap = p.max_pillars * p.max_points
    return [dict(name="pointcloud_encode", op=ENCODE, inputs=[pts], outputs=[n * 4, n * 4, n],
                 params=dict(p.encode_params(), num_points=n)),
            dict(name="pointcloud_transpose", op=TRANSPOSE, inputs=[np.zeros(cap * 4, np.uint8), np.zeros(cap, np.uint8)],
                 outputs=[int(np.prod(p.feature_shape))], params=p.transpose_params(p.max_pillars // 2))]


def framework_cases() -> list[dict]:
    from arm_side import opids
    data = np.arange(4096, dtype=np.uint32).view(np.uint8)
    return [dict(name="ping", op=opids.PING, inputs=[], outputs=[], params={}),
            dict(name="memcpy", op=opids.MEMCPY, inputs=[data], outputs=[data.size], params={"size": data.size}),
            dict(name="fill", op=opids.FILL, inputs=[], outputs=[data.size], params={"value": 7, "size": data.size}),
            dict(name="checksum", op=opids.CHECKSUM, inputs=[data], outputs=[], params={"size": data.size}),
            dict(name="sleep", op=opids.SLEEP, inputs=[], outputs=[], params={"ms": 0.0}),
            dict(name="count", op=opids.COUNT, inputs=[], outputs=[64], params={"slot": 0})]


class Local:
    """The stock firmware's operator functions called in this process on local buffers."""

    def __init__(self) -> None:
        from dsp_side.firmware import OperatorContext
        from vdsp_sim.fuzz import stock_registry
        _, self.registry = stock_registry()
        self.ctx = OperatorContext("local")

    def bind(self, case: dict):
        """A callable running ``case`` in-process; returns the output arrays."""
        from protocol import schema
        spec = self.registry.get(case["op"])
        params = schema.validate(spec.name, spec.params, case["params"])
        ins = []
        for a in case["inputs"]:
            a = np.array(a, np.uint8)
            a.flags.writeable = spec.inputs_writable
            ins.append(a)
        outs = [np.zeros(n, np.uint8) for n in case["outputs"]]

        def run():
            self.registry.prepare(spec, self.ctx, ins, outs, params)
            spec.fn(self.ctx, ins, outs, **params)
            return outs
        return run

    def run(self, case: dict):
        return self.bind(case)()


class Remote:
    """``case`` on the SoC: its buffers allocated and written once; ``call(core)`` -> the waited Task."""

    def __init__(self, soc, case: dict) -> None:
        self.soc, self.case = soc, case
        self.ins = [self._mem(a.size, a) for a in case["inputs"]]
        self.outs = [self._mem(n) for n in case["outputs"]]

    def _mem(self, size: int, data=None):
        mem = self.soc.mem.alloc(max(1, int(size)))
        if data is not None:
            mem.write(data.tobytes())
        return mem

    def call(self, core: int, timeout_ms: int = 60000):
        task = self.soc.rpc(self.case["op"], inputs=self.ins, outputs=self.outs, params=self.case["params"], core=core)
        task.wait(timeout_ms)
        return task

    def free(self) -> None:
        for mem in self.ins + self.outs:
            mem.free()


def cv_images(soc, table: dict) -> dict:
    """name -> (src image, dst image, call(soc, src, dst)) for bench_cv's cases (as bench_cv._run)."""
    from arm_side import cv
    mx, my = table.pop("_maps")
    images = {}
    for name, (sfmt, pixels, dfmt, (dw, dh), call, _) in table.items():
        src, dst = cv.write_image(soc, pixels, sfmt), cv.alloc_image(soc, dfmt, dw, dh)
        if name == "remap":
            maps = cv.write_image(soc, mx, "F32"), cv.write_image(soc, my, "F32")
            call = lambda s, a, b, m=maps: cv.remap(s, a, m[0], m[1], b)   # noqa: E731
        images[name] = (src, dst, call)
    table["_maps"] = (mx, my)
    return images


def cv_table() -> dict:
    from vdsp_sim.samples import cv_inputs
    table, maps = bench_cv.cases(cv_inputs.scene(bench_cv.W, bench_cv.H, seed=11))
    table["_maps"] = maps
    return table


def _cv_task(call, soc, core, src, dst):
    on = _On(soc, core)
    call(on, src, dst)
    return on.last


# --- phase 1: the first task of each operator after ``vdsp up -d`` ---------------------------------

def stock_kernels() -> float:
    """Build the stock image's C kernels into this user's build cache, as ``vdsp up`` would
    (``dsp_side.ckernel.cache``); the seconds it took. The first ``vdsp up`` of a checkout compiles
    them (seconds); every later one reads them from the cache, which is what ``vdsp up -d``'s row
    times: its compile is this figure, reported beside the row."""
    from dsp_side import fw_image
    from vdsp_sim.soc.stock import STOCK_SRC
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="vbk") as tmp:
        fw_image.build(STOCK_SRC, Path(tmp) / "stock.img", name="stock", key=None)
    return time.perf_counter() - t0


def first_tasks(timeout_s: float) -> dict:
    """Start a SoC with ``vdsp up -d`` in a private runtime dir, run each operator's first task
    on vdsp0 then vdsp1 (wall ms, submit to result), once more warm; ``vdsp down``."""
    from arm_side import CORE_0, CORE_1, Soc
    from vdsp_board.config import settings
    from vdsp_board.memory import ddr
    from vdsp_board.processes.pidfile import PidFile
    from vdsp_sim.soc.supervisor import stop_pid
    rt = Path(tempfile.mkdtemp(prefix="vbp", dir="/tmp"))
    shm = tempfile.mkdtemp(prefix="vbp-shm-", dir="/dev/shm")
    # the in-process client and the 'vdsp up -d' children name this SoC (the one writer: settings.export)
    saved = settings.export({"VDSP_RUNTIME_DIR": str(rt), "VDSP_SHM_DIR": shm, "VDSP_RELAY_ENDPOINT": None,
                             "VDSP_CORE_ENDPOINTS": None, "VDSP_STRICT_CACHE": None})
    cli = [sys.executable, "-m", "vdsp_sim.cli"]
    out: dict = {"ops": {}}
    supervisor = None       # (pid, start time) of the SoC's supervisor once it runs
    try:
        # everything the tasks need is built before the SoC starts: only the SoC's time is measured
        cases = framework_cases() + nn_cases() + pointcloud_cases()
        table = cv_table()
        out["kernels_s"] = stock_kernels()
        t0 = time.perf_counter()
        up = subprocess.run([*cli, "up", "-d", "--timeout", str(timeout_s)], capture_output=True, text=True)
        out["up_s"] = time.perf_counter() - t0
        if up.returncode:
            raise RuntimeError(f"vdsp up -d failed: {up.stderr.strip() or up.stdout.strip()}")
        supervisor = _process(PidFile(rt / "soc.pid").read())
        progress(f"vdsp up -d returned after {out['up_s']:.1f} s; first task of each operator on each core")
        with Soc(mode="relay", strict=False, autostart_relay=False) as soc:
            from arm_side import opids
            for core in (CORE_0, CORE_1):       # one task per core, then the idle SoC's memory
                soc.rpc(opids.PING, core=core).wait(10000)
            out["pss"] = footprint.soc_pss(rt)
            out["idle_cpu"] = footprint.soc_idle_cpu(rt)     # information: no target
            remote = [(c["name"], Remote(soc, c)) for c in cases]
            images = cv_images(soc, table)
            calls: list = [(name, lambda core, r=r: r.call(core)) for name, r in remote]
            for name, (src, dst, call) in images.items():
                calls.append((f"cv.{name}", lambda core, s=src, d=dst, f=call: _cv_task(f, soc, core, s, d)))
            for name, call in calls:
                first, execs = [], []
                for core in (CORE_0, CORE_1):
                    t0 = time.perf_counter()
                    task = call(core)
                    first.append((time.perf_counter() - t0) * 1e3)
                    execs.append(task.exec_us / 1e3)
                t0 = time.perf_counter()
                task = call(CORE_0)
                warm = (time.perf_counter() - t0) * 1e3
                out["ops"][name] = {"vdsp0_ms": first[0], "vdsp1_ms": first[1], "warm_ms": warm,
                                    "first_ms": max(first), "vdsp0_exec_ms": execs[0], "vdsp1_exec_ms": execs[1],
                                    "warm_exec_ms": task.exec_us / 1e3}
            for _, r in remote:
                r.free()
            out["pss_after_first_tasks"] = footprint.soc_pss(rt)
            progress("killing each core's firmware: how soon it serves again")
            out["restart_s"] = {name: footprint.restart_s(soc, rt, name, core)
                                for name, core in (("vdsp0", CORE_0), ("vdsp1", CORE_1))}
    finally:
        with proc.sigterm_held():       # a SIGTERM now comes after the cleanup, not in its middle
            progress("stopping its SoC (vdsp down)")
            t0 = time.perf_counter()
            down = subprocess.run([*cli, "down"], capture_output=True, text=True)
            out["down_s"] = time.perf_counter() - t0
            if down.returncode:
                progress(f"vdsp down: {down.stderr.strip()}")
            if supervisor is not None and _process(supervisor[0]) == supervisor:
                said = (down.stdout + down.stderr).strip() or "nothing"
                progress(f"the SoC's supervisor (pid {supervisor[0]}) still ran after 'vdsp down' (exit "
                         f"{down.returncode}, it said: {said}): stopping it")
                stop_pid(supervisor[0])
            try:
                ddr.close_owner()
            except Exception:
                pass
            settings.export(saved)
            shutil.rmtree(rt, ignore_errors=True)
            shutil.rmtree(shm, ignore_errors=True)
    return out


def _process(pid: int | None) -> tuple[int, int] | None:
    """``(pid, its start time)`` while ``pid`` runs, else None: the same pair later is the same
    process (``procfacts.start_time``)."""
    if pid is None or procfacts.exited(pid):
        return None
    started = procfacts.start_time(pid)
    return None if started is None else (pid, started)


# --- phase 2: one SoC, the baseline and the floor, interleaved rounds -----------------------------

def measure_cv(soc, floor, table, images, n: int, rec: dict) -> None:
    from arm_side import CORE_0
    on = _On(soc, CORE_0)
    for name, (src, dst, call) in images.items():
        local = table[name][5]
        local()
        call(on, src, dst)                                # warm-up both
        r = rec.setdefault(name, {"inproc": [], "rpc": [], "exec": [], "floor": [], "floor_exec": []})
        for _ in range(n):
            r["inproc"].append(_us(local))
            # Which of the pair goes first alternates: the second of two round trips after the
            # in-process call was 100-650 µs slower than the first, whichever it was (SoC first
            # only, the difference favoured the SoC by that much).
            floor_first = len(r["rpc"]) % 2 == 1
            if floor_first:
                r["floor"].append(floor.call(name))
                r["floor_exec"].append(floor.last_exec_us)
            r["rpc"].append(_us(lambda: call(on, src, dst)))
            r["exec"].append(on.last.exec_us)
            if not floor_first:
                r["floor"].append(floor.call(name))
                r["floor_exec"].append(floor.last_exec_us)


def paired_latency(floor, soc, n: int, warmup: int) -> tuple[list[float], list[float]]:
    """``n`` no-op round trips each of ``floor(n, warmup)`` and ``soc(n, warmup)`` (each returns
    its latencies, µs), in blocks of LAT_BLOCK that alternate, which of the two goes first
    alternating too, each block after LAT_BLOCK_WARM round trips of its own. The host changes
    under a run (where the scheduler puts the two ends of a round trip, what ran just before):
    in two blocks of 300 one after the other, right after a throughput run, the SoC's p50 over
    the floor's read 1.52 (median of 4 rounds) when the floor went first and 1.14 when the SoC
    did; in alternating blocks of 20, 1.10-1.31 (8 rounds)."""
    floor(0, warmup)
    soc(0, warmup)
    floor_lat: list[float] = []
    soc_lat: list[float] = []
    block = 0
    while len(floor_lat) < n:
        k = min(LAT_BLOCK, n - len(floor_lat))
        for fn, out in ((floor, floor_lat), (soc, soc_lat))[::1 if block % 2 == 0 else -1]:
            out += fn(k, LAT_BLOCK_WARM)
        block += 1
    return floor_lat, soc_lat


def measure_nn(soc, local: Local, remote: list, n: int, rec: dict) -> None:
    from arm_side import CORE_0
    for name, run, r in ((c["name"], local.bind(c), r) for c, r in remote):
        run()
        r.call(CORE_0)
        d = rec.setdefault(name, {"inproc": [], "exec": []})
        for _ in range(n):
            d["inproc"].append(_us(run))
            d["exec"].append(r.call(CORE_0).exec_us)


def run(args) -> dict:
    from dsp_side.heap import keep_heap
    keep_heap()     # the in-process figures at their best, as the firmware's (dsp_side/heap.py)
    quick = args.quick
    cfg: dict[str, Any]
    cfg = dict(rounds=args.rounds or (1 if quick else 3), lat_n=300 if quick else 2000, warmup=50 if quick else 200,
               tput_s=0.6 if quick else 2.0, warm_s=0.2 if quick else 0.4, cv_n=2 if quick else 12,
               nn_n=3 if quick else 10, pc_rounds=5 if quick else 20)
    from vdsp_sim import native_build
    fig: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                             "loadavg_before": list(os.getloadavg()),
                             "compiled": native_build.status() or "used"},     # the SoC's processes run the same
                 "config": dict(cfg, keep_cpus_awake=bool(args.keep_cpus_awake))}
    progress(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; {cfg['rounds']} round(s)")
    fig["first"] = first_tasks(args.start_timeout)
    base, full, floor, awake = Baseline(ping_body_size()), FullStack("threads"), None, None
    dbase = DirectBaseline(ping_body_size())
    native: NativeFloor | None = None
    rec: dict[str, Any] = {"baseline_lat": [], "relay_lat": [], "baseline_tput": [], "relay_tput": [],
                           "dbase_lat": [], "direct_lat": [], "dbase_tput": [], "direct_tput": [],
                           "dbase_cpu": [], "direct_cpu": [],
           "baseline_cpu": [], "relay_cpu": [], "proto_cpu": [], "dproto_cpu": [], "cv": {}, "nn": {},
           "native_lat": [], "native_tput": [], "native_missing": ""}
    remote: list = []
    try:
        progress("starting the SoC, the raw pyzmq baseline and the floor")
        full.start(args.start_timeout)
        base.start()
        dbase.start()
        try:
            native = NativeFloor(ping_body_size()).__enter__()
        except RuntimeError as exc:     # information only: the run goes on without it
            rec["native_missing"] = str(exc).splitlines()[0]
            progress(f"the native floor is not measured: {rec['native_missing']}")
        floor = Floor("vdsp_sim.benchmarks.bench_cv:floor_kernels")
        floor.start()
        soc = full.soc("relay")
        table = cv_table()
        images = cv_images(soc, table)
        local = Local()
        remote = [(c, Remote(soc, c)) for c in nn_cases()]
        me = os.getpid()
        awake = cpus_kept_awake(args.keep_cpus_awake)
        awake.__enter__()
        for r in range(1, cfg["rounds"] + 1):
            tag = f"round {r}/{cfg['rounds']}"
            warm = cfg["warmup"] if r == 1 else cfg["warmup"] // 4
            progress(f"{tag}: no-op latency, baseline and relay ({cfg['lat_n']} each)")
            floor_lat, soc_lat = paired_latency(lambda n, w: base.latency(n, w),
                                                lambda n, w: full.latency("relay", n, w), cfg["lat_n"], warm)
            rec["baseline_lat"] += floor_lat
            rec["relay_lat"] += soc_lat
            progress(f"{tag}: throughput and CPU per task, baseline, its protocol floor and relay ({cfg['tput_s']} s each)")
            labels = {me: "client", **base.labels()}
            rate, cpu = measure_cpu(lambda: base.throughput(WINDOW, cfg["warm_s"], cfg["tput_s"]), labels,
                                    cfg["tput_s"])
            rec["baseline_tput"].append(rate)
            rec["baseline_cpu"].append(cpu)
            _, cpu = measure_cpu(lambda: base.protocol_throughput(WINDOW, cfg["warm_s"], cfg["tput_s"]), {me: "client"},
                                 cfg["tput_s"])
            rec["proto_cpu"].append(cpu)
            full.prepare("relay", WINDOW)
            labels = {me: "client", **full.process_labels()}
            rate, cpu = measure_cpu(lambda: full.throughput("relay", WINDOW, cfg["warm_s"], cfg["tput_s"]), labels,
                                    cfg["tput_s"])
            rec["relay_tput"].append(rate)
            rec["relay_cpu"].append(cpu)
            progress(f"{tag}: direct mode and the direct floor: no-op latency, throughput and CPU per task")
            floor_lat, soc_lat = paired_latency(lambda n, w: dbase.latency(n, w),
                                                lambda n, w: full.latency("direct", n, w), cfg["lat_n"], warm)
            rec["dbase_lat"] += floor_lat
            rec["direct_lat"] += soc_lat
            rate, cpu = measure_cpu(lambda: dbase.throughput(WINDOW, cfg["warm_s"], cfg["tput_s"]),
                                    {me: "client", **dbase.labels()}, cfg["tput_s"])
            rec["dbase_tput"].append(rate)
            rec["dbase_cpu"].append(cpu)
            _, cpu = measure_cpu(lambda: dbase.protocol_throughput(WINDOW, cfg["warm_s"], cfg["tput_s"]), {me: "client"},
                                 cfg["tput_s"])
            rec["dproto_cpu"].append(cpu)
            full.prepare("direct", WINDOW)
            rate, cpu = measure_cpu(lambda: full.throughput("direct", WINDOW, cfg["warm_s"], cfg["tput_s"]),
                                    {me: "client", **full.process_labels()}, cfg["tput_s"])
            rec["direct_tput"].append(rate)
            rec["direct_cpu"].append(cpu)
            if native is not None:
                try:
                    lat, tput = native.latency(cfg["lat_n"]), native.throughput(WINDOW, cfg["tput_s"])
                    rec["native_lat"].append(lat)
                    rec["native_tput"].append(tput)
                except RuntimeError as exc:     # information only: the run goes on without it
                    rec["native_missing"] = str(exc).splitlines()[0]
                    rec["native_lat"], rec["native_tput"] = [], []
                    progress(f"the native floor failed: {rec['native_missing']}")
                    native.stop()
                    native = None
            progress(f"{tag}: CV operators, in-process / SoC / floor ({cfg['cv_n']} each)")
            measure_cv(soc, floor, table, images, cfg["cv_n"], rec["cv"])
            progress(f"{tag}: NN operators, in-process / SoC ({cfg['nn_n']} each)")
            measure_nn(soc, local, remote, cfg["nn_n"], rec["nn"])
        awake.__exit__(None, None, None)
        awake = None
        for c, r in remote:
            r.free()
        remote = []
        fig["pointcloud"] = {}
        for name in ("centerpoint", "pointpillars"):
            progress(f"point cloud {name} ({cfg['pc_rounds']} rounds, then the CPU reference once)")
            fig["pointcloud"][name] = bench_pointcloud.bench_one(soc, name, cfg["pc_rounds"], 1)
    except Exception:
        tail = full.logs_tail()
        if tail:
            print(f"SoC logs (tail):\n{tail}", file=sys.stderr)
        raise
    finally:
        with proc.sigterm_held():       # a SIGTERM now comes after the cleanup, not in its middle
            progress("stopping the SoC, the baseline and the floor")
            if awake is not None:
                awake.__exit__(None, None, None)
            for c, r in remote:
                try:
                    r.free()
                except Exception:
                    pass
            try:
                full.stop()
            finally:
                base.stop()
                dbase.stop()
                if native is not None:
                    native.stop()
                if floor is not None:
                    floor.stop()
    fig["machine"]["loadavg_after"] = list(os.getloadavg())
    return summarize(fig, rec)


def _cpu_total(rounds: list[dict]) -> float:
    return MED([sum(v for k, v in r.items() if not k.startswith("_")) for r in rounds])


#: process kind -> (the SoC's processes in ``measure_cpu``'s labels, the baseline's counterpart)
COUNTERPARTS = {"client": (("client",), "client"), "relay": (("relay",), "relay"),
                "firmware": (("vdsp0.fw", "vdsp1.fw"), "worker")}


def cpu_per_process(baseline: list[dict], soc: list[dict]) -> dict:
    """Per process kind: median CPU µs per task, the SoC's against the baseline's counterpart
    (the two firmwares together against the one worker)."""
    out = {}
    for kind, (ours, theirs) in COUNTERPARTS.items():
        mine = MED([sum(r.get(k, 0.0) for k in ours) for r in soc])
        base = MED([r.get(theirs, 0.0) for r in baseline])
        out[kind] = {"soc_us": mine, "baseline_us": base, "ratio": mine / base if base > 0 else float("inf")}
    return out


def protocol_floor(sdk_us: float, protocol_us: float, raw_us: float) -> str:
    """The client rows' information: the protocol floor (``Baseline.protocol_throughput``: the raw
    client plus the protocol's per-task work in Python, nothing of the SDK) against the raw client
    and against the SDK's client."""
    if protocol_us <= 0 or raw_us <= 0:
        return "(info) protocol floor: not measured"
    return (f"(info) protocol floor {protocol_us:.0f} µs ({protocol_us / raw_us:.2f} x the raw client; "
            f"the SDK's {sdk_us / protocol_us:.2f} x it)")


def native_figures(rec: dict) -> dict:
    """The native direct floor's figures (medians of the rounds), or why there are none."""
    if not rec["native_tput"]:
        return {"missing": rec["native_missing"] or "not run"}
    tput = rec["native_tput"]
    client, worker = MED([t["client_cpu_us"] for t in tput]), MED([t["worker_cpu_us"] for t in tput])
    return {"p50_us": MED([r["p50_us"] for r in rec["native_lat"]]), "tasks_per_s": MED([t["tasks_per_s"] for t in tput]),
            "client_cpu_us": client, "worker_cpu_us": worker, "cpu_us": MED([t["client_cpu_us"] + t["worker_cpu_us"]
                                                                              for t in tput])}


def native_line(direct: dict) -> str:
    """The report's line on the native direct floor, beside the Python direct floor's figures."""
    n = direct.get("native") or {"missing": "not run"}
    head = ("Native direct floor (information, no target: the direct floor's topology and messages in C, no Python in "
            "either process; native_floor.c): ")
    if "missing" in n:
        return head + f"not measured ({n['missing']})"
    return (head + f"p50 {n['p50_us']:.0f} µs, {n['tasks_per_s']:.0f} tasks/s, CPU {n['cpu_us']:.1f} µs a task "
            f"(client {n['client_cpu_us']:.1f}, worker {n['worker_cpu_us']:.1f}); the Python direct floor: p50 "
            f"{direct['floor_p50_us']:.0f} µs, {direct['floor_tasks_per_s']:.0f} tasks/s, CPU {direct['floor_cpu_us']:.1f} "
            f"µs a task; the SoC in direct mode: p50 {direct['direct_p50_us']:.0f} µs, "
            f"{direct['direct_tasks_per_s']:.0f} tasks/s, CPU {direct['direct_cpu_us']:.1f} µs a task")


def summarize(fig: dict, rec: dict) -> dict:
    cv = {}
    for name, r in rec["cv"].items():
        a, b, e, f = MED(r["inproc"]), MED(r["rpc"]), MED(r["exec"]), MED(r["floor"])
        diff = MED([x - y for x, y in zip(r["rpc"], r["floor"])])     # paired: each sample's load on both
        cv[name] = {"inproc_us": a, "rpc_us": b, "exec_us": e, "floor_us": f, "floor_exec_us": MED(r["floor_exec"]),
                    "over_floor_us": diff, "exec_over_us": e - a}
    nn = {}
    for name, r in rec["nn"].items():
        a, e = MED(r["inproc"]), MED(r["exec"])
        nn[name] = {"inproc_us": a, "exec_us": e, "exec_over_us": e - a}
    fig["cv"], fig["nn"] = cv, nn
    bl, rl = rec["baseline_lat"], rec["relay_lat"]
    fig["relay"] = {"baseline_p50_us": pct(bl, 50), "baseline_p99_us": pct(bl, 99), "relay_p50_us": pct(rl, 50),
                    "relay_p99_us": pct(rl, 99), "baseline_tasks_per_s": MED(rec["baseline_tput"]),
                    "relay_tasks_per_s": MED(rec["relay_tput"]), "baseline_cpu_us": _cpu_total(rec["baseline_cpu"]),
                    "relay_cpu_us": _cpu_total(rec["relay_cpu"]), "cpu_rounds": {"baseline": rec["baseline_cpu"],
                                                                               "relay": rec["relay_cpu"]}}
    rows = {}

    def row(key, value, shown, detail="", complete=True):
        _, op, target = TARGETS[key]
        ok = complete and (value <= target if op == "<=" else value >= target)
        rows[key] = {"value": value, "shown": shown, "target": f"{op} {target:g}", "met": bool(ok), "detail": detail}

    worst = max(cv, key=lambda k: cv[k]["over_floor_us"])
    row("cv_diff", cv[worst]["over_floor_us"], f"worst {cv[worst]['over_floor_us']:+.0f} ({worst})",
        f"{sum(v['over_floor_us'] <= 100 for v in cv.values())} of {len(cv)} operators meet it; "
        f"median {MED(v['over_floor_us'] for v in cv.values()):+.0f}")
    over = {**{f"cv.{k}": v["exec_over_us"] for k, v in cv.items()}, **{k: v["exec_over_us"] for k, v in nn.items()}}
    worst = max(over, key=lambda k: over[k])
    # the floor's worker runs the same cv2 call in a bare process after the same idle wait: where it
    # is over 50 µs too, the excess is the machine's (wake-up, caches), not the firmware's
    floor_over = {k: v["floor_exec_us"] - v["inproc_us"] for k, v in cv.items()}
    floor_worst = max(floor_over, key=lambda k: floor_over[k])
    row("exec_over", over[worst], f"worst {over[worst]:+.0f} ({worst})",
        f"{sum(v <= 50 for v in over.values())} of {len(over)} operators meet it; median {MED(over.values()):+.0f}; "
        f"(info) the floor's own worker, same cv2 calls: {sum(v <= 50 for v in floor_over.values())} of "
        f"{len(floor_over)} CV operators within 50 µs, worst {floor_over[floor_worst]:+.0f} ({floor_worst})")
    r = fig["relay"]
    row("relay_p50", r["relay_p50_us"] / r["baseline_p50_us"], f"{r['relay_p50_us'] / r['baseline_p50_us']:.2f}",
        f"{r['relay_p50_us']:.0f} vs {r['baseline_p50_us']:.0f} µs")
    row("relay_p99", r["relay_p99_us"] / r["baseline_p99_us"], f"{r['relay_p99_us'] / r['baseline_p99_us']:.2f}",
        f"{r['relay_p99_us']:.0f} vs {r['baseline_p99_us']:.0f} µs")
    t = r["relay_tasks_per_s"] / r["baseline_tasks_per_s"]
    row("tput", t, f"{t:.2f}", f"{r['relay_tasks_per_s']:.0f} vs {r['baseline_tasks_per_s']:.0f} tasks/s")
    c = r["relay_cpu_us"] / r["baseline_cpu_us"]
    row("cpu", c, f"{c:.2f}", f"{r['relay_cpu_us']:.0f} vs {r['baseline_cpu_us']:.0f} µs")
    per = r["cpu_per_process"] = cpu_per_process(rec["baseline_cpu"], rec["relay_cpu"])
    r["protocol_client_cpu_us"] = MED([c.get("client", 0.0) for c in rec["proto_cpu"]])
    row("cpu_client", per["client"]["ratio"], f"{per['client']['ratio']:.2f}",
        f"{per['client']['soc_us']:.0f} vs {per['client']['baseline_us']:.0f} µs; "
        + protocol_floor(per["client"]["soc_us"], r["protocol_client_cpu_us"], per["client"]["baseline_us"]))
    worst = max(per, key=lambda k: per[k]["ratio"])
    row("cpu_proc", per[worst]["ratio"], f"worst {per[worst]['ratio']:.2f} ({worst})",
        "; ".join(f"{k} {v['soc_us']:.0f} vs {v['baseline_us']:.0f} µs" for k, v in per.items()))
    d = fig["direct"] = {"floor_p50_us": pct(rec["dbase_lat"], 50), "direct_p50_us": pct(rec["direct_lat"], 50),
                         "floor_tasks_per_s": MED(rec["dbase_tput"]), "direct_tasks_per_s": MED(rec["direct_tput"]),
                         "floor_cpu_us": _cpu_total(rec["dbase_cpu"]), "direct_cpu_us": _cpu_total(rec["direct_cpu"]),
                         "floor_client_cpu_us": MED([c.get("client", 0.0) for c in rec["dbase_cpu"]]),
                         "direct_client_cpu_us": MED([c.get("client", 0.0) for c in rec["direct_cpu"]]),
                         "protocol_client_cpu_us": MED([c.get("client", 0.0) for c in rec["dproto_cpu"]]),
                         "cpu_rounds": {"floor": rec["dbase_cpu"], "direct": rec["direct_cpu"]}}
    for key, ours, theirs, fmt in (("direct_p50", "direct_p50_us", "floor_p50_us", "{:.0f} vs {:.0f} µs"),
                                   ("direct_tput", "direct_tasks_per_s", "floor_tasks_per_s", "{:.0f} vs {:.0f} tasks/s"),
                                   ("direct_cpu", "direct_cpu_us", "floor_cpu_us", "{:.0f} vs {:.0f} µs"),
                                   ("direct_cpu_client", "direct_client_cpu_us", "floor_client_cpu_us",
                                    "{:.0f} vs {:.0f} µs")):
        ratio = d[ours] / d[theirs] if d[theirs] > 0 else float("inf")
        more = "; " + protocol_floor(d[ours], d["protocol_client_cpu_us"], d[theirs]) if key == "direct_cpu_client" else ""
        row(key, ratio, f"{ratio:.2f}", fmt.format(d[ours], d[theirs]) + more)
    d["native"] = native_figures(rec)
    ops = fig["first"]["ops"]
    worst = max(ops, key=lambda k: ops[k]["first_ms"])
    row("first_task", ops[worst]["first_ms"], f"worst {ops[worst]['first_ms']:.1f} ({worst})",
        f"{sum(v['first_ms'] <= 50 for v in ops.values())} of {len(ops)} operators meet it; "
        f"'vdsp up -d' took {fig['first']['up_s']:.1f} s")
    first = fig["first"]
    built = first.get("kernels_s", 0.0)
    row("up", first["up_s"], f"{first['up_s']:.2f}", "until the command returned, both cores running; the stock "
        "kernels built before it" + (f" (not in the build cache: {built:.1f} s)" if built >= 0.5 else ""))
    pss = first["pss"]
    row("pss", pss["total_mb"], f"{pss['total_mb']:.0f}",
        ", ".join(f"{k} {v:.0f}" for k, v in sorted(pss["processes_mb"].items(), key=lambda kv: -kv[1])[:6]))
    worst = max(first["restart_s"], key=lambda k: first["restart_s"][k])
    row("restart", first["restart_s"][worst], f"{first['restart_s'][worst]:.2f} ({worst})",
        ", ".join(f"{k} {v:.2f} s" for k, v in first["restart_s"].items()) + "; SIGKILL to the first ping answered")
    for name in ("centerpoint", "pointpillars"):
        p = fig["pointcloud"][name]
        total = p["dsp_ms"]["total"] if p["bit_exact"] else float("inf")    # not bit-exact: missed
        row(name, total, f"{p['dsp_ms']['total']:.2f}" + ("" if p["bit_exact"] else " NOT bit-exact"),
            "stage 1 {stage1:.2f} + voxel {voxel:.2f} + stage 2 {stage2:.2f} ms".format(**p["dsp_ms"]))
    fig["rows"] = rows
    return fig


def render(fig: dict) -> str:
    """The whole report as text: the summary table (one row per target), then the per-operator details."""
    m = fig["machine"]
    lines = [f"vdsp bench perf: {m['cpus']} CPUs, Python {m['python']}, load {m['loadavg_before'][0]:.2f} before, "
             f"{m['loadavg_after'][0]:.2f} after; {fig['config']['rounds']} interleaved round(s); compiled build: "
             f"{m.get('compiled', '?')}"
             + ("; CPUs KEPT AWAKE (diagnosis)" if fig["config"].get("keep_cpus_awake") else ""), "",
             "| measure | now | target | verdict | detail |", "|---|---|---|---|---|"]
    for key, r in fig["rows"].items():
        lines.append(f"| {TARGETS[key][0]} | {r['shown']} | {r['target']} | {'met' if r['met'] else 'MISSED'} "
                     f"| {r['detail']} |")
    per = fig["relay"]["cpu_per_process"]
    lines += ["", "CPU per task, per process (µs, median of the rounds; the SoC's two firmwares against the "
              "baseline's one worker):", "", "| process | SoC | baseline | ratio |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {v['soc_us']:.0f} | {v['baseline_us']:.0f} | {v['ratio']:.2f} |" for k, v in per.items()]
    lines += ["", native_line(fig["direct"])]
    lines += ["", "CV operators (medians, µs; floor = raw pyzmq worker running the same cv2 call; its worker exec is "
              "that call timed in the worker, after the same idle wait as the DSP's):", "",
              "| operator | in-process | SoC rpc | DSP exec | floor rpc | floor worker exec | SoC rpc - floor rpc "
              "| exec - in-process "
              "| (info) floor exec - in-process |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, v in fig["cv"].items():
        lines.append(f"| {name} | {v['inproc_us']:.0f} | {v['rpc_us']:.0f} | {v['exec_us']:.0f} | {v['floor_us']:.0f} "
                     f"| {v['floor_exec_us']:.0f} | {v['over_floor_us']:+.0f} "
                     f"| {v['exec_over_us']:+.0f} "
                     f"| {v['floor_exec_us'] - v['inproc_us']:+.0f} |")
    lines += ["", "NN operators (medians, µs; in-process = the operator function on local buffers):", "",
              "| operator | in-process | DSP exec | exec - in-process |", "|---|---:|---:|---:|"]
    for name, v in fig["nn"].items():
        lines.append(f"| {name} | {v['inproc_us']:.0f} | {v['exec_us']:.0f} | {v['exec_over_us']:+.0f} |")
    lines += render_first(fig["first"])
    return "\n".join(lines)


def render_first(first: dict, top: int = 10) -> list[str]:
    """The first-task detail lines (the ``top`` slowest operators)."""
    ops = first["ops"]
    slow = sorted(ops, key=lambda k: -ops[k]["first_ms"])
    lines = ["", f"First task after 'vdsp up -d' (ms, submit to result; the {top} slowest; "
             f"'vdsp up -d' took {first['up_s']:.1f} s):", "",
             "| operator | vdsp0 | vdsp1 | warm | DSP exec vdsp0 / vdsp1 / warm |", "|---|---:|---:|---:|---:|"]
    for name in slow[:top]:
        v = ops[name]
        lines.append(f"| {name} | {v['vdsp0_ms']:.1f} | {v['vdsp1_ms']:.1f} | {v['warm_ms']:.1f} "
                     f"| {v['vdsp0_exec_ms']:.1f} / {v['vdsp1_exec_ms']:.1f} / {v['warm_exec_ms']:.1f} |")
    for key, when in (("pss", "after one task per core"), ("pss_after_first_tasks", "after the first tasks")):
        if key in first:
            lines += ["", f"PSS of that SoC {when}: {first[key]['total_mb']:.0f} MB", "", "| process | PSS (MB) |",
                      "|---|---:|"]
            lines += [f"| {k} | {v:.1f} |" for k, v in first[key]["processes_mb"].items()]
    if "idle_cpu" in first:
        idle = first["idle_cpu"]
        busy = sorted(idle["processes_ms_per_s"].items(), key=lambda kv: -kv[1])
        lines += ["", f"CPU of that SoC left idle for 2 s: {idle['total_ms_per_s']:.1f} ms per second, all processes ("
                  + ", ".join(f"{k} {v:.1f}" for k, v in busy[:4]) + ")"]
    if "down_s" in first:
        lines += ["", f"'vdsp down' of that SoC took {first['down_s']:.2f} s"]
    if "restart_s" in first:
        lines += ["", "A SIGKILLed firmware serving again (s): "
                  + ", ".join(f"{k} {v:.3f}" for k, v in first["restart_s"].items())]
    return lines


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vdsp bench perf", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short run: 1 round, small counts")
    ap.add_argument("--json", metavar="FILE", help="also write every figure to FILE as JSON (schema vdsp-bench/1)")
    ap.add_argument("--fail-on-miss", action="store_true",
                    help="the CI mode: exit 3 when a row misses its target (else 0 once the run completes)")
    ap.add_argument("--rounds", type=int, help="interleaved measurement rounds (default 3, quick 1)")
    ap.add_argument("--keep-cpus-awake", action="store_true",
                    help="diagnosis: one SCHED_IDLE spinner per CPU during the interleaved rounds, so that no "
                         "vCPU halts between tasks (see vdsp_sim/benchmarks/awake.py); not the targets' setting")
    ap.add_argument("--first-only", action="store_true", help="only the first-task row (its own SoC), with details")
    ap.add_argument("--start-timeout", type=float, default=120.0, help="seconds to wait for a SoC to run")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = clihelp.finish(parser()).parse_args(argv)
    if args.first_only:
        first = first_tasks(args.start_timeout)
        print("\n".join(render_first(first, top=len(first["ops"]))))
        return 0
    try:
        fig = run(args)
    except KeyboardInterrupt:
        print("bench_perf: interrupted", file=sys.stderr)
        return 1
    except Exception as exc:
        import traceback
        traceback.print_exc()
        print(f"bench_perf: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(render(fig), flush=True)
    rep = Report("perf", args)     # the JSON schema every benchmark writes (its text is render's tables)
    for key, r in fig["rows"].items():
        rep.verdicts.append({"name": TARGETS[key][0], "value": r["value"], "target": r["target"], "passed": r["met"],
                             "detail": r["detail"]})
    if args.json:
        Path(args.json).write_text(json.dumps(rep.as_json(fig), indent=1) + "\n")
        progress(f"figures written to {args.json}")
    return 3 if rep.passed is False and args.fail_on_miss else 0


if __name__ == "__main__":
    proc.exit_on_sigterm()      # a SIGTERM (timeout, kill) still stops the SoCs it started
    sys.exit(main())

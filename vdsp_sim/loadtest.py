"""``vdsp loadtest``: many client processes, mixed priorities and cores, verified outputs.

Every task is checked: COUNT tasks increment their own counter slot in shared
memory (0 afterwards = never ran, 2 = ran twice), MEMCPY tasks copy a random
block that is compared byte for byte, CHECKSUM tasks read a block whose CRC is
known. The report counts each task exactly once: completed, failed (by code),
lost (no answer before its timeout), duplicated, wrong output.

A task may fail with one of the codes a fault gives (FAULT_CODES: relay unavailable, core
crashed, dead or offline — a process of the SoC was killed or restarted); that is a failure
with a code, not a loss. Any other failure code is an error of the run, like a lost,
duplicated or wrong task: the exit status is 1.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import random
import sys
import time
import zlib
from typing import Any

import numpy as np

from protocol import errors
from protocol.constants import MAX_TASKS_PER_CLIENT, Core
from protocol.task_options import TaskOptions
from vdsp_board.config import clihelp

CLASSES = {"high": 200, "normal": 100, "low": 10}
FAULT_CODES = frozenset(e.code for e in (errors.RelayUnavailable, errors.CoreCrashed, errors.CoreDead,
                                         errors.CoreOffline))
CORES = {"any": int(Core.ANY), "core0": int(Core.CORE_0), "core1": int(Core.CORE_1)}
WINDOW = MAX_TASKS_PER_CLIENT  # the per-client in-flight limit


def parse_weights(text: str, names: dict) -> dict[str, float]:
    """``high=1,low=3`` -> weights. Raises ValueError naming the bad item."""
    out = {}
    for item in filter(None, text.split(",")):
        name, _, w = item.partition("=")
        if name not in names:
            raise ValueError(f"unknown name {name!r} in {text!r}; choose from {', '.join(names)}")
        out[name] = float(w or 1)
    return out


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), list(weights.values()))[0]


def client(index: int, rt: str, tasks: int, classes: dict, cores: dict, work_ms: float, timeout_s: float,
           seed: int, out) -> None:
    """One client process: submit ``tasks`` tasks keeping up to WINDOW in flight; verify; report."""
    # a spawned child has its parent's environment, which named ``rt``: nothing to set here
    from arm_side import CLEAN, INVALIDATE, Soc, errors, opids
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    with Soc() as soc:
        counters = soc.mem.alloc(4 * tasks)
        block = soc.mem.alloc_cached(4096)
        data = np.frombuffer(rng.randbytes(4096), np.uint8)
        block.array()[:] = data
        block.flush(CLEAN)
        crc = zlib.crc32(data.tobytes())
        copies = [soc.mem.alloc_cached(4096) for _ in range(WINDOW)]
        free_copies = list(range(WINDOW))
        inflight: collections.deque = collections.deque()

        def finish(entry) -> None:
            task, rec, copy = entry
            try:
                values = task.wait(timeout_s * 1000)
                rec["status"] = "ok"
                rec["queue_us"] = task.queue_us
                if rec["op"] == "checksum" and values.get("crc32") != crc:
                    rec["wrong"] = True
                if rec["op"] == "memcpy":
                    copies[copy].flush(INVALIDATE)
                    rec["wrong"] = not np.array_equal(copies[copy].array(), data)
            except errors.TaskTimeout:
                rec["status"] = "lost"
            except errors.VdspError as exc:
                rec["status"] = exc.code
            rec["latency_us"] = task.latency_us or (time.perf_counter() - rec["t0"]) * 1e6
            if copy is not None:
                free_copies.append(copy)

        t_start = time.perf_counter()
        for i in range(tasks):
            if len(inflight) >= WINDOW:
                finish(inflight.popleft())
            cls, core = _pick(rng, classes), _pick(rng, cores)
            op = ("count", "count", "memcpy", "checksum")[i % 4]
            rec: dict[str, Any] = {"i": i, "class": cls, "core": core, "op": op, "wrong": False, "t0": time.perf_counter()}
            copy = None
            kw: dict[str, Any] = dict(options=TaskOptions(core=CORES[core], priority=CLASSES[cls], custom_id=i))
            try:
                if op == "count":
                    task = soc.rpc(opids.COUNT, outputs=[counters], params={"slot": i, "ms": work_ms}, **kw)
                elif op == "memcpy":
                    copy = free_copies.pop()
                    copies[copy].array()[:] = 0
                    copies[copy].flush(CLEAN)
                    task = soc.rpc(opids.MEMCPY, inputs=[block], outputs=[copies[copy]], **kw)
                else:
                    task = soc.rpc(opids.CHECKSUM, inputs=[block], **kw)
            except errors.VdspError as exc:
                rec.update(status=exc.code, latency_us=0.0)
                records.append(rec)
                if copy is not None:
                    free_copies.append(copy)
                continue
            records.append(rec)
            inflight.append((task, rec, copy))
        while inflight:
            finish(inflight.popleft())
        elapsed = time.perf_counter() - t_start
        slots = counters.array(np.uint32).copy()
    for rec in records:
        if rec["op"] == "count":
            ran = int(slots[rec["i"]])
            rec["dup"] = ran > 1
            rec["wrong"] = rec["wrong"] or (rec["status"] == "ok" and ran != 1)
        rec.pop("t0", None)
    out.put({"client": index, "elapsed": elapsed, "records": records})


def run(clients: int, tasks: int, *, classes: dict | None = None, cores: dict | None = None, work_ms: float = 0.0,
        timeout_s: float = 60.0, seed: int = 1, during=None, progress=None) -> dict:
    """Run the load against the SoC of $VDSP_RUNTIME_DIR; ``during(report_so_far)`` is called
    once all clients run (fault injection). Returns the report (see ``summarize``).

    The clients that have not reported are killed past the run's deadline: 3 x ``timeout_s``
    plus the tasks' work, less the time the clients waited for a CPU (``readiness.StartClock``:
    a starved client is slow, not hung — on an emulated CPU beside 24 hogs, two clients took
    over a minute just to start), and at most 3 times that in all."""
    from vdsp_board.processes import rundir
    from vdsp_sim.soc.readiness import StartClock
    rt = str(rundir.runtime_dir())
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=client, args=(i, rt, tasks, classes or {"normal": 1}, cores or {"any": 1},
                                             work_ms, timeout_s, seed * 1000 + i, out)) for i in range(clients)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    if during is not None:
        during()
    results: list = []
    clock = StartClock(timeout_s * 3 + tasks * (work_ms / 1000 + 0.01) * clients, time.monotonic())
    while len(results) < clients and not clock.expired(time.monotonic()):
        clock.sample(p.pid for p in procs if p.pid is not None and p.exitcode is None)
        try:
            results.append(out.get(timeout=1.0))
            if progress:
                progress(f"{len(results)}/{clients} clients done")
        except Exception:
            if all(p.exitcode not in (None, 0) for p in procs if p.exitcode is not None) and \
                    sum(p.exitcode is not None and p.exitcode != 0 for p in procs) + len(results) >= clients:
                break
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
    report = summarize(results, clients, tasks, time.perf_counter() - t0)
    report["crashed_clients"] = [p.exitcode for p in procs if p.exitcode not in (0, None)]
    return report


def summarize(results: list[dict], clients: int, tasks: int, wall_s: float) -> dict:
    records = [r for res in results for r in res["records"]]
    by_status = collections.Counter(str(r["status"]) for r in records)
    lat = collections.defaultdict(list)
    queue = collections.defaultdict(list)
    for r in records:
        if r["status"] == "ok":
            lat[r["class"]].append(r["latency_us"])
            queue[r["class"]].append(r.get("queue_us", 0))
    classes = {}
    for cls in sorted(lat, key=lambda c: -CLASSES[c]):
        values = sorted(lat[cls])
        classes[cls] = {"n": len(values), "p50_us": values[len(values) // 2],
                        "p99_us": values[min(len(values) - 1, int(len(values) * 0.99))],
                        "mean_queue_us": sum(queue[cls]) / len(queue[cls])}
    completed = by_status.pop("ok", 0)
    lost = by_status.pop("lost", 0)
    failed = dict(by_status)
    return {"clients": clients, "tasks_per_client": tasks, "submitted": clients * tasks,
            "answered": len(records), "completed": completed, "lost": lost + clients * tasks - len(records),
            "failed": failed, "unexpected": {c: n for c, n in failed.items() if int(c) not in FAULT_CODES},
            "duplicated": sum(r.get("dup", False) for r in records),
            "wrong": sum(r["wrong"] for r in records), "classes": classes,
            "tasks_per_s": completed / wall_s if wall_s else 0.0, "wall_s": wall_s}


def format_report(rep: dict) -> str:
    from protocol.errors import describe
    lines = [f"clients {rep['clients']} x tasks {rep['tasks_per_client']} in {rep['wall_s']:.1f} s",
             f"  submitted   {rep['submitted']}", f"  completed   {rep['completed']}"]
    for code, n in sorted(rep["failed"].items()):
        kind = "failed    " if int(code) in FAULT_CODES else "UNEXPECTED"
        lines.append(f"  {kind}  {n}  ({code} {describe(int(code))})")
    lines += [f"  lost        {rep['lost']}   (must be 0)", f"  duplicated  {rep['duplicated']}   (must be 0)",
              f"  wrong       {rep['wrong']}   (must be 0)", f"  tasks/s     {rep['tasks_per_s']:.0f}",
              "  class     priority      n    p50 ms    p99 ms   mean queue wait ms"]
    for cls, c in rep["classes"].items():
        lines.append(f"  {cls:8} {CLASSES[cls]:9} {c['n']:6} {c['p50_us'] / 1e3:9.2f} {c['p99_us'] / 1e3:9.2f} "
                     f"{c['mean_queue_us'] / 1e3:12.2f}")
    return "\n".join(lines)


DESCRIPTION = __doc__.split("\n\n")[0]


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of 'vdsp loadtest' (vdsp_sim/commands/loadtest.py)."""
    ap.add_argument("--clients", type=int, default=4, help="client processes")
    ap.add_argument("--tasks", type=int, default=500, help="tasks per client")
    ap.add_argument("--mix", default="high=1,normal=2,low=1", help="priority classes and weights (high, normal, low)")
    ap.add_argument("--cores", default="any=2,core0=1,core1=1", help="core choices and weights (any, core0, core1)")
    ap.add_argument("--work-ms", type=float, default=0.0, help="DSP work per counting task (saturates the cores)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds a task may take before it counts as lost")
    ap.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    ap.set_defaults(usage_error=ap.error)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vdsp loadtest", description=DESCRIPTION)
    add_arguments(ap)
    return run_args(clihelp.finish(ap).parse_args(argv))


def run_args(args: argparse.Namespace) -> int:
    try:
        classes, cores = parse_weights(args.mix, CLASSES), parse_weights(args.cores, CORES)
    except ValueError as exc:
        args.usage_error(str(exc))
    from vdsp_sim.samples.common import local_soc
    with local_soc():
        rep = run(args.clients, args.tasks, classes=classes, cores=cores, work_ms=args.work_ms,
                  timeout_s=args.timeout, progress=lambda m: print(f"[loadtest] {m}", file=sys.stderr, flush=True))
    print(format_report(rep))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rep, fh, indent=1)
    ok = rep["lost"] == 0 and rep["duplicated"] == 0 and rep["wrong"] == 0 and not rep["unexpected"]
    return 0 if ok else 1

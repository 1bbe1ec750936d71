"""Merge a trace session's per-process files into one Chrome / Perfetto trace (Trace Event
Format JSON: ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``).

Tracks: the relay (a ``scheduler`` thread with its enqueue / dispatch / reply stamps, an
async ``queued`` slice per task, ``queue depth`` and ``in flight`` counters, core state
changes), one process per core (a ``remoteproc`` thread with the lifecycle instants: boot,
stop, crash, recovery, watchdog; one thread per firmware process with a slice per task), and
one process per client (submit and completion stamps, an async slice per task, waits).

A task is followed across processes by its keys: the SDK and the relay know the client's
``(DDR owner, msg_id)``; the relay maps it to its own id, which is the msg_id its firmware
sees on the relay's connection; a direct client's task reaches the firmware on a connection
bound to the client's owner. Every slice of a task carries ``args.task`` (one id for the
whole trace) and ``args.stage``, and flow events (``s``/``t``/``f``, one id per task) draw the
arrows from the SDK's submit to the relay, the firmware, the relay's reply and the SDK's
completion. Timestamps are microseconds from the session's first event (``otherData.base_unix_ns``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vdsp_board.observability import trace

RELAY_BIND = -1          # a firmware connection bound to the relay (vdsp_board.identity.ownership.RELAY)
STAGES = ("submit", "enqueue", "dispatch", "start", "end", "reply", "complete")
SDK_TID = 1              # a client's submit/complete stamps (its waits are on their own threads)
_CORE_PID_BASE = 1 << 22     # pids of cores with no core file (outside Linux's pid range)


class TracedTask:
    __slots__ = ("gid", "key", "stages", "op", "name", "core", "client_pid", "prio", "custom_id", "code", "fw_pid",
                 "bytes", "board_us")

    def __init__(self, gid: int, key) -> None:
        self.gid, self.key = gid, key
        self.stages: dict[str, tuple] = {}      # stage -> (ts_ns, chrome pid, tid)
        self.op = 0
        self.name = ""
        self.core = ""
        self.client_pid = None
        self.prio = self.custom_id = self.bytes = None
        self.code = None
        self.fw_pid = None
        self.board_us = None     # the firmware's board-time estimate of the task (µs)

    def label(self) -> str:
        return self.name or f"op 0x{self.op:04x}"


def load(session_dir: Path) -> list[tuple[dict, list, bool]]:
    return [trace.read(p) for p in sorted(Path(session_dir).glob("*" + trace.SUFFIX))]


def _key(owner, pid, msg_id):
    return ("o", owner, msg_id) if owner is not None else ("p", pid, msg_id)


def link(files: list[tuple[dict, list, bool]]) -> tuple[list[TracedTask], list[tuple]]:
    """Tasks with their stages, and the other events ``(ts, role, header, kind, fields)``."""
    stream = []
    for head, events, _ in files:
        for ts, kind, fields in events:
            start = fields.get("t0", ts) if kind in ("task", "wait") else ts
            stream.append((start, ts, head, kind, fields))
    stream.sort(key=lambda e: e[0])
    op_names = {(head.get("name"), f.get("op")): f.get("name", "") for head, events, _ in files
                if head.get("role") == "firmware" for _, kind, f in events if kind == "opname"}
    tasks: list[TracedTask] = []
    by_key: dict = {}
    by_rid: dict = {}
    others = []

    def new(key) -> TracedTask:
        task = TracedTask(len(tasks) + 1, key)
        tasks.append(task)
        if key is not None:
            by_key[key] = task
        return task

    for start, ts, head, kind, f in stream:
        role, pid = head.get("role"), head.get("pid")
        if role == "client" and kind in ("submit", "complete", "wait"):
            key = _key(head.get("owner"), pid, f.get("id"))
            task = by_key.get(key)
            if kind == "submit":
                if task is None or "submit" in task.stages or task.stages and ts - min(
                        s[0] for s in task.stages.values()) > 1_000_000_000:
                    task = new(key)
                task.stages["submit"] = (ts, pid, SDK_TID)
                task.client_pid, task.op = pid, f.get("op", task.op)
                task.prio, task.custom_id = f.get("prio"), f.get("cust")
                task.bytes = f.get("bytes", task.bytes)
            elif task is not None and kind == "complete":
                task.stages["complete"] = (ts, pid, SDK_TID)
                task.code = f.get("code", task.code)
                task.core = task.core or f.get("core", "")
            elif task is not None:
                task.stages.setdefault("wait", (start, pid, f.get("tid", pid), ts))
        elif role == "relay" and kind == "enq":
            key = _key(f.get("owner"), f.get("cpid"), f.get("cid"))
            task = by_key.get(key)
            if task is None or "enqueue" in task.stages:
                task = new(key)
            task.stages["enqueue"] = (ts, pid, 1)
            by_rid[f["rid"]] = task
            task.client_pid = task.client_pid or f.get("cpid")
            task.op, task.prio, task.custom_id, task.bytes = f.get("op", 0), f.get("prio"), f.get("cust"), f.get("bytes")
            others.append((ts, role, head, kind, f))       # counters
        elif role == "relay" and kind in ("disp", "reply", "fail", "cancel"):
            task = by_rid.get(f.get("rid"))
            if task is not None:
                stage = {"disp": "dispatch", "reply": "reply", "fail": "fail", "cancel": "cancel"}[kind]
                task.stages[stage] = (ts, pid, 1)
                if kind != "cancel" and f.get("core"):
                    task.core = f["core"]
                if kind in ("reply", "fail"):
                    task.code = f.get("code", 0)
            others.append((ts, role, head, kind, f))
        elif role == "firmware" and kind == "opname":
            continue
        elif role == "firmware" and kind == "task":
            bind = f.get("bind")
            task = by_rid.get(f.get("id")) if bind == RELAY_BIND else by_key.get(_key(bind, None, f.get("id"))) \
                if bind is not None else None
            if task is None or "start" in task.stages:
                task = new(None)
                task.op = f.get("op", 0)
            task.stages["start"] = (start, head.get("name"), pid)
            task.stages["end"] = (ts, head.get("name"), pid)
            task.name = f.get("name") or op_names.get((head.get("name"), f.get("op"))) or task.name
            task.core, task.fw_pid = head.get("name", task.core), pid
            task.board_us = f.get("board_us")
            if f.get("code"):
                task.code = f["code"]
        else:
            others.append((ts, role, head, kind, f))
    return tasks, others


def to_chrome(files: list[tuple[dict, list, bool]], session: dict | None = None) -> dict:
    """The Trace Event Format document of a session's files."""
    tasks, others = link(files)
    all_ts = [ts for _, events, _ in files for ts, _, _ in events] + \
             [t.stages["start"][0] for t in tasks if "start" in t.stages] + \
             [t.stages["wait"][0] for t in tasks if "wait" in t.stages]
    base = min(all_ts) if all_ts else (session or {}).get("started_ns", 0)

    def us(ns: int) -> float:
        return round((ns - base) / 1000.0, 3)

    out: list[dict] = []
    core_pid: dict[str, int] = {}
    named_threads = set()
    heads = [h for h, _, _ in files]
    relay_cores: list[str] = []
    for h in heads:
        if h.get("role") == "core":
            core_pid[h["name"]] = h["pid"]
        if h.get("role") == "relay":
            relay_cores = list(h.get("cores", []))
    for h in heads:
        if h.get("role") == "firmware" and h["name"] not in core_pid:
            core_pid[h["name"]] = _CORE_PID_BASE + len(core_pid)
    for name in relay_cores:
        core_pid.setdefault(name, _CORE_PID_BASE + len(core_pid))

    def meta(pid: Any, tid: int | None, what: str, value, sort: int | None = None) -> None:
        if tid is None:
            out.append({"ph": "M", "pid": pid, "tid": 0, "ts": 0, "name": what, "args": {"name": value}})
            if sort is not None:
                out.append({"ph": "M", "pid": pid, "tid": 0, "ts": 0, "name": "process_sort_index",
                            "args": {"sort_index": sort}})
        elif (pid, tid) not in named_threads:
            named_threads.add((pid, tid))
            out.append({"ph": "M", "pid": pid, "tid": tid, "ts": 0, "name": "thread_name", "args": {"name": value}})

    for h in heads:
        role, pid = h.get("role"), h.get("pid")
        if role == "relay":
            meta(pid, None, "process_name", f"relay (pid {pid})", 0)
            meta(pid, 1, "thread_name", "scheduler")
        elif role == "core":
            meta(pid, None, "process_name", f"{h['name']} (core pid {pid})", 10 + sorted(core_pid).index(h["name"]))
            meta(pid, pid, "thread_name", "remoteproc")
        elif role == "firmware":
            meta(core_pid[h["name"]], pid, "thread_name", f"firmware pid {pid}")
        elif role == "client":
            meta(pid, None, "process_name", f"client {h.get('name', '')} (pid {pid})", 100)
            meta(pid, SDK_TID, "thread_name", "sdk stamps")
    for name, pid in core_pid.items():
        if pid >= _CORE_PID_BASE:
            meta(pid, None, "process_name", name, 10 + sorted(core_pid).index(name))

    def where(stage: tuple) -> tuple[int, int]:
        _, pid, tid = stage[:3]
        if isinstance(pid, str):        # a firmware: its core's process, its own thread
            return core_pid.get(pid, _CORE_PID_BASE), tid
        return pid, tid

    stamps: dict[tuple, list] = {}      # (pid, tid) -> its stamp slices
    flows: list[tuple] = []             # (task id, its slices in time order)
    for task in tasks:
        st = task.stages
        label = task.label()
        args = {"task": task.gid, "op": f"0x{task.op:04x}", "core": task.core, "priority": task.prio,
                "custom_id": task.custom_id, "client_pid": task.client_pid, "bytes": task.bytes,
                "code": task.code}
        points = []
        for stage in ("submit", "enqueue", "dispatch", "reply", "fail", "cancel", "complete"):
            if stage in st:
                pid, tid = where(st[stage])
                ev = {"ph": "X", "name": f"{stage} {label}", "cat": stage, "ts": us(st[stage][0]), "dur": 0,
                      "pid": pid, "tid": tid, "args": {**args, "stage": stage}}
                out.append(ev)
                stamps.setdefault((pid, tid), []).append(ev)
                points.append((st[stage][0], ev))
        if "start" in st:
            pid, tid = where(st["start"])
            ev = {"ph": "X", "name": label, "cat": "firmware", "ts": us(st["start"][0]),
                  "dur": max(0.0, round((st["end"][0] - st["start"][0]) / 1000.0, 3)), "pid": pid, "tid": tid,
                  "args": {**args, "stage": "run",
                           **({"board_us": task.board_us} if task.board_us is not None else {})}}
            out.append(ev)
            points.append((st["start"][0], ev))
        if "wait" in st:
            t0, pid, tid, t1 = st["wait"]
            out.append({"ph": "X", "name": f"wait {label}", "cat": "wait", "ts": us(t0), "dur": round((t1 - t0) / 1000, 3),
                        "pid": pid, "tid": tid, "args": {**args, "stage": "wait"}})
        if "enqueue" in st:     # the wait in the relay queue, as an async slice
            pid = st["enqueue"][1]
            end = st.get("dispatch") or st.get("fail") or st.get("cancel")
            if end is not None:
                out.append({"ph": "b", "name": f"queued {label}", "cat": "queue", "id": task.gid, "ts": us(st["enqueue"][0]),
                            "pid": pid, "tid": 1, "args": args})
                out.append({"ph": "e", "name": f"queued {label}", "cat": "queue", "id": task.gid, "ts": us(end[0]),
                            "pid": pid, "tid": 1})
        if "submit" in st and "complete" in st:   # the task as its client sees it
            pid = st["submit"][1]
            out.append({"ph": "b", "name": label, "cat": "task", "id": task.gid, "ts": us(st["submit"][0]),
                        "pid": pid, "tid": SDK_TID, "args": args})
            out.append({"ph": "e", "name": label, "cat": "task", "id": task.gid, "ts": us(st["complete"][0]),
                        "pid": pid, "tid": SDK_TID})
        points.sort(key=lambda p: p[0])
        if len(points) > 1:
            flows.append((task.gid, [ev for _, ev in points]))

    # A stamp lasts up to 1 µs (half the gap to the next stamp of its thread, so that slices
    # never overlap), and each flow event lies inside its slice: viewers bind a flow step to
    # the slice enclosing it on its thread.
    for evs in stamps.values():
        evs.sort(key=lambda e: e["ts"])
        for ev, nxt in zip(evs, evs[1:] + [None]):
            ev["dur"] = 1.0 if nxt is None else round(min(1.0, max(0.0, nxt["ts"] - ev["ts"]) / 2), 3)
    for gid, evs in flows:
        for i, slice_ in enumerate(evs):
            ph = "s" if i == 0 else "f" if i == len(evs) - 1 else "t"
            ev = {"ph": ph, "name": "task", "cat": "flow", "id": gid,
                  "ts": round(slice_["ts"] + min(slice_["dur"] / 2, 0.5), 3), "pid": slice_["pid"], "tid": slice_["tid"]}
            if ph == "f":
                ev["bp"] = "e"
            out.append(ev)

    for ts, role, h, kind, f in others:
        pid = h.get("pid")
        if role == "relay" and "q" in f:
            queued, inflight = f["q"], f["fl"]
            out.append({"ph": "C", "name": "queue depth", "ts": us(ts), "pid": pid, "tid": 1,
                        "args": {"queued": queued}})
            names = relay_cores or [f"core{i}" for i in range(len(inflight))]
            out.append({"ph": "C", "name": "in flight", "ts": us(ts), "pid": pid, "tid": 1,
                        "args": dict(zip(names, inflight))})
        if role == "relay" and kind == "core":
            meta(pid, 2, "thread_name", "core states")
            out.append({"ph": "i", "s": "t", "name": f"{f['core']} {f['state']}", "cat": "core", "ts": us(ts),
                        "pid": pid, "tid": 2, "args": f})
        elif role == "relay" and kind == "reject":
            out.append({"ph": "i", "s": "t", "name": f"rejected {f.get('code')}", "cat": "reject", "ts": us(ts),
                        "pid": pid, "tid": 1, "args": f})
        elif role == "core":
            out.append({"ph": "i", "s": "t", "name": kind, "cat": "lifecycle", "ts": us(ts), "pid": pid, "tid": pid,
                        "args": f})
        elif role == "firmware" and kind == "bank_conflict":     # on the firmware's thread, inside its task
            out.append({"ph": "i", "s": "t", "name": f"bank conflict {f.get('kernel', '')}", "cat": "bank_conflict",
                        "ts": us(ts), "pid": core_pid.get(h.get("name"), _CORE_PID_BASE), "tid": pid, "args": f})
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "otherData": {"base_unix_ns": base, "clock": "CLOCK_REALTIME (time.time_ns) of every process",
                          "session": (session or {}).get("session", ""), "tasks": len(tasks),
                          "processes": [{k: h.get(k) for k in ("role", "name", "pid", "host")} for h in heads],
                          "incomplete_files": sum(1 for _, _, ended in files if not ended)}}


def merge(session_dir: Path, out_path: Path | None = None, session: dict | None = None) -> dict:
    """The session's trace; also written to ``out_path`` if given."""
    doc = to_chrome(load(session_dir), session)
    if out_path is not None:
        Path(out_path).write_text(json.dumps(doc, separators=(",", ":")))
    return doc

"""The SoC trace without processes: the switch and recorders, the engines' trace events, the
SDK's tracer, and the merge into the Trace Event Format (keys, tracks, stages, flows)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from protocol import errors, header, messages, opids, wire
from protocol.constants import Command, Core
from dsp_side.core_effects import Boot
from protocol.remoteproc import Action
from relay_server.effects import ToFw
from relay_server.observe import RelayObserver
from vdsp_board.observability import trace, tracefmt
from vdsp_board.observability.trace import ListRecorder
from tests import privilege
from tests.relay.test_relay_engine import A, Relay, tasks_sent
from vdsp_sim import otheruser

REQUIRED = {"ph", "ts", "pid", "tid", "name"}


# --- the switch and one process's recorder ------------------------------------------------------
def test_a_recorder_is_off_until_the_flag_appears_and_writes_its_file_until_it_goes(tmp_path):
    rec = trace.Recorder("relay", "relay", directory=tmp_path, check_every_s=0)
    assert rec.poll() is False and not rec.on
    session = trace.start(tmp_path)
    assert rec.poll() is True
    rec.emit("enq", {"rid": 1})
    rec.emit("disp", {"rid": 1})
    rec.poll()                              # written at each poll
    path = next(tmp_path.joinpath(session["session"]).glob("*.trace"))
    assert path.name == f"relay-relay-{rec.pid}.trace"
    head, events, ended = trace.read(path)
    assert head["role"] == "relay" and [e[1] for e in events] == ["enq", "disp"] and not ended
    assert trace.stop(tmp_path)["session"] == session["session"]
    assert rec.poll() is False
    head, events, ended = trace.read(path)
    assert ended and len(events) == 2
    assert trace.wait_ended(path.parent, timeout_s=0.1) == [path]


def test_the_switch_is_looked_at_only_every_interval(tmp_path):
    rec = trace.Recorder("core", "vdsp0", directory=tmp_path, check_every_s=3600)
    rec.poll()
    trace.start(tmp_path)
    assert rec.poll() is False              # not looked at again yet: off costs one clock read
    assert rec.poll(force=True) is True


def test_the_flag_cannot_send_a_recorder_outside_the_trace_directory(tmp_path):
    (tmp_path / "trace").mkdir()
    (tmp_path / "elsewhere").mkdir()
    rec = trace.Recorder("relay", "relay", directory=tmp_path / "trace", check_every_s=0)
    for name in ("../elsewhere", "/tmp", "a/b", ""):
        (tmp_path / "trace" / trace.FLAG).write_text(json.dumps({"session": name, "dir": str(tmp_path / "elsewhere")}))
        assert rec.poll() is False, name
    (tmp_path / "trace" / "link").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "trace" / trace.FLAG).write_text(json.dumps({"session": "link"}))
    assert rec.poll() is False
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_file_stops_growing_at_its_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(trace, "MAX_FILE_BYTES", 2000)
    rec = trace.Recorder("relay", "relay", directory=tmp_path, check_every_s=0)
    session = trace.start(tmp_path)
    rec.poll()
    for i in range(200):
        if rec.on:
            rec.emit("disp", (i, "vdsp0", 0, (1, 0)))
        rec.poll()
    assert rec.on is False
    trace.stop(tmp_path)
    rec.poll()
    head, events, ended = trace.read(next((tmp_path / session["session"]).glob("*.trace")))
    assert head["truncated"] and ended and 0 < len(events) < 200


def test_a_second_start_joins_the_active_session(tmp_path):
    first = trace.start(tmp_path)
    assert trace.start(tmp_path)["session"] == first["session"]
    trace.stop(tmp_path)
    assert trace.active(tmp_path) is None and trace.stop(tmp_path) is None


def test_a_trace_directory_of_another_user_is_refused_and_never_switches_a_recorder_on():
    """Before, another user could own VDSP_TRACE_DIR, switch tracing on in every process of the
    SoC and read the relay's trace (client pids, owners, operators)."""
    plant = (f"(d / 's1').mkdir(mode=0o700); (d / {trace.FLAG!r}).write_text(json.dumps("   # what the other user plants
             "{'session': 's1', 'dir': str(d / 's1')})); os.chmod(d, 0o755)")
    with privilege.other_users_dir(plant) as theirs:
        with pytest.raises(errors.InvalidArgument) as exc:
            trace.start(theirs)
        assert f"owned by uid {otheruser.other_ids()[0]}" in exc.value.message and str(theirs) in exc.value.message
        rec = trace.Recorder("relay", "relay", directory=theirs, check_every_s=0)
        assert rec.poll() is False
        assert privilege.as_other_user("print(os.listdir(sys.argv[2]))", str(theirs / "s1")).strip() == "[]"


def test_a_trace_directory_open_to_others_or_a_symlink_is_refused(tmp_path):
    (tmp_path / "open").mkdir(mode=0o700)
    os.chmod(tmp_path / "open", 0o755)
    with pytest.raises(errors.InvalidArgument) as exc:
        trace.start(tmp_path / "open")
    assert "chmod 700" in exc.value.message
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(errors.InvalidArgument) as exc:
        trace.start(tmp_path / "link")
    assert "not a directory" in exc.value.message
    assert list((tmp_path / "real").iterdir()) == []


def test_old_sessions_are_removed_oldest_first_to_bound_the_directory(tmp_path, monkeypatch):
    """Each session opened new files, so the cap per file did not bound the disk."""
    monkeypatch.setattr(trace, "MAX_TOTAL_BYTES", 10_000)
    names = []
    for i in range(6):
        session = trace.start(tmp_path)
        names.append(session["session"])
        Path(session["dir"], "relay-relay-1.trace").write_bytes(b"x" * 3000)
        os.utime(session["dir"], ns=(i * 10**9, i * 10**9))     # their order, whatever the clock did
        trace.stop(tmp_path)
    left = [p.name for p, _ in trace.sessions(tmp_path)]
    assert left == names[-2:]               # 3000 each: the new one gets half the bound
    assert sum(n for _, n in trace.sessions(tmp_path)) <= trace.MAX_TOTAL_BYTES


def test_a_recorder_stops_when_the_directory_holds_its_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(trace, "MAX_TOTAL_BYTES", 50_000)
    monkeypatch.setattr(trace, "TOTAL_CHECK_BYTES", 1000)
    session = trace.start(tmp_path)
    Path(session["dir"], "core-vdsp0-1.trace").write_bytes(b"x" * 45_000)   # another process's file
    rec = trace.Recorder("relay", "relay", directory=tmp_path, check_every_s=0)
    rec.poll()
    for i in range(2000):
        if rec.on:
            rec.emit("disp", (i, "vdsp0", 0, (1, 0)))
        rec.poll()
    assert rec.on is False
    assert sum(n for _, n in trace.sessions(tmp_path)) <= trace.MAX_TOTAL_BYTES + 2000


# --- the engines' events -----------------------------------------------------------------------
def test_the_relay_engine_stamps_enqueue_dispatch_and_reply_with_queue_depth_and_inflight():
    rec = ListRecorder()
    r = Relay(observer=RelayObserver(rec))
    r.both_up()
    r.send(A, messages.hello(1, "client", owner=7, pid=55))
    r.take()
    r.task(A, 10, core=Core.CORE_1, priority=200, custom_id=4, op=opids.PING)
    (sent,) = tasks_sent(r.take(), 1)
    r.fw_reply(1, wire.encode(sent))
    kinds = [k for k in rec.kinds() if k != "core"]
    assert kinds == ["enq", "disp", "reply"]
    enq, disp, reply = [e[2] for e in rec.events if e[1] != "core"]
    assert enq["cid"] == 10 and enq["owner"] == 7 and enq["cpid"] == 55 and enq["prio"] == 200 and enq["cust"] == 4
    assert enq["rid"] == disp["rid"] == reply["rid"] == sent.msg_id
    assert disp["core"] == reply["core"] == "vdsp1" and reply["code"] == 0
    assert (disp["q"], disp["fl"]) == (0, (0, 1)) and (reply["q"], reply["fl"]) == (0, (0, 0))


def test_the_relay_engine_traces_failures_rejections_and_core_states():
    rec = ListRecorder()
    r = Relay(observer=RelayObserver(rec))
    r.both_up()
    r.task(A, 1, core=Core.CORE_0)
    r.take()
    r.e.on_ctl(0, wire.encode(messages.event("vdsp0", "crashed", reason="crash: exception")), r.now)
    r.task(A, 2, core=Core.CORE_0)          # refused: vdsp0 crashed
    fail = [e[2] for e in rec.events if e[1] == "fail"]
    assert fail and fail[0]["code"] == errors.CoreCrashed.code
    states = [(e[2]["core"], e[2]["state"]) for e in rec.events if e[1] == "core"]
    assert ("vdsp0", "crashed") in states
    (reject,) = [e[2] for e in rec.events if e[1] == "reject"]
    assert reject["cid"] == 2 and reject["code"] == errors.CoreCrashed.code


def test_tracing_off_records_nothing_and_the_stats_view_still_counts():
    r = Relay()
    r.both_up()
    assert r.e.obs.trace.on is False
    for i in range(5):
        r.task(A, i + 1, op=opids.PING)
    for sent in r.take(ToFw):
        if header.command_of(sent.frames[0]) == Command.TASK:
            r.fw_reply(sent.index, sent.frames)
    stats = r.e.query("stats")
    assert stats["completed"] == 5
    assert stats["operators"]["0x0000"]["completed"] == 5 and stats["operators"]["0x0000"]["p50_us"] is not None
    assert [c["name"] for c in stats["cores"]] == ["vdsp0", "vdsp1"]
    assert stats["top_clients"][0]["submitted"] == 5


def _core_engine():
    from dsp_side.core_engine import CoreEngine
    from dsp_side.remoteproc import Device
    return CoreEngine("vdsp0", "ipc:///x/vdsp0.fw.sock", Device("vdsp0", "vdsp0"), heartbeat_ms=500,
                      watchdog_s=1.0)


def test_core_lifecycle_instants_boot_crash_recovery_watchdog_stop():
    e = _core_engine()
    e.trace = rec = ListRecorder()
    e.start()
    e.fw_booted(100, "install", 0.0)
    e.fw_ready({"version": "1.0", "operators": []})
    e.fw_died("exception", {"task": {"msg_id": 9}})
    assert e.out[-1] == Boot(Action.RECOVER)
    e.fw_booted(101, "install", 1.0)
    e.fw_ready({"version": "1.0", "operators": []})
    e.tick(2.0, (5.0, 3, 0.0))              # silent for 5 s > watchdog 1 s
    e.shutdown_firmware()
    kinds = rec.kinds()
    assert kinds == ["boot", "crash", "recovery", "boot", "watchdog", "stop"]
    crash = rec.events[1][2]
    assert crash["core"] == "vdsp0" and crash["task"] == 9 and crash["fw_pid"] == 100


# --- the SDK's tracer -----------------------------------------------------------------------------
def test_the_sdk_tracer_stamps_submit_complete_and_waits_only_while_on(tmp_path):
    from arm_side.tracing import SdkTracer
    tracer = SdkTracer(tmp_path, owner=0x1234, check_every_s=0)
    tracer.submit(1, opids.PING)
    tracer.complete(1)
    assert tracer.rec.events == []          # off: nothing kept
    session = trace.start(tmp_path)
    tracer.submit(2, opids.MEMCPY, core=1, priority=7, custom_id=3, nbytes=4096)
    t0 = tracer.wait_begin()
    tracer.complete(2, code=0, core="vdsp0", exec_us=5, queue_us=6)
    tracer.wait_end(2, t0)
    trace.stop(tmp_path)
    tracer.poll(force=True)
    (path,) = (tmp_path / session["session"]).glob("*.trace")
    head, events, ended = trace.read(path)
    assert head["role"] == "client" and head["owner"] == 0x1234 and ended
    assert [e[1] for e in events] == ["submit", "complete", "wait"]
    assert events[0][2] == {"id": 2, "op": opids.MEMCPY, "core": 1, "prio": 7, "cust": 3, "bytes": 4096}
    assert events[0][0] <= events[1][0] and events[2][2]["t0"] <= events[2][0]


# --- the merge --------------------------------------------------------------------------------------
def _files():
    """One task of client pid 300 (owner 0x42) through the relay (pid 200) to vdsp1's firmware
    (pid 401, core pid 400), a direct task to vdsp0 (firmware 501, core 500), and a crash."""
    client = ({"role": "client", "name": "pid300", "pid": 300, "owner": 0x42}, [
        (1000, "submit", {"id": 5, "op": 0x10, "core": 0, "prio": 100, "cust": 0, "bytes": 64}),
        (1500, "submit", {"id": 6, "op": 0x11, "core": 1, "prio": 0, "cust": 0, "bytes": 0}),
        (9000, "complete", {"id": 5, "code": 0, "core": "vdsp1"}),
        (9500, "complete", {"id": 6, "code": 0, "core": "vdsp0"}),
        (9600, "wait", {"id": 5, "t0": 1200, "tid": 300})], True)
    relay = ({"role": "relay", "name": "relay", "pid": 200, "cores": ["vdsp0", "vdsp1"]}, [
        (2000, "enq", {"rid": 17, "cid": 5, "cpid": 300, "owner": 0x42, "op": 0x10, "prio": 100, "cust": 0,
                       "core": None, "bytes": 64, "q": 1, "fl": [0, 0]}),
        (3000, "disp", {"rid": 17, "core": "vdsp1", "q": 0, "fl": [0, 1]}),
        (8000, "reply", {"rid": 17, "core": "vdsp1", "code": 0, "q": 0, "fl": [0, 0]}),
        (9700, "core", {"core": "vdsp0", "state": "crashed", "reason": "crash: exception"})], True)
    fw1 = ({"role": "firmware", "name": "vdsp1", "pid": 401}, [
        (4000, "opname", {"op": 0x10, "name": "memcpy"}),
        (7000, "task", {"t0": 4000, "id": 17, "op": 0x10, "bind": -1, "code": 0, "board_us": 5.512})], True)
    fw0 = ({"role": "firmware", "name": "vdsp0", "pid": 501}, [
        (6000, "task", {"t0": 5000, "id": 6, "op": 0x11, "name": "fill", "bind": 0x42, "code": 0})], False)
    core0 = ({"role": "core", "name": "vdsp0", "pid": 500}, [(9650, "crash", {"core": "vdsp0", "kind": "exception"})],
             True)
    core1 = ({"role": "core", "name": "vdsp1", "pid": 400}, [], True)
    return [client, relay, fw1, fw0, core0, core1]


def test_the_merged_trace_follows_the_trace_event_format():
    doc = json.loads(json.dumps(tracefmt.to_chrome(_files())))
    assert set(doc) >= {"traceEvents", "displayTimeUnit"} and doc["otherData"]["tasks"] == 2
    for ev in doc["traceEvents"]:
        assert REQUIRED <= set(ev), ev
        assert ev["ph"] in {"X", "B", "E", "b", "e", "i", "C", "M", "s", "t", "f"}
        assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0
        if ev["ph"] == "X":
            assert ev["dur"] >= 0
        if ev["ph"] in "bestf":
            assert "id" in ev
        if ev["ph"] == "C":
            assert all(isinstance(v, (int, float)) for v in ev["args"].values())
    names = {(e["pid"], e.get("args", {}).get("name")) for e in doc["traceEvents"] if e["ph"] == "M"}
    assert (200, "relay (pid 200)") in names and (400, "vdsp1 (core pid 400)") in names
    assert (300, "client pid300 (pid 300)") in names


def test_a_task_has_every_stage_in_order_on_the_right_core_linked_by_one_flow():
    doc = tracefmt.to_chrome(_files())
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["args"].get("task")]
    relayed = sorted((e for e in slices if e["args"]["op"] == "0x0010"), key=lambda e: e["ts"])
    stages = [e["args"]["stage"] for e in relayed if e["args"]["stage"] != "wait"]
    assert stages == ["submit", "enqueue", "dispatch", "run", "reply", "complete"]
    run = next(e for e in relayed if e["args"]["stage"] == "run")
    assert run["pid"] == 400 and run["tid"] == 401 and run["name"] == "memcpy" and run["dur"] == 3.0
    flows = sorted((e for e in doc["traceEvents"] if e["ph"] in "stf" and e["id"] == run["args"]["task"]),
                   key=lambda e: e["ts"])
    assert [f["ph"] for f in flows] == ["s", "t", "t", "t", "t", "f"]
    stamped = [e for e in relayed if e["args"]["stage"] != "wait"]
    for flow, slice_ in zip(flows, stamped):     # each step inside its slice, on its thread
        assert (flow["pid"], flow["tid"]) == (slice_["pid"], slice_["tid"])
        assert slice_["ts"] <= flow["ts"] <= slice_["ts"] + slice_["dur"] and slice_["dur"] > 0, (flow, slice_)
    direct = [e for e in slices if e["args"]["op"] == "0x0011"]
    assert sorted(e["args"]["stage"] for e in direct) == ["complete", "run", "submit"]
    assert next(e for e in direct if e["args"]["stage"] == "run")["pid"] == 500
    # the firmware's board-time estimate on its slice; a task event without one (an older file) has none
    assert run["args"]["board_us"] == 5.512
    assert "board_us" not in next(e for e in direct if e["args"]["stage"] == "run")["args"]


def test_the_firmware_records_a_tasks_board_time_as_the_last_field_of_its_event():
    from dsp_side.fwtrace import TaskTrace
    t = TaskTrace("vdsp1", lambda op: "memcpy")
    t.rec = trace.ListRecorder()      # type: ignore[assignment]
    t.rec.session = "s"               # type: ignore[attr-defined]
    head = header.pack(Command.TASK, 7, op=0x10)
    t.begin([head], -1)
    t.end(None, board_us=5.512)
    t.begin([head], -1)
    t.end(None)
    tasks = [f for _, kind, f in t.rec.events if kind == "task"]
    assert [f["board_us"] for f in tasks] == [5.512, None] and trace.SCHEMAS["task"][-1] == "board_us"


def test_stamp_slices_of_one_thread_never_overlap():
    doc = tracefmt.to_chrome(_files())
    by_thread: dict = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: e["ts"])
        for a, b in zip(evs, evs[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] or b["ts"] + b["dur"] <= a["ts"] + a["dur"], (a, b)   # apart or nested


def test_a_crash_is_an_instant_on_its_core_and_counters_come_from_the_relay():
    doc = tracefmt.to_chrome(_files())
    (crash,) = [e for e in doc["traceEvents"] if e["ph"] == "i" and e["name"] == "crash"]
    assert crash["pid"] == 500 and crash["args"]["core"] == "vdsp0"
    depth = [e["args"]["queued"] for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == "queue depth"]
    assert depth == [1, 0, 0]
    inflight = [e["args"] for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == "in flight"]
    assert inflight[1] == {"vdsp0": 0, "vdsp1": 1}


def test_the_timeline_picture_is_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    from vdsp_sim import traceplot
    doc = tracefmt.to_chrome(_files())
    data = traceplot.timeline(doc)
    assert set(data["cores"]) == {"vdsp0", "vdsp1"} and data["instants"]["vdsp0"][0][1] == "crash"
    assert set(data["clients"]) == {300}
    out = traceplot.render(doc, tmp_path / "t.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_each_core_s_label_sits_on_its_own_row():
    """The "N tasks, M ms busy" text of each core is drawn beside that core's row (the rows run
    top-down: it was placed by axes fraction, bottom-up, so vdsp0's figures sat on vdsp1's row)."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    from vdsp_sim import traceplot
    tasks = {"vdsp0": 3, "vdsp1": 1, "vdsp2": 5}
    events = [{"ph": "X", "cat": "firmware", "name": "ping", "ts": 1000.0 * (10 * n + i), "dur": 1000.0 * (n + 1),
               "pid": 1, "tid": 1, "args": {"core": core, "client_pid": 7}}
              for n, (core, count) in enumerate(tasks.items()) for i in range(count)]
    fig = traceplot.figure({"traceEvents": events})
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        middle = lambda artist: (lambda box: (box.y0 + box.y1) / 2)(artist.get_window_extent())   # noqa: E731
        rows = {t.get_text(): middle(t) for t in ax.get_yticklabels()}
        pitch = abs(rows["vdsp0"] - rows["vdsp1"])
        labels = {t.get_text().split(" tasks")[0]: middle(t) for t in ax.texts if " tasks\n" in t.get_text()}
        for n, (core, count) in enumerate(tasks.items()):
            assert abs(labels[str(count)] - rows[core]) < pitch / 4, (core, labels, rows)
    finally:
        plt.close(fig)


# --- the metrics sink (no HTTP: tests/integration/test_live_trace.py scrapes a live relay) ------------------
def test_relay_metrics_count_tasks_failures_and_crash_recovery():
    from relay_server.metrics import RelayMetrics
    metrics = RelayMetrics()
    r = Relay(observer=RelayObserver(metrics=metrics))
    r.both_up()
    r.task(A, 1, core=Core.CORE_0, priority=200, op=opids.PING)
    (sent,) = tasks_sent(r.take(), 0)
    r.fw_reply(0, wire.encode(sent))
    r.task(A, 2, core=Core.CORE_0, op=opids.PING)
    r.take()
    r.e.on_ctl(0, wire.encode(messages.event("vdsp0", "crashed", reason="crash: exception")), r.now)
    r.task(A, 3, core=Core.CORE_0)                      # refused: crashed
    r.e.on_ctl(0, wire.encode(messages.event("vdsp0", "running", reason="booted",
                                             fw_endpoint="ipc:///x/vdsp0.fw2.sock")), r.now)
    metrics.refresh(r.e)
    get = metrics.registry.get_sample_value
    assert get("vdsp_tasks_submitted_total", {"op": "0x0000", "core": "core0", "priority_class": "high"}) == 1
    assert get("vdsp_tasks_completed_total", {"op": "0x0000", "core": "vdsp0", "priority_class": "high"}) == 1
    crashed = str(errors.CoreCrashed.code)
    assert get("vdsp_tasks_failed_total", {"op": "0x0000", "core": "vdsp0", "priority_class": "low",
                                           "code": crashed, "error": errors.describe(errors.CoreCrashed.code)}) == 1
    assert get("vdsp_tasks_rejected_total", {"op": "0x0000", "priority_class": "low", "code": crashed,
                                             "error": errors.describe(errors.CoreCrashed.code)}) == 1
    assert get("vdsp_task_latency_seconds_count", {"op": "0x0000", "core": "vdsp0", "priority_class": "high"}) == 1
    assert get("vdsp_core_crashes_total", {"core": "vdsp0"}) == 1
    assert get("vdsp_core_recoveries_total", {"core": "vdsp0"}) == 1
    assert get("vdsp_core_state", {"core": "vdsp0", "state": "running"}) == 1
    assert get("vdsp_core_state", {"core": "vdsp0", "state": "crashed"}) == 0


def test_an_operator_s_note_is_an_event_of_its_traced_task_drawn_on_the_firmware_thread():
    """A C kernel's bank conflicts (``OperatorContext.note``): an event with the task's id and op,
    recorded only while the task is traced; the merge draws it as an instant on the firmware's
    thread of its core."""
    from dsp_side.fwtrace import TaskTrace     # noqa: PLC0415
    tt = TaskTrace("vdsp1")
    tt.rec = rec = ListRecorder()
    rec.session = "s"           # type: ignore[attr-defined]   (what a real recorder's file is)
    fields = {"kernel": "pingpong_kernel", "count": 3, "first": "TCM bank 0: ..."}
    tt.note("bank_conflict", fields)                        # no task traced: nothing
    assert rec.events == []
    tt.begin(wire.encode(wire.Message(Command.TASK, 17, {}, 0x142A)), -1)
    tt.note("bank_conflict", fields)
    tt.end(None)
    assert [(kind, f) for _, kind, f in rec.events if kind == "bank_conflict"] == [
        ("bank_conflict", {"id": 17, "op": 0x142A, **fields})]
    files = _files()
    files[2][1].insert(1, (6000, "bank_conflict", {"id": 17, "op": 0x10, **fields}))
    doc = tracefmt.to_chrome(files)
    (ev,) = [e for e in doc["traceEvents"] if e.get("cat") == "bank_conflict"]
    assert (ev["ph"], ev["pid"], ev["tid"], ev["name"]) == ("i", 400, 401, "bank conflict pingpong_kernel")
    assert ev["args"]["count"] == 3

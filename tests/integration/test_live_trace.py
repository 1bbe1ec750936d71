"""The SoC trace and metrics of a real SoC: a known small workload (and a crash) traced end to
end and checked stage by stage; /metrics scraped over HTTP and checked against a workload."""
from __future__ import annotations

import json
import os
import signal
import socket
import time
import urllib.request

import pytest

from arm_side import CORE_0, CORE_1, Soc, errors, opids
from arm_side.tracing import sdk_tracer
from vdsp_board.observability import trace, tracefmt
from tests.conftest import wait_until
from tests.board.test_trace import REQUIRED

pytestmark = pytest.mark.live
ORDER = ["submit", "enqueue", "dispatch", "run", "reply", "complete"]


def _submit(soc, tracer, op, i, core, **kw):
    """A task; the SDK stamps its submit (before the send) and completion (at the reply) itself."""
    return soc.rpc(op, core=core, custom_id=i, **kw)


def test_a_small_workload_and_a_crash_in_the_trace(live_soc):
    directory = trace.trace_dir(live_soc.rt)
    session = trace.start(directory)
    # both cores and their firmwares look at the switch within ~1 s when idle; a loaded host may
    # take longer: the wait lasts while recorders keep starting, up to 10 x 6 s
    roles = trace.wait_started(session["dir"], 6, expect={"relay": 1, "core": 2, "firmware": 2})
    assert roles.count("firmware") == 2 and "relay" in roles, roles
    tracer = sdk_tracer()
    tracer.poll(force=True)
    assert tracer.on
    ran = {}
    with Soc() as soc:
        src, dst = soc.mem.alloc(4096), soc.mem.alloc(4096)
        tasks = []
        for i in range(12):
            core = (CORE_0, CORE_1, 0)[i % 3]
            if i % 2:
                tasks.append(_submit(soc, tracer, opids.MEMCPY, 100 + i, core, inputs=[src], outputs=[dst]))
            else:
                tasks.append(_submit(soc, tracer, opids.PING, 100 + i, core, priority=200))
        for task in tasks:
            task.wait(10000)
            ran[task.msg_id] = task.core
        time.sleep(0.4)     # the firmware writes its events when it next looks at the switch (0.25 s)
        sleeper = _submit(soc, tracer, opids.SLEEP, 999, CORE_0, params={"ms": 5000})
        time.sleep(0.3)
        os.kill(live_soc.fw_pid("vdsp0"), signal.SIGKILL)
        with pytest.raises(errors.CoreCrashed):
            sleeper.wait(5000)
        assert wait_until(lambda: _ping(soc), 20), "vdsp0 did not recover"
    tracer.flush()
    trace.stop(directory)
    tracer.poll(force=True)
    files = trace.wait_ended(session["dir"], 5)
    doc = json.loads(json.dumps(tracefmt.merge(session["dir"], None, session)))

    events = doc["traceEvents"]
    for ev in events:
        assert REQUIRED <= set(ev), ev
    core_pid = {e["args"]["name"].split()[0]: e["pid"] for e in events
                if e["ph"] == "M" and e["name"] == "process_name" and "core pid" in e["args"]["name"]}
    assert set(core_pid) == {"vdsp0", "vdsp1"}
    by_task: dict = {}
    for e in events:
        if e["ph"] == "X" and "task" in e.get("args", {}) and e["args"].get("client_pid") == os.getpid():
            by_task.setdefault(e["args"]["custom_id"], []).append(e)
    assert set(range(100, 112)) | {999} <= set(by_task)    # (and the recovery PINGs, custom id 0)
    for i, task in enumerate(tasks):
        stages = [e["args"]["stage"] for e in by_task[100 + i]]
        assert stages.count("wait") == 1, stages            # the SDK's blocking wait, stamped by Task.wait
        slices = sorted((e for e in by_task[100 + i] if e["args"]["stage"] != "wait"),
                        key=lambda e: (e["ts"], ORDER.index(e["args"]["stage"])))
        assert [e["args"]["stage"] for e in slices] == ORDER, (i, slices, [
            (f.name, [(e[1], e[2].get("id"), e[2].get("bind")) for e in trace.read(f)[1]][:5]) for f in files])
        run = slices[3]
        assert run["pid"] == core_pid[task.core], (task.core, run)
        assert run["name"] == ("memcpy" if i % 2 else "ping")
        gid = run["args"]["task"]
        flows = [e for e in events if e["ph"] in "stf" and e["id"] == gid]
        assert sorted(f["ph"] for f in flows) == ["f", "s", "t", "t", "t", "t"]
    crashed = {e["args"]["stage"] for e in by_task[999]}
    assert {"submit", "enqueue", "dispatch", "fail", "complete"} <= crashed
    (fail,) = [e for e in by_task[999] if e["args"]["stage"] == "fail"]
    assert fail["args"]["code"] == errors.CoreCrashed.code
    crash = [e for e in events if e["ph"] == "i" and e["name"] == "crash"]
    assert len(crash) == 1 and crash[0]["pid"] == core_pid["vdsp0"] and crash[0]["args"]["core"] == "vdsp0"
    names = [e["name"] for e in events if e["ph"] == "i" and e["pid"] == core_pid["vdsp0"]]
    assert names[names.index("crash"):][:3] == ["crash", "recovery", "boot"]
    assert any(e["ph"] == "C" and e["name"] == "queue depth" for e in events)
    assert len([f for f in files if f.name.startswith("firmware-vdsp0")]) == 2   # the one killed and its successor


def _ping(soc) -> bool:
    try:
        return bool(soc.rpc(opids.PING, core=CORE_0).wait(2000))
    except errors.VdspError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int) -> dict:
    from prometheus_client.parser import text_string_to_metric_families
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def _sum(samples: dict, name: str, **labels) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items())


def test_metrics_over_http_count_a_workload(runtime_env, monkeypatch):
    from tests.live import LiveSoc
    port = _free_port()
    monkeypatch.setenv("VDSP_METRICS_PORT", str(port))
    live = LiveSoc(runtime_env)
    live.start()
    try:
        with Soc() as soc:
            buf = soc.mem.alloc(8192)
            for _ in range(10):
                soc.rpc(opids.PING, core=CORE_0, priority=200).wait(5000)
            for _ in range(5):
                soc.rpc(opids.FILL, outputs=[buf], params={"value": 1}).wait(5000)
            with pytest.raises(errors.VdspError) as bad:
                soc.rpc(0x1234, core=CORE_1).wait(5000)
            samples = wait_until(lambda: (lambda s: s if _sum(s, "vdsp_core_state", state="running") == 2
                                          else None)(_scrape(port)), 5)
            assert samples, "no metrics with both cores running"
            key = lambda **kw: _sum(samples, **kw)   # noqa: E731
            assert key(name="vdsp_tasks_submitted_total", op="0x0000", core="core0", priority_class="high") == 10
            assert key(name="vdsp_tasks_completed_total", op="0x0000", core="vdsp0") == 10
            assert key(name="vdsp_tasks_submitted_total", op="0x0002", core="any", priority_class="low") == 5
            assert key(name="vdsp_tasks_completed_total", op="0x0002") == 5
            assert key(name="vdsp_tasks_failed_total", op="0x1234", core="vdsp1", code=str(bad.value.code)) == 1
            assert key(name="vdsp_task_latency_seconds_count") == 16
            assert key(name="vdsp_task_latency_seconds_count", op="0x0000") == 10
            assert key(name="vdsp_task_queue_wait_seconds_count", priority_class="high") == 10
            owner = f"{soc.mem.owner.id:06x}" if hasattr(soc.mem, "owner") else None
            assert key(name="vdsp_ddr_bytes") >= 8192 and key(name="vdsp_ddr_buffers") >= 1
            if owner:
                assert key(name="vdsp_ddr_bytes", owner=owner) >= 8192
            assert key(name="vdsp_core_state", core="vdsp0", state="running") == 1
            assert key(name="vdsp_relay_queue_depth") == 0
            assert ("vdsp_core_crashes_total", (("core", "vdsp0"),)) not in samples or \
                key(name="vdsp_core_crashes_total", core="vdsp0") == 0
    finally:
        live.stop_and_check()


def test_soc_trace_traces_the_whole_soc_for_the_life_of_a_client(live_soc, tmp_path):
    """What Soc(trace=PATH) does (arm_side.tracing.SocTrace): on at start, merged at the end."""
    from arm_side.tracing import SocTrace
    out = tmp_path / "soc-trace.json"
    st = SocTrace(out).start()
    assert trace.active(trace.trace_dir(live_soc.rt)) is not None
    with Soc() as soc:
        for i in range(5):
            soc.rpc(opids.PING, custom_id=200 + i).wait(5000)
    doc = st.finish()
    assert trace.active(trace.trace_dir(live_soc.rt)) is None
    assert json.loads(out.read_text()) == json.loads(json.dumps(doc))
    runs = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["args"].get("stage") == "run"
            and e["args"].get("custom_id") in range(200, 205)]
    assert len(runs) == 5 and all(e["name"] == "ping" for e in runs)


def test_vdsp_trace_runs_a_command_and_writes_the_trace_and_its_picture(live_soc, tmp_path):
    import subprocess
    import sys
    pytest.importorskip("matplotlib")
    code = ("from arm_side import Soc, opids\n"
            "with Soc() as soc:\n"
            "    for i in range(10): soc.rpc(opids.PING, custom_id=400 + i).wait(5000)\n"
            "raise SystemExit(7)\n")
    out = tmp_path / "not" / "yet" / "t.json"          # its directories are made first (mkdir -p)
    proc = subprocess.run([sys.executable, "-m", "vdsp_sim.cli", "trace", "-o", str(out), "--png", "--",
                           sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 7, proc.stderr          # the command's status
    doc = json.loads(out.read_text())
    runs = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["args"].get("stage") == "run"
            and e["args"].get("custom_id") in range(400, 410)]
    assert len(runs) == 10
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert trace.active(trace.trace_dir(live_soc.rt)) is None
    assert " tasks, " in proc.stderr and str(out) in proc.stderr


@pytest.mark.parametrize("where", ["output", "png"])
def test_vdsp_trace_refuses_an_output_it_cannot_write_before_it_runs_anything(runtime_env, tmp_path, where):
    """`-o x/trace.json` (or `--png x/t.png`) where x is a file: refused before tracing or running
    the command (it ran, then the trace was lost to a traceback)."""
    import subprocess
    import sys
    blocker = tmp_path / "x"
    blocker.write_text("a file, not a directory")
    ran = tmp_path / "ran"
    paths = ["-o", str(blocker / "t.json")] if where == "output" else \
        ["-o", str(tmp_path / "t.json"), "--png", str(blocker / "t.png")]
    if where == "png":
        pytest.importorskip("matplotlib")
    proc = subprocess.run([sys.executable, "-m", "vdsp_sim.cli", "trace", *paths, "--",
                           sys.executable, "-c", f"open({str(ran)!r}, 'w')"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "nothing was traced or run" in proc.stderr and str(blocker) in proc.stderr, proc.stderr
    assert not ran.exists()
    assert trace.active(trace.trace_dir(runtime_env)) is None

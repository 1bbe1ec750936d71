"""`vdsp bench perf`'s native direct floor (information): the direct floor's topology and messages
in C (vdsp_sim/benchmarks/native_floor.c). Its figures stand beside the Python floor's, so its
client must count only echoes of its own tasks, in order, and fail rather than hang or count
when the worker is gone; its worker must keep serving past a message that is not the floor's and
leave with its parent; and a machine without a C compiler still gets its report."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zmq

from vdsp_sim.benchmarks import bench_perf, native_floor
from vdsp_sim.benchmarks.bench_rpc import ping_body_size


@pytest.fixture(scope="module")
def floor():
    with native_floor.NativeFloor(ping_body_size()) as nf:
        yield nf


@pytest.mark.live
def test_the_client_counts_echoes_of_its_tasks_and_the_worker_uses_cpu_for_them(floor):
    lat = floor.latency(200)
    assert 0 < lat["p50_us"] <= lat["p99_us"] < 1e6
    got = floor.throughput(16, 0.3)
    assert got["tasks_per_s"] > 100          # 30 tasks in 0.3 s: far below what any machine does
    assert got["client_cpu_us"] > 0 and got["worker_cpu_us"] > 0


@pytest.mark.live
def test_a_message_that_is_not_the_floor_s_is_dropped_and_the_worker_serves_on(floor):
    ctx = zmq.Context()
    try:
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.connect(f"ipc://{floor.dir}/front.sock")
        sock.send_multipart([b"x"] * 6)                       # six frames: the worker keeps four at most
        sock.send_multipart([b"VD" + bytes(22), b"body"])     # then one of the floor's
        assert sock.poll(5000)
        assert sock.recv_multipart() == [b"VD" + bytes(22), b"body"]
        assert not sock.poll(200)                             # nothing of the first came back
    finally:
        ctx.destroy(linger=0)
    assert floor.latency(20)["p50_us"] > 0


@pytest.mark.live
def test_a_client_without_a_worker_fails_with_the_reason_instead_of_hanging(tmp_path, short_dir):
    program = native_floor.build(tmp_path)
    t0 = time.monotonic()
    res = subprocess.run([str(program), "throughput", str(short_dir), "4", "0.1", "8"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 1 and "no reply within 5000 ms" in res.stderr and res.stdout == ""
    assert time.monotonic() - t0 < 30


@pytest.mark.live
def test_the_worker_leaves_when_its_parent_does(tmp_path, short_dir):
    program = native_floor.build(tmp_path)
    parent = ("import subprocess, sys\n"       # starts the worker, sees it ready, says its pid and exits
              f"p = subprocess.Popen([{str(program)!r}, 'worker', {str(short_dir)!r}], stdout=subprocess.PIPE,"
              " stderr=subprocess.DEVNULL, text=True)\n"
              "assert p.stdout.readline().strip() == 'ready'\n"
              "print(p.pid)\n")
    said = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=30)
    pid = int(said.stdout.strip())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:        # gone, or a zombie its new parent (init, a subreaper) has not reaped yet
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except (FileNotFoundError, ProcessLookupError):
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    pytest.fail("the native floor's worker outlived its parent by 10 s")


@pytest.mark.parametrize("argv", [[], ["worker"], ["latency", "/tmp", "0", "8"], ["throughput", "/tmp", "4", "-1", "8"],
                                  ["throughput", "/tmp", "4", "1", "70000"], ["echo", "/tmp"]])
def test_wrong_arguments_get_the_usage_and_exit_2(tmp_path, argv):
    program = native_floor.build(tmp_path)
    res = subprocess.run([str(program), *argv], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and res.stderr.startswith("usage: native_floor")


def test_without_a_c_compiler_the_reason_is_said(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler-here")
    with pytest.raises(RuntimeError, match="no C compiler"):
        native_floor.build(tmp_path)


def test_the_report_gives_the_medians_beside_the_python_floor_or_why_not():
    rec = {"native_missing": "", "native_lat": [{"p50_us": 90.0}, {"p50_us": 70.0}, {"p50_us": 80.0}],
           "native_tput": [{"tasks_per_s": 2e5, "client_cpu_us": 3.0, "worker_cpu_us": 2.0},
                           {"tasks_per_s": 3e5, "client_cpu_us": 4.0, "worker_cpu_us": 1.0},
                           {"tasks_per_s": 1e5, "client_cpu_us": 5.0, "worker_cpu_us": 3.0}]}
    got = bench_perf.native_figures(rec)
    assert got == {"p50_us": 80.0, "tasks_per_s": 2e5, "client_cpu_us": 4.0, "worker_cpu_us": 2.0, "cpu_us": 5.0}
    direct = {"native": got, "floor_p50_us": 160.0, "floor_tasks_per_s": 5e4, "floor_cpu_us": 27.5,
              "direct_p50_us": 200.0, "direct_tasks_per_s": 4e4, "direct_cpu_us": 36.0}
    line = bench_perf.native_line(direct)
    assert "p50 80 µs, 200000 tasks/s, CPU 5.0 µs a task (client 4.0, worker 2.0)" in line
    assert "the Python direct floor: p50 160 µs, 50000 tasks/s, CPU 27.5 µs" in line
    missing = bench_perf.native_figures({"native_missing": "no C compiler (cc)", "native_lat": [], "native_tput": []})
    assert bench_perf.native_line({"native": missing}).endswith("not measured (no C compiler (cc))")


@pytest.mark.live
def test_a_worker_that_cannot_bind_says_why_and_nothing_is_left():
    nf = native_floor.NativeFloor(8)
    try:
        (nf.dir / "front.sock").mkdir()         # its socket's path taken
        with pytest.raises(RuntimeError, match="did not start .*bind"):
            nf.start()
        assert nf.worker is None
    finally:
        nf.stop()
    assert not nf.dir.exists()


def test_a_worker_that_never_says_ready_is_killed_at_the_deadline(tmp_path, monkeypatch):
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexec sleep 60\n")
    silent.chmod(0o755)
    monkeypatch.setattr(native_floor, "build", lambda directory: silent)
    monkeypatch.setattr(native_floor, "START_TIMEOUT_S", 0.5)
    nf = native_floor.NativeFloor(8)
    t0 = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match="no word within 0.5 s"):
            nf.start()
    finally:
        nf.stop()
    assert time.monotonic() - t0 < 10 and nf.worker is None

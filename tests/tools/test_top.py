"""``vdsp top``'s screen, rendered from fixed stats (no SoC, no terminal)."""
from __future__ import annotations

import pytest
from rich.console import Console

from vdsp_sim import top

PREV = {"pid": 77, "uptime_s": 10.0, "submitted": 100, "completed": 90, "failed": 0, "rejected": 0, "clients": 2,
        "queued": 0, "cores": [{"name": "vdsp0", "state": "running", "inflight": 0, "busy_s": 1.0},
                               {"name": "vdsp1", "state": "running", "inflight": 0, "busy_s": 2.0}]}
STATS = {"pid": 77, "uptime_s": 12.0, "submitted": 400, "completed": 390, "failed": 3, "rejected": 1, "clients": 2,
         "queued": 7, "queue_by_class": {"high": 2, "low": 5},
         "cores": [{"name": "vdsp0", "state": "running", "inflight": 8, "busy_s": 2.5, "crash_count": 0,
                    "firmware_version": "0.1.0"},
                   {"name": "vdsp1", "state": "crashed", "inflight": 0, "busy_s": 2.2, "crash_count": 2,
                    "firmware_version": "0.1.0"}],
         "operators": {"0x0001": {"name": "memcpy", "completed": 250, "failed": 0, "p50_us": 1500.0, "p99_us": 9100.0},
                       "0x0005": {"name": "count", "completed": 140, "failed": 3, "p50_us": 800.0, "p99_us": None}},
         "failed_by_code": {"-6000291": 3},
         "top_clients": [{"name": "pid11", "pid": 11, "submitted": 300, "completed": 295, "inflight": 5,
                          "connected": True},
                         {"name": "pid12", "pid": 12, "submitted": 100, "completed": 95, "inflight": 0,
                          "connected": False}]}


def screen(stats, prev=None, dt=0.0) -> str:
    console = Console(record=True, width=120, color_system=None)
    console.print(top.render(stats, prev, dt, "/tmp/rt"))
    return console.export_text()


def test_rates_come_from_two_samples():
    r = top.rates(STATS, PREV, 2.0)
    assert r["tasks_per_s"] == 150.0
    assert r["util"] == {"vdsp0": 0.75, "vdsp1": pytest.approx(0.1)}
    assert top.rates(STATS, None, 0)["tasks_per_s"] is None


def test_the_screen_shows_cores_queue_operators_and_clients():
    text = screen(STATS, PREV, 2.0)
    assert "tasks/s 150" in text and "relay pid 77" in text
    lines = {line.split()[0]: line for line in text.splitlines() if line.split()}
    assert "running" in lines["vdsp0"] and "75.0%" in lines["vdsp0"] and " 8 " in lines["vdsp0"]
    assert "crashed" in lines["vdsp1"] and "10.0%" in lines["vdsp1"]
    assert "relay queue: 7 tasks" in text
    assert lines["0x0001"].split()[1:] == ["memcpy", "250", "0", "1.50", "9.10"]
    assert lines["0x0005"].split()[1:] == ["count", "140", "3", "0.80", "-"]
    assert lines["pid11"].split()[1:] == ["11", "300", "295", "5"]
    assert lines["pid12"].split()[-1] == "gone"
    assert "-6000291: 3" in text and "Ctrl-C" in text


def test_a_first_screen_without_a_previous_sample_has_no_rates():
    text = screen(STATS)
    assert "tasks/s -" in text
    assert max(len(line) for line in text.splitlines()) <= 120

"""`vdsp bench rpc` on a host so busy that a throughput window saw no task complete (the
quick run's 0.6 s window, load average 12: test_install's run died with ZeroDivisionError after
17 s of measuring). The run must still report every figure it has, and say which ratio it
could not form and why, instead of losing the whole run."""
from __future__ import annotations

import argparse

from vdsp_sim.benchmarks import bench_rpc


def _results(baseline_tput: float) -> dict:
    lat = [100.0, 110.0, 120.0]
    return {
        "baseline": {"lat": lat, "tput": [baseline_tput]},
        "relay": {"lat": [200.0, 210.0, 220.0], "tput": [900.0]},
        "direct": {"lat": [150.0, 160.0, 170.0], "tput": [1000.0]},
        "handles": {"lat": {"small": [300.0], "big": [310.0]}, "exec_us": {"small": [5.0], "big": [6.0]}},
        "pinned": {},
        "cpu_per_task": {"baseline": [], "relay": [], "direct": []},
    }


CFG = dict(rounds=1, lat_n=3, warmup=1, tput_s=0.6, warm_s=0.2, handle_n=1, window=64, per_client=32,
           clients="threads", small=4096, big=32 << 20, pinned_cpu=None)


def test_a_window_in_which_no_baseline_task_completed_is_reported_not_fatal():
    fig = bench_rpc.summarize(dict(CFG), _results(0.0), 64, (12.0, 9.0, 5.0), (12.5, 9.0, 5.0))
    tput = fig["ratios"]["relay_tput_over_baseline"]
    assert tput["value"] is None and tput["verdict"] == "NO FIGURE"
    assert fig["ratios"]["relay_p50_over_baseline"]["value"] == 210.0 / 110.0     # the medians: still formed
    assert fig["info_ratios"]["direct_tput_over_baseline"] is None
    args = argparse.Namespace(quick=True, json=None, clients="threads", fail_on_miss=False)
    text = bench_rpc.to_report(fig, args).render()
    assert "relay tasks/s / baseline tasks/s" in text
    assert "no baseline task completed in the window" in text


def test_with_figures_on_both_sides_the_ratios_are_the_quotients():
    fig = bench_rpc.summarize(dict(CFG), _results(2000.0), 64, (0.5, 0.4, 0.3), (0.6, 0.4, 0.3))
    assert fig["ratios"]["relay_tput_over_baseline"]["value"] == 900.0 / 2000.0
    assert fig["ratios"]["relay_tput_over_baseline"]["verdict"] in ("PASS", "MISS")

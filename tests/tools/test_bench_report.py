"""The JSON and the text of every benchmark say the host's load average before the run and
after it (issue 43: both were read when the report was made, after the run, so they were equal,
and the text said none)."""
from __future__ import annotations

import os

from vdsp_sim.benchmarks import report


class _Load:
    """os.getloadavg as a host whose load goes from 0.5 to 3.25 while the benchmark runs."""

    def __init__(self) -> None:
        self.now = (0.5, 0.4, 0.3)

    def __call__(self):
        return self.now


def test_the_report_made_after_the_run_has_the_load_of_its_start(monkeypatch):
    load = _Load()
    monkeypatch.setattr(os, "getloadavg", load)
    report.mark_start()                    # what python -m vdsp_sim.benchmarks does before the module runs
    load.now = (3.25, 2.0, 1.0)            # the run
    rep = report.Report("demo")            # the benchmarks make their report at the end
    host = rep.as_json()["host"]
    assert host["loadavg_before"] == [0.5, 0.4, 0.3]
    assert host["loadavg_after"] == [3.25, 2.0, 1.0]
    assert "load average 0.50 before, 3.25 after" in rep.render()


def test_the_module_runner_marks_the_start_before_the_benchmark_runs(monkeypatch):
    from vdsp_sim.benchmarks import __main__ as runner
    load = _Load()
    monkeypatch.setattr(os, "getloadavg", load)
    seen = {}

    class Module:
        @staticmethod
        def main(argv):
            load.now = (9.0, 9.0, 9.0)
            seen["host"] = report.Report("transport").as_json()["host"]
            return 0

    monkeypatch.setattr(runner.importlib, "import_module", lambda name: Module)
    monkeypatch.setattr(runner.proc, "exit_on_sigterm", lambda: None)
    monkeypatch.setattr(runner.sys, "argv", list(runner.sys.argv))
    assert runner.main(["transport"]) == 0
    assert seen["host"]["loadavg_before"] == [0.5, 0.4, 0.3]
    assert seen["host"]["loadavg_after"] == [9.0, 9.0, 9.0]

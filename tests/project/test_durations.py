"""The order a parallel run hands modules out in: scripts/test_durations.py and tests/conftest.py."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

REPORT = """\
============================= slowest durations ==============================
20.81s call     tests/integration/test_busy_host.py::test_a_starved_soc_beside_a_cpu_hog_and_a_lock_flood_fails_nothing
3.96s setup    tests/integration/test_live_remoteproc.py::test_firmware_search_path_is_searched_first
2.50s call     tests/integration/test_live_remoteproc.py::test_firmware_search_path_is_searched_first
0.54s teardown tests/integration/test_live_remoteproc.py::test_firmware_search_path_is_searched_first
1.00s call     tests/sub/test_x.py::test_param[a::b]
0.20s call     tests/integration/test_busy_host.py::other
(4671 durations < 0.005s hidden.  Use -vv to show these durations.)
1890 passed in 303.67s (0:05:03)
"""


def _script():
    spec = importlib.util.spec_from_file_location("test_durations_script", ROOT / "scripts" / "test_durations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_durations_report_becomes_seconds_per_module():
    assert _script().per_module(REPORT) == {"tests/sub/test_x.py": 1.0, "tests/integration/test_busy_host.py": 21.0,
                                            "tests/integration/test_live_remoteproc.py": 7.0}


def test_the_script_writes_the_file_and_refuses_a_report_without_durations(tmp_path):
    log, out = tmp_path / "run.log", tmp_path / "durations.json"
    log.write_text(REPORT)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "test_durations.py"), str(log), "-o", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["tests/integration/test_busy_host.py"] == 21.0
    log.write_text("1890 passed in 303.67s\n")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "test_durations.py"), str(log), "-o", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "--durations=0" in done.stderr


# One collection of the whole suite (each took about 8 s of CPU on the 2-CPU VM): this plugin names
# the tests that carry the exclusive mark (on the test or its module), as `-m exclusive` selects them.
_MARKS = """
def pytest_collection_finish(session):
    for item in session.items:
        if item.get_closest_marker("exclusive") is not None:
            print("@@exclusive " + item.nodeid)
"""


def _whole_suite_order(session: pytest.Session) -> tuple[list[str], set[str]] | None:
    """(test ids in order, ids of the exclusive tests) of this run's own collection, when it is the
    whole suite (``tests``, nothing deselected): what this process collected is what xdist hands
    out, every worker collecting alike. None for a run of a part of the suite."""
    args = [Path(session.config.invocation_params.dir, a.split("::")[0]).resolve() for a in session.config.args]
    if args != [ROOT / "tests"] or len(session.items) != session.testscollected:
        return None
    ordered = [item.nodeid for item in session.items]
    return ordered, {item.nodeid for item in session.items if item.get_closest_marker("exclusive") is not None}


def _collected_order(tmp_path: Path) -> tuple[list[str], set[str]]:
    """The same from a collection of the whole suite in a process of its own."""
    (tmp_path / "exclusive_marks.py").write_text(_MARKS)
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
            "-p", "exclusive_marks"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    marked_ids = {line.removeprefix("@@exclusive ") for line in lines if line.startswith("@@exclusive ")}
    return [line for line in lines if "::" in line and not line.startswith("@@")], marked_ids


def test_modules_with_an_exclusive_test_come_first_then_the_longest(tmp_path, request):
    """The collection order of the whole suite, as xdist hands it out with --no-loadscope-reorder:
    the modules with an exclusive test first, each with its exclusive tests first, then the longest.
    In a run of the whole suite, the run's own order (a second collection cost 6 s of CPU)."""
    from tests.conftest import module_seconds
    ordered, marked_ids = _whole_suite_order(request.session) or _collected_order(tmp_path)
    modules: list[str] = []
    for line in ordered:
        name = line.split("::")[0]
        if not modules or modules[-1] != name:
            assert name not in modules, f"{name}'s tests are split"
            modules.append(name)
    seconds = module_seconds()
    assert seconds, "tests/durations.json is missing or empty"
    median = statistics.median(seconds.values())
    marked = re.compile(r"^\s*(@pytest\.mark\.exclusive\b|pytest\.mark\.exclusive,)", re.M)   # a test or a module
    exclusive = {m for m in modules if marked.search((ROOT / m).read_text())}
    assert {"tests/integration/test_busy_host.py"} <= exclusive
    assert exclusive == {i.split("::")[0] for i in marked_ids}, "the plugin and the source disagree on what is marked"
    keys = [(m not in exclusive, -seconds.get(m, median)) for m in modules]
    assert keys == sorted(keys), list(zip(modules, keys))
    # in its module, an exclusive test comes before the others (which keep their order)
    assert any(i.startswith("tests/integration/test_live_remoteproc.py::") for i in marked_ids)
    for module in exclusive:
        ids = [line for line in ordered if line.startswith(module + "::")]
        first = [i in marked_ids for i in ids]
        assert first == sorted(first, reverse=True), f"{module}: an exclusive test after another: {ids}"

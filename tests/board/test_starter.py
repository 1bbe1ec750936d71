"""The process starter (``vdsp_board.processes.starter``): it stays the parent of what it starts, reports
each exit over its socket (its own ``waitpid``), hands out pidfds where the kernel has them (and
signals for its owner where not), ends what it started when it dies, and forks entry points (a
template) or runs them as fresh interpreters. Each path with and without pidfds."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import wait_until
from vdsp_board.processes import starter as starter_mod
from vdsp_board.processes.starter import Entry, Starter, StarterGone

ROOT = Path(__file__).resolve().parents[2]
CHILD = Entry(lambda argv: 0, ("-c", "import sys, time; time.sleep(float(sys.argv[1])); sys.exit(int(sys.argv[2]))"))
PIDFD_PATHS = [True, False] if starter_mod.pidfds_available() else [False]


def ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(params=PIDFD_PATHS, ids=lambda p: "pidfds" if p else "no-pidfds")
def starter(request):
    s = Starter("test", {"child": CHILD}, templates=False, pidfds=request.param)
    yield s
    s.close()


def test_the_starter_is_the_parent_and_reports_the_exit_status(starter):
    child = starter.start("child", ["0.2", "3"])
    assert ppid(child.pid) == starter.pid != os.getpid()
    assert child.poll() is None
    assert child.wait(30) == 3 and child.returncode == 3
    assert not starter.forked       # this test process has threads: a fresh starter, fresh children


def test_a_signal_reaches_the_child_and_its_death_is_reported(starter):
    child = starter.start("child", ["60", "0"])
    time.sleep(0.1)
    child.kill()
    assert child.wait(30) == -signal.SIGKILL
    child.kill()            # after its exit: no-op, never a process that reused the pid
    assert child.pidfd is None      # closed with the exit


def test_pidfds_are_handed_out_only_where_asked_and_available():
    for wanted in PIDFD_PATHS:
        s = Starter("test", {"child": CHILD}, templates=False, pidfds=wanted)
        try:
            child = s.start("child", ["30", "0"])
            if wanted:
                assert child.pidfd is not None
                assert Path(f"/proc/self/fdinfo/{child.pidfd}").read_text().count(f"Pid:\t{child.pid}") == 1
            else:
                assert child.pidfd is None
            child.terminate()
            assert child.wait(30) == -signal.SIGTERM
        finally:
            s.close()


def test_what_the_starter_started_dies_with_it(starter):
    child = starter.start("child", ["60", "0"])
    os.kill(starter.pid, signal.SIGKILL)
    assert child.wait(30) == -signal.SIGKILL        # the owner hears it at once: the socket closed
    assert starter.gone and not starter.alive()
    assert wait_until(lambda: not running(child.pid), 10), "the child outlived its starter"
    with pytest.raises(StarterGone):
        starter.start("child", ["0", "0"])


def test_closing_the_starter_ends_what_it_started(starter):
    child = starter.start("child", ["60", "0"])
    starter.close()
    assert wait_until(lambda: not running(child.pid), 10)


def test_an_unknown_entry_or_a_bad_request_is_refused(starter):
    with pytest.raises(ValueError):
        starter.start("nope", [])
    starter._request({"entry": "child", "argv": [1, 2], "fds": []}, [])     # not strings: an error reply, no fork
    assert starter.alive()
    assert starter.start("child", ["0", "7"]).wait(30) == 7


def test_a_command_sent_to_the_starter_is_not_run(starter, tmp_path):
    """Only the entries its owner registered run: a request naming an unknown entry with a
    ``command`` of its own (what the starter took before) starts nothing, and a registered entry
    runs its registered command whatever command comes with the request."""
    mark = tmp_path / "ran"
    evil = [sys.executable, "-c", f"open({str(mark)!r}, 'w').write('x')"]
    reply, passed = starter._request({"entry": "nope", "argv": [], "fds": [], "command": evil}, [])
    assert "pid" not in reply and "nope" in reply["error"]
    reply, passed = starter._request({"entry": "child", "argv": ["0", "3"], "fds": [], "command": evil}, [])
    child = starter_mod.Started(starter, int(reply["pid"]), passed[0] if passed else None, None)
    with starter.lock:
        starter.children[child.pid] = child
    assert child.wait(30) == 3              # the registered command: sleep 0, exit 3
    assert not mark.exists()


FORKED = textwrap.dedent("""
    import json, os, sys
    from vdsp_board.processes.starter import Entry, Starter

    def run(argv):
        print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "argv": argv,
                          "cmdline": open("/proc/self/cmdline", "rb").read().decode(errors="replace")}), flush=True)
        return int(argv[0])

    s = Starter("t", {"run": Entry(run, ("-c", "raise SystemExit(99)"))}, templates=True, pidfds=PIDFDS)
    assert s.forked and s.templates
    r, w = os.pipe()
    child = s.start("run", ["5", "x"], stdout=w)
    os.close(w)
    code = child.wait(30)
    said = json.loads(os.read(r, 65536))
    print(json.dumps({"code": code, "starter": s.pid, "said": said}))
    s.close()
""")


@pytest.mark.parametrize("pidfds", PIDFD_PATHS, ids=lambda p: "pidfds" if p else "no-pidfds")
def test_a_single_threaded_owner_gets_a_template_whose_forks_run_the_entry(pidfds):
    out = subprocess.run([sys.executable, "-c", FORKED.replace("PIDFDS", str(pidfds))], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    import json
    doc = json.loads(out.stdout.splitlines()[-1])
    assert doc["code"] == 5                                  # the entry's return value, as the exit status
    assert doc["said"]["ppid"] == doc["starter"]             # the starter's child, not a grandchild
    assert doc["said"]["argv"] == ["5", "x"] and "raise SystemExit(99)" not in doc["said"]["cmdline"]


def _template_starter(monkeypatch, preload_s: float) -> Starter:
    from tests.template_entries import ENTRIES
    monkeypatch.setenv("TEMPLATE_PRELOAD_S", str(preload_s))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return Starter("tmpl", ENTRIES, templates=True, pidfds=starter_mod.pidfds_available(),
                   template_command=("-m", "tests.template_entries"))


def test_a_template_starter_of_a_threaded_owner_imports_once_and_forks_its_entries(monkeypatch):
    """A process with threads (this one) cannot fork a starter of its own; its template starter is
    a fresh interpreter that imports first, then forks each entry (what ``vdsp up`` does, for a
    test's private SoC): every child inherits that one import, done by the starter."""
    import json
    s = _template_starter(monkeypatch, 0.0)
    try:
        assert s.templates and not s.forked
        for n in range(2):
            child = s.start("report", [str(n)], pipe_stdout=True)
            said = json.loads(child.stdout.readline())
            assert child.wait(30) == 0
            child.stdout.close()
            assert said == {"preloaded_by": s.pid, "ppid": s.pid, "argv": [str(n)]}
    finally:
        s.close()


def test_a_starter_slow_to_answer_but_at_work_is_waited_for(monkeypatch):
    """A template starter importing on a starved host answers late: the owner waits while the
    starter uses CPU (a slow process is not a dead one), not a fixed REPLY_TIMEOUT_S."""
    import json
    monkeypatch.setattr(starter_mod, "REPLY_TIMEOUT_S", 0.5)
    s = _template_starter(monkeypatch, 2.0)     # busy 2 s before it serves: four times the timeout
    try:
        child = s.start("report", [], pipe_stdout=True)
        assert json.loads(child.stdout.readline())["preloaded_by"] == s.pid
        assert child.wait(30) == 0
        child.stdout.close()
    finally:
        s.close()


def test_a_stopped_starter_fails_the_request_after_the_timeout(monkeypatch):
    """A starter that uses no CPU (stopped) is not waited for past REPLY_TIMEOUT_S."""
    monkeypatch.setattr(starter_mod, "REPLY_TIMEOUT_S", 0.5)
    s = _template_starter(monkeypatch, 0.0)
    try:
        time.sleep(0.2)
        os.kill(s.pid, signal.SIGSTOP)
        try:
            with pytest.raises(OSError, match="no answer within"):
                s.start("report", [])
        finally:
            os.kill(s.pid, signal.SIGCONT)
    finally:
        s.close()


def test_a_starter_at_work_is_waited_for_at_most_reply_most_s(monkeypatch):
    """A starter that keeps using CPU and never answers (it spins) is given up at REPLY_MOST_S."""
    monkeypatch.setattr(starter_mod, "REPLY_TIMEOUT_S", 0.5)
    monkeypatch.setattr(starter_mod, "REPLY_MOST_S", 1.5)
    s = _template_starter(monkeypatch, 60.0)    # busy for a minute before it would serve
    try:
        with pytest.raises(OSError, match="busy but no answer within"):
            s.start("report", [])
    finally:
        s.close()

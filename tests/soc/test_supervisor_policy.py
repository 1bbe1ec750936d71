"""The supervisor's restart policy and state file, driven with fake processes and a fake clock."""
from __future__ import annotations

import json
import os
import stat

import pytest

from vdsp_sim.soc import supervisor
from vdsp_sim.commands import status as status_cmd
from vdsp_board.processes.pidfile import SUPERVISOR_STATE, StateFile, supervisor_state
from vdsp_sim.soc.supervisor import Child, Supervisor


class FakeProc:
    _next_pid = 1000

    def __init__(self) -> None:
        FakeProc._next_pid += 1
        self.pid, self.returncode = FakeProc._next_pid, None

    def poll(self):
        return self.returncode


@pytest.fixture
def sup(tmp_path, monkeypatch):
    s = Supervisor(tmp_path, restart=True)
    monkeypatch.setattr(s, "_spawn", lambda child: setattr(child, "proc", FakeProc()))
    for name in ("vdsp0", "vdsp1", "relay"):
        s.children[name] = Child(name, ["true"])
        s._spawn(s.children[name])
    return s


def state(sup) -> dict:
    return json.loads((sup.rt / SUPERVISOR_STATE).read_text())["processes"]


def test_restart_at_once_then_doubling_backoff_then_give_up(sup):
    child, t = sup.children["vdsp1"], 100.0
    waits = []
    for n in range(1, 6):
        child.proc.returncode = -9 if n == 1 else 1
        sup.tick(t)
        if child.gave_up:
            break
        if child.restart_at is None:                 # restarted in the same tick
            waits.append(0.0)
        else:
            waits.append(round(child.restart_at - t, 2))
            sup.tick(child.restart_at - 0.01)        # not yet
            assert child.state == "restarting"
            t = child.restart_at
            sup.tick(t)                              # due: a new process
        assert child.state == "running" and child.restarts == n
        t += 0.3                                     # it fails fast again
    assert waits == [0.0, 0.5, 1.0, 2.0]
    assert child.gave_up and child.state == "gave-up" and child.restarts == 4 and child.last_exit == 1
    sup.tick(t + 100)                                # given up: never restarted again
    assert child.restarts == 4
    st = state(sup)
    assert st["vdsp1"]["gave_up"] and st["vdsp1"]["state"] == "gave-up" and st["vdsp1"]["last_exit"] == 1
    assert st["vdsp1"]["last_exit_text"] == "exit 1" and st["vdsp1"]["restarts"] == 4
    assert st["vdsp0"] == {**st["vdsp0"], "state": "running", "restarts": 0, "gave_up": False, "last_exit": None}


def test_exits_outside_the_window_are_forgotten(sup):
    child, t = sup.children["relay"], 0.0
    for n in range(1, 11):                             # one exit a minute: always restarted at once
        child.proc.returncode = -9
        sup.tick(t)
        assert child.state == "running" and child.restarts == n
        t += supervisor.RESTART_WINDOW_S + 1
    assert child.restarts == 10 and state(sup)["relay"]["last_exit_text"] == "killed by SIGKILL"


def test_backoff_is_capped():
    child = Child("x", [])
    child.exits.extend(range(50))
    assert child.backoff() == supervisor.BACKOFF_CAP_S


def test_nothing_restarts_while_stopping(sup):
    sup.stopping = True
    sup.children["vdsp0"].proc.returncode = 0
    sup.tick(1.0)
    assert sup.children["vdsp0"].restarts == 0


def test_state_file_is_private_and_replaced_whole(tmp_path):
    f = StateFile(tmp_path / "s.json")
    old = os.umask(0)
    try:
        f.write({"a": 1})
        f.write({"a": 2})
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(f.path).st_mode) == 0o600
    assert f.read() == {"a": 2} and [p.name for p in tmp_path.iterdir()] == ["s.json"]
    f.path.write_text("{not json")
    assert f.read() is None


def test_a_state_file_of_a_dead_supervisor_is_ignored(tmp_path):
    (tmp_path / "soc.pid").write_text("999999999\n")
    StateFile(tmp_path / SUPERVISOR_STATE).write({"supervisor_pid": 999999999, "processes": {}})
    assert supervisor_state(tmp_path) is None
    (tmp_path / "soc.pid").write_text(f"{os.getpid()}\n")
    StateFile(tmp_path / SUPERVISOR_STATE).write({"supervisor_pid": os.getpid(), "processes": {}})
    assert supervisor_state(tmp_path)["supervisor_pid"] == os.getpid()


def test_status_text_shows_restarts_and_give_ups(capsys):
    status_cmd._print_supervisor({"pid": 42, "state": "running", "restart_policy": {"burst": 5, "window_s": 30.0},
                           "processes": {
                               "vdsp0": {"pid": 7, "state": "running", "restarts": 1, "last_exit_text": "killed by SIGKILL",
                                         "gave_up": False, "restart_in_s": None},
                               "vdsp1": {"pid": 8, "state": "gave-up", "restarts": 4, "last_exit_text": "exit 1",
                                         "gave_up": True, "recent_exits": 5, "restart_in_s": None}}})
    out = capsys.readouterr().out
    assert "gives a process up after 5 exits within 30.0 s" in out
    assert "killed by SIGKILL" in out and "gave up" in out and "not restarted" in out


def test_the_next_tick_is_the_next_due_restart_or_the_idle_period(sup):
    assert sup.next_tick_s(50.0) == supervisor.IDLE_TICK_S       # nothing due: sleep (an exit wakes it)
    sup.children["vdsp0"].restart_at = 50.3
    sup.children["relay"].restart_at = 50.7
    assert sup.next_tick_s(50.0) == pytest.approx(0.3)
    assert sup.next_tick_s(51.0) == 0.0                          # overdue: at once


def test_supervise_wakes_when_a_child_exits_not_at_its_idle_period(tmp_path, monkeypatch):
    # `vdsp up` sleeps between ticks; a child's exit (reported by the starter on its socket) must
    # end the sleep at once
    import time
    from vdsp_board.processes.starter import Entry, Starter
    monkeypatch.setattr(supervisor, "IDLE_TICK_S", 30.0)
    s = Supervisor(tmp_path, restart=True)
    s.starter = Starter("test", {"sleep": Entry(lambda argv: 0, ("-c", "import time; time.sleep(0.5)"))},
                        templates=False)
    try:
        child = s.children["relay"] = Child("relay", "sleep")
        child.proc = s.starter.start("sleep", [])
        monkeypatch.setattr(s, "_spawn", lambda c: setattr(c, "proc", FakeProc()))
        t0 = time.monotonic()
        s.supervise(lambda: child.restarts >= 1 or time.monotonic() - t0 > 20)
        assert child.restarts == 1 and child.last_exit == 0
        assert time.monotonic() - t0 < 15      # not at the 30 s tick (nor the 20 s guard)
    finally:
        s.starter.close()

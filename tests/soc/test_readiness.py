"""What a start waits for and when it gives up, without processes (vdsp_sim/soc/readiness.py): the
verdict on the cores' status, and the start clock that does not count time starved of CPU.
The live side: tests/integration/test_start_deadline.py."""
from __future__ import annotations

import pytest

from arm_side import autostart
from vdsp_sim.soc import readiness
from vdsp_sim.soc.readiness import StartClock, verdict
from vdsp_sim.soc.supervisor import last_error


def core(name="vdsp0", state="running", reason="", fw_link="ready", fw_refused=""):
    return {"name": name, "state": state, "reason": reason, "fw_link": fw_link, "fw_refused": fw_refused}


def test_every_core_running_with_its_firmware_accepting_the_relay_is_ready():
    assert verdict({"cores": [core(), core("vdsp1")]}, relay=True).ready
    assert verdict({"cores": [core(fw_link="greeting"), core("vdsp1")]}, relay=True) == readiness.StartVerdict(
        False, None, "vdsp0 running, its firmware has not answered the relay's HELLO yet")
    # direct mode: the cores' own status has no firmware link of the relay's
    assert verdict({"cores": [{"name": "vdsp0", "state": "running"}]}, relay=False).ready
    assert verdict({"cores": []}, relay=True) == readiness.StartVerdict(False, None, "no core has answered yet")


def test_a_core_still_booting_or_restarting_is_waited_for():
    v = verdict({"cores": [core(state="offline"), core("vdsp1", state="crashed", reason="crash: exception")]},
                relay=True)
    assert (v.ready, v.fatal, v.missing) == (False, None, "vdsp0 offline; vdsp1 crashed (crash: exception)")
    assert verdict({"cores": [core(state="unreachable")]}, relay=False).fatal is None


def test_a_boot_failure_or_a_refused_relay_is_fatal_naming_the_core_and_the_reason():
    why = "could not bind ipc:///r/vdsp0.fw.sock: Address already in use"
    v = verdict({"cores": [core(state="offline", reason=f"boot failed: {why}"),
                           core("vdsp1", fw_link="refused", fw_refused="cannot tell which process opened this")]},
                relay=True)
    assert not v.ready
    assert v.fatal == (f"vdsp0's firmware failed to boot: {why}; "
                       "vdsp1's firmware refused the relay: cannot tell which process opened this")


class Delays:
    """What "the kernel" says each pid has waited for a CPU, in seconds."""

    def __init__(self) -> None:
        self.waited: dict[int, float] = {}

    def __call__(self, pid: int) -> float | None:
        return self.waited.get(pid)


def test_the_start_clock_counts_wall_time_when_nothing_waits_for_a_cpu():
    clock = StartClock(10.0, now=100.0, delay=Delays())
    clock.sample([1, 2])
    assert not clock.expired(109.9) and clock.expired(110.0)
    assert clock.describe(110.0) == "10 s"


def test_time_starved_of_cpu_does_not_count_up_to_three_times_the_timeout():
    delays = Delays()
    delays.waited = {1: 5.0, 2: 0.5}
    clock = StartClock(10.0, now=100.0, delay=delays)
    clock.sample([1, 2])                   # the first look: what they had waited before
    delays.waited = {1: 11.0, 2: 3.0}      # the most starved waited 6 s more
    clock.sample([1, 2])
    assert clock.elapsed(112.0) == pytest.approx(6.0)
    assert not clock.expired(115.9) and clock.expired(116.0)
    assert clock.describe(116.0) == "10 s (16.0 s, 6.0 s of it waiting for a CPU)"
    delays.waited = {1: 1000.0}            # however starved: 3 x the timeout at most
    clock.sample([1])
    assert not clock.expired(129.9) and clock.expired(130.0)


def test_no_wait_of_the_start_outlasts_its_deadline():
    delays = Delays()
    clock = StartClock(10.0, now=0.0, delay=delays)
    assert clock.left(0.0, 5.0) == 5.0 and clock.left(8.0, 5.0) == pytest.approx(2.0)
    assert clock.left(12.0, 5.0) == 0.05            # past it: a last short look
    delays.waited = {1: 0.0}
    clock.sample([1])
    delays.waited = {1: 100.0}                      # starved: the 3 x cap is what is left
    clock.sample([1])
    assert clock.left(28.0, 5.0) == pytest.approx(2.0)
    assert StartClock(None, now=0.0).left(1e6, 5.0) == 5.0


def test_a_pid_seen_later_or_gone_keeps_what_it_waited_and_no_timeout_never_expires():
    delays = Delays()
    clock = StartClock(None, now=0.0, delay=delays)
    delays.waited = {7: 2.0}
    clock.sample([7])
    delays.waited = {7: 4.0}
    clock.sample([7])
    delays.waited = {}                     # it exited: what it waited stays counted
    clock.sample([7])
    assert clock.starved_s == pytest.approx(2.0)
    assert not clock.expired(1e9)


def test_a_kernel_without_schedstat_counts_wall_time():
    assert readiness.run_delay_s(2 ** 22 + 12345) is None     # no such pid
    clock = StartClock(1.0, now=0.0, delay=lambda pid: None)
    clock.sample([1])
    assert clock.expired(1.0)


def test_the_last_error_of_a_log(tmp_path):
    log = tmp_path / "vdsp0.log"
    log.write_text("[I][DSP][a.py:1][[..]] starting\n"
                   "Traceback (most recent call last):\n"
                   '  File "x.py", line 1, in <module>\n'
                   "zmq.error.ZMQError: Address already in use (addr='ipc:///r/vdsp0.sock')\n"
                   "[I][DSP][kmsg.py:29][[..]] stays offline\n")
    assert last_error(log) == "zmq.error.ZMQError: Address already in use (addr='ipc:///r/vdsp0.sock')"
    log.write_text(log.read_text() + "[E][DSP][core.py:9][[..]] vdsp0: it went wrong\n")
    assert last_error(log) == "[E][DSP][core.py:9][[..]] vdsp0: it went wrong"
    assert last_error(tmp_path / "missing.log") is None


def test_the_sdk_says_why_a_supervised_start_failed(tmp_path, monkeypatch):
    """While 'vdsp up' stops a SoC whose start failed, a client waiting for its relay is told why."""
    state = {"supervisor_pid": 1, "state": "failed", "reason": "vdsp0's firmware refused the relay: no pidfd",
             "processes": {}}
    monkeypatch.setattr(autostart, "PidFile", lambda path: type("P", (), {"read": lambda self: 1})())
    monkeypatch.setattr(autostart, "supervisor_state", lambda rt: state)
    assert autostart.supervisor_problem(tmp_path) == \
        f"the SoC in {tmp_path} failed to start: vdsp0's firmware refused the relay: no pidfd"
    state["state"] = "running"
    assert autostart.supervisor_problem(tmp_path) is None


def test_the_start_timeout_is_the_environments(monkeypatch):
    """VDSP_START_TIMEOUT sets `vdsp up`'s and a private SoC's start timeout (a slow host raises
    it: an emulated CPU took 109 s to start a SoC); 0 is no limit; unset, 60 s."""
    from vdsp_sim.soc import private_soc
    monkeypatch.delenv("VDSP_START_TIMEOUT", raising=False)
    assert readiness.start_timeout_s() == 60.0
    monkeypatch.setenv("VDSP_START_TIMEOUT", "240")
    assert readiness.start_timeout_s() == 240.0
    assert private_soc.PrivateSocConfig().ready_timeout_s == 240.0
    monkeypatch.setenv("VDSP_START_TIMEOUT", "0")
    assert readiness.start_timeout_s() is None

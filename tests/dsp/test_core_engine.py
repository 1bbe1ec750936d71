"""A core's conversation without sockets or processes: HELLO/READY, CONTROL on the remoteproc
device, the firmware's boot, crash, watchdog and recovery, driven through ``CoreEngine``."""
from __future__ import annotations

from protocol import errors, messages, wire
from protocol.constants import Command
from protocol.remoteproc import Action
from dsp_side.core_effects import Boot, Coredump, KillFw, KmsgLine, StopFw, ToPeer
from dsp_side.core_engine import CoreEngine
from dsp_side.remoteproc import Device

PEER = b"\x00relay"
INFO = {"version": "1.2.3", "operators": [{"id": 0, "name": "ping"}]}


class Core:
    def __init__(self, **kw) -> None:
        self.now = 50.0
        self.e = CoreEngine("vdsp0", "ipc:///x/vdsp0.fw.sock", Device("vdsp0", "vdsp0"), heartbeat_ms=500,
                            watchdog_s=2.0, pid=321, coredump_dir="/rt/coredump", **kw)

    def take(self) -> list:
        out, self.e.out = self.e.out, []
        return out

    def send(self, msg, peer: bytes = PEER, name: str = "") -> None:
        self.e.on_message(peer, wire.encode(msg), self.now, name)

    def boot(self) -> None:
        """Autostart, the adapter's successful boot and the firmware's READY."""
        self.e.start()
        assert self.take() == [Boot(Action.BOOT)]
        self.e.fw_booted(999, "install (ed25519:ab)", self.now)
        self.e.fw_ready(INFO)


def sent(out, peer: bytes = PEER) -> list[wire.Message]:
    return [wire.decode(o.frames) for o in out if isinstance(o, ToPeer) and o.identity == peer]


def kmsgs(out) -> list[str]:
    return [o.line for o in out if isinstance(o, KmsgLine)]


def test_hello_gets_ready_with_the_firmware_endpoint_and_state():
    c = Core()
    c.boot()
    c.take()
    c.send(messages.hello(7, "relay"))
    (ready,) = sent(c.take())
    assert ready.command is Command.READY and ready.msg_id == 7
    body = ready.body
    assert (body["state"], body["fw_endpoint"], body["firmware_version"], body["pid"], body["fw_pid"]) == \
        ("running", "ipc:///x/vdsp0.fw.sock", "1.2.3", 321, 999)


def test_ready_tells_the_watchdog_and_the_longest_sleep_the_firmware_takes():
    """A client learned the core's watchdog only by being refused; READY now says it."""
    c = Core()          # watchdog_s=2.0
    c.boot()
    c.take()
    c.send(messages.hello(7, "relay"))
    (ready,) = sent(c.take())
    assert (ready.body["watchdog_ms"], ready.body["max_sleep_ms"]) == (2000, 1600)   # 80 % of it


def test_stop_then_start_through_control_events_before_replies():
    c = Core()
    c.boot()
    c.send(messages.hello(1, "relay"))
    c.take()
    c.send(messages.control(2, "vdsp0", "state", "stop"))
    out = c.take()
    assert StopFw() in out and "stopped remote processor vdsp0" in kmsgs(out)
    event, result = sent(out)
    assert event.command is Command.EVENT and event.body["state"] == "offline"
    assert result.msg_id == 2 and result.body == {"value": "offline"}
    c.send(messages.control(3, "vdsp0", "state", "start"))
    assert c.take() == [Boot(Action.BOOT)]           # answered when the firmware is up
    c.e.fw_booted(1000, "install", c.now)
    c.e.fw_ready(INFO)
    event, result = sent(c.take())
    assert event.body["state"] == "running" and event.body["reason"] == "booted"
    assert result.msg_id == 3 and result.body == {"value": "running"}


def test_a_boot_that_fails_ends_at_once_offline_with_the_error():
    c = Core()
    c.send(messages.hello(1, "relay"))
    c.take()
    c.send(messages.control(2, "vdsp0", "state", "start"))
    c.take()
    c.e.boot_failed(errors.RemoteprocNoEnt("vdsp0: no image vdsp0"))
    event, reply = sent(c.take())
    assert event.body["state"] == "offline" and "boot failed" in event.body["reason"]
    assert reply.command is Command.ERROR and reply.body["code"] == errors.RemoteprocNoEnt.code
    assert c.e.device.state.value == "offline" and c.e.device.busy is None


def test_a_firmware_that_cannot_serve_says_why_and_a_peer_that_comes_later_is_told_too():
    """A firmware that could not bind its endpoint reports ``{"failed": why}``: the EVENT, the
    kernel log and the READY of a peer that says HELLO only afterwards (a relay started late)
    carry that reason, not only "exit 3"."""
    c = Core()
    c.send(messages.hello(1, "relay"))
    c.e.start()
    c.e.fw_booted(999, "install", c.now)
    c.take()
    why = "could not bind ipc:///x/vdsp0.fw.sock: Address already in use"
    c.e.fw_died("exit 3", {}, None, why)
    out = c.take()
    (event,) = sent(out)
    assert (event.body["state"], event.body["reason"]) == ("offline", f"boot failed: {why}")
    assert f"vdsp0: firmware vdsp0 failed to boot: {why}" in kmsgs(out)
    c.send(messages.hello(2, "relay"), peer=b"\x00late")
    (ready,) = sent(c.take(), b"\x00late")
    assert (ready.body["state"], ready.body["reason"]) == ("offline", f"boot failed: {why}")


def test_a_crash_is_counted_dumped_broadcast_and_recovered():
    c = Core()
    c.boot()
    c.send(messages.hello(1, "relay"))
    c.send(messages.control(2, "vdsp0", "coredump", "enabled"))
    c.take()
    report = {"task": {"msg_id": 5, "name": "raise_error"}, "traceback": "RuntimeError: bug"}
    c.e.fw_died("exception", report)
    out = c.take()
    assert kmsgs(out)[:1] == ["crash detected in vdsp0: type exception"]
    (dump,) = [(o.path, o.dump) for o in out if isinstance(o, Coredump)]
    assert dump[0] == "/rt/coredump/vdsp0-crash1.json" and dump[1]["traceback"] == "RuntimeError: bug"
    (event,) = sent(out)
    assert event.body["state"] == "crashed" and event.body["crash"]["type"] == "exception"
    assert event.body["crash"]["coredump"] == dump[0] and event.body["crash_count"] == 1
    assert out[-1] == Boot(Action.RECOVER)
    c.e.fw_died("exception", {})           # only the first crash is handled (no firmware now)
    assert not any(isinstance(o, Boot) for o in c.take())


def test_recovery_disabled_stays_crashed():
    c = Core()
    c.boot()
    c.send(messages.control(2, "vdsp0", "recovery", "disabled"))
    c.take()
    c.e.fw_died("killed by SIGKILL", {})
    assert not any(isinstance(o, Boot) for o in c.take()) and c.e.device.state.value == "crashed"


def test_the_watchdog_kills_a_stuck_or_silent_firmware_and_a_boot_that_never_ends():
    c = Core()
    c.boot()
    c.take()
    c.e.tick(c.now, (0.1, 0, 0.5))
    assert not any(isinstance(o, KillFw) for o in c.take())
    c.e.tick(c.now, (0.1, 44, 2.5))               # one task for 2.5 s, the watchdog is 2 s
    assert KillFw("watchdog") in c.take()
    c.e.tick(c.now, (3.0, 0, 0.0))                # silent
    assert KillFw("watchdog") in c.take()
    c2 = Core()
    c2.e.start()
    c2.e.fw_booted(5, "x", c2.now)
    c2.take()
    c2.e.tick(c2.now + 61)                        # no READY within the boot timeout
    assert KillFw("boot-timeout") in c2.take()


def test_peers_get_heartbeats_and_a_silent_one_is_dropped():
    c = Core()
    c.send(messages.hello(1, "client"))
    c.take()
    c.now += 0.6
    c.e.tick(c.now)
    assert [m.command for m in sent(c.take())] == [Command.HEARTBEAT]
    c.now += 21          # past the hung deadline (20 s)
    c.e.tick(c.now)
    assert PEER not in c.e.peers


def test_writes_need_an_admin_over_tcp_and_tasks_are_sent_to_the_firmware_endpoint():
    c = Core(admin_only_writes=True, is_admin=lambda name: name.startswith("admin:"))
    c.boot()
    c.take()
    c.send(messages.control(2, "vdsp0", "recovery", "disabled"), name="client:alice")
    (denied,) = sent(c.take())
    assert denied.body["code"] == errors.RemoteprocDenied.code
    c.send(messages.control(3, "vdsp0", "state"), name="client:alice")      # reading is fine
    assert sent(c.take())[0].body == {"value": "running"}
    c.send(messages.control(4, "vdsp0", "recovery", "disabled"), peer=b"\x00adm", name="admin:ops")
    assert sent(c.take(), b"\x00adm")[0].body == {"value": "disabled"}
    c.send(messages.task(5, 0, inputs=[], outputs=[]))
    (refused,) = sent(c.take())
    assert refused.body["code"] == errors.ApiUseError.code and "fw.sock" in refused.body["message"]


def test_a_peer_silent_for_seconds_is_still_heartbeaten_and_one_silent_past_the_deadline_is_dropped():
    """A starved relay misses beats; the core must not stop heartbeating it (it would then take
    the core for dead in turn)."""
    c = Core(hung_ms=20_000)
    c.boot()
    c.send(messages.hello(1, "relay"))
    c.take()
    c.now += 10
    c.e.tick(c.now)
    assert PEER in c.e.peers and [m.command for m in sent(c.take())] == [Command.HEARTBEAT]
    c.now += 11
    c.e.tick(c.now)
    assert PEER not in c.e.peers


def test_a_firmware_whose_beat_is_late_is_killed_only_if_its_process_is_stopped_or_idle():
    from protocol.liveness import ProcFact
    facts = {999: ProcFact.PROGRESSING}
    c = Core(facts=lambda pid, now: facts.get(pid, ProcFact.UNKNOWN))
    c.boot()
    c.take()
    c.e.tick(c.now, (3.0, 0, 0.0))                # no beat for 3 s (watchdog 2 s), but it runs: starved
    assert not any(isinstance(o, KillFw) for o in c.take())
    c.e.tick(c.now, (1.0, 44, 2.5))               # a task past the watchdog is killed, starved or not
    assert KillFw("watchdog") in c.take()
    facts[999] = ProcFact.STOPPED
    c.e.tick(c.now, (3.0, 0, 0.0))
    assert KillFw("watchdog") in c.take()


def test_a_slow_boot_goes_on_while_the_firmware_process_progresses():
    from protocol.liveness import ProcFact
    facts = {5: ProcFact.PROGRESSING}
    c = Core(facts=lambda pid, now: facts.get(pid, ProcFact.UNKNOWN))
    c.e.start()
    c.e.fw_booted(5, "x", c.now)
    c.take()
    c.e.tick(c.now + 61)                          # past the boot timeout, but it imports and unpacks
    assert KillFw("boot-timeout") not in c.take()
    facts[5] = ProcFact.STOPPED
    c.e.tick(c.now + 62)
    assert KillFw("boot-timeout") in c.take()
    READY_HUNG = Core(hung_ms=7000)
    READY_HUNG.send(messages.hello(1, "client"))
    (ready,) = sent(READY_HUNG.take())
    assert ready.body["hung_ms"] == 7000          # direct clients take the core's deadline

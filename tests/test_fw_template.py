"""Firmwares forked from the core's firmware template (dsp_side/fwtemplate.py): each firmware is
a separate process and the core's own child, a recovery reuses the template, nothing outlives
the core, and ``VDSP_FW_TEMPLATE=0`` boots ``python -m dsp_side.firmware`` as before."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from arm_side import CORE_0, CORE_1, Soc, errors, opids
from tests.conftest import wait_until
from tests.live import LiveSoc
from vdsp_sim.private_soc import children

pytestmark = pytest.mark.live


def comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def ping_ok(soc, core) -> bool:
    try:
        return bool(soc.rpc(opids.PING, core=core).wait(2000))
    except errors.VdspError:
        return False


def template_of(live_soc, core: str, fw: int) -> int:
    others = [p for p in children(live_soc.pid(core)) if p != fw]
    assert len(others) == 1, f"{core} has children {children(live_soc.pid(core))}, firmware {fw}"
    return others[0]


def test_the_firmware_is_forked_from_the_template_and_is_the_cores_child(live_soc):
    for core, core_id in (("vdsp0", CORE_0), ("vdsp1", CORE_1)):
        fw = live_soc.fw_pid(core)
        assert ppid(fw) == live_soc.pid(core)       # the core's child: it waits for it and reads its status
        assert comm(fw) == f"{core}.fw"
        template = template_of(live_soc, core, fw)
        assert comm(template) == f"{core}.template"
        assert threads(template) == 1               # forking it is safe: no thread holds a lock
        cmd = Path(f"/proc/{fw}/cmdline").read_bytes()
        assert b"dsp_side.firmware" not in cmd      # not a fresh interpreter
    with Soc() as soc:
        assert soc.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
        assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}


def test_a_killed_firmware_is_forked_again_from_the_same_template(live_soc):
    old = live_soc.fw_pid("vdsp0")
    template = template_of(live_soc, "vdsp0", old)
    with Soc() as soc:
        assert ping_ok(soc, CORE_0)
        os.kill(old, signal.SIGKILL)
        assert wait_until(lambda: ping_ok(soc, CORE_0), 30), "vdsp0 did not recover"
    new = live_soc.fw_pid("vdsp0")
    assert new != old and not alive(old)
    assert ppid(new) == live_soc.pid("vdsp0") and comm(new) == "vdsp0.fw"
    assert template_of(live_soc, "vdsp0", new) == template      # no new template: a recovery is a fork
    dmesg = (live_soc.rt / "dmesg").read_text()
    assert "crash detected in vdsp0: type killed by SIGKILL" in dmesg
    assert dmesg.count("remote processor vdsp0 is now up") == 2


def test_a_killed_core_takes_its_template_and_firmware_with_it(live_soc):
    core = live_soc.pid("vdsp1")
    fw = live_soc.fw_pid("vdsp1")
    template = template_of(live_soc, "vdsp1", fw)
    os.kill(core, signal.SIGKILL)
    assert wait_until(lambda: not alive(fw) and not alive(template), 10), \
        f"firmware {fw} or template {template} outlived its core"


def test_a_crashing_operator_kills_only_the_forked_firmware(live_soc):
    core = live_soc.pid("vdsp0")
    fw = live_soc.fw_pid("vdsp0")
    with Soc() as soc:
        os.kill(fw, signal.SIGSEGV)     # what a segfault in operator code does
        assert wait_until(lambda: ping_ok(soc, CORE_0), 30), "vdsp0 did not recover"
    assert alive(core) and live_soc.pid("vdsp0") == core
    assert "crash detected in vdsp0: type killed by SIGSEGV" in (live_soc.rt / "dmesg").read_text()


def test_without_the_template_the_firmware_is_a_fresh_interpreter(runtime_env, monkeypatch):
    monkeypatch.setenv("VDSP_FW_TEMPLATE", "0")
    soc = LiveSoc(runtime_env)
    soc.start()
    try:
        fw = soc.fw_pid("vdsp0")
        assert b"dsp_side.firmware" in Path(f"/proc/{fw}/cmdline").read_bytes()
        assert children(soc.pid("vdsp0")) == [fw]
        with Soc() as client:
            assert client.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
    finally:
        soc.stop_and_check()


def test_vdsp_up_forks_the_cores_from_one_soc_template_and_down_leaves_nothing(runtime_env, monkeypatch):
    """``vdsp up``: one template for the SoC; the cores are forked from it (and are the
    supervisor's children), each core forks its own firmware template, and so the imports of
    all of them are in memory once. A killed core is forked again; ``vdsp down`` ends them all."""
    from tests.supervised import VDSP, down_and_check, run, rt_processes
    from tests.live import shm_entries
    from vdsp_board.pidfile import PidFile
    monkeypatch.delenv("VDSP_SOC_TEMPLATE", raising=False)     # the default (see dsp_side/fwtemplate.py)
    before = shm_entries()
    res = run(VDSP + ["up", "-d"], runtime_env)
    try:
        assert res.returncode == 0, res.stdout + res.stderr
        sup = PidFile(runtime_env / "soc.pid").read()
        kids = {comm(p): p for p in children(sup)}
        assert set(kids) == {"soc.template", "vdsp0", "vdsp1", "relay"}, kids
        assert threads(kids["soc.template"]) == 1
        for core in ("vdsp0", "vdsp1"):
            assert sorted(comm(p) for p in children(kids[core])) == [f"{core}.fw", f"{core}.template"]
        old_fw = [p for p in children(kids["vdsp1"]) if comm(p) == "vdsp1.fw"]
        with Soc(autostart_relay=False) as soc:
            assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}
            os.kill(kids["vdsp1"], signal.SIGKILL)
            assert wait_until(lambda: not any(alive(p) for p in old_fw), 10), "the firmware outlived its core"
            assert wait_until(lambda: ping_ok(soc, CORE_1), 30), "vdsp1 did not come back"
        again = {comm(p): p for p in children(sup)}
        assert again["vdsp1"] != kids["vdsp1"] and again["soc.template"] == kids["soc.template"]
        assert not alive(kids["vdsp1"])
        assert sorted(comm(p) for p in children(again["vdsp1"])) == ["vdsp1.fw", "vdsp1.template"]
        everything = rt_processes(runtime_env)
        assert len(everything) == 9, everything     # supervisor, relay, soc template, 2 x (core, template, fw)
    finally:
        down_and_check(runtime_env, before)

"""Firmwares forked from the core's starter (vdsp_board/processes/starter.py, a template that imported what
firmwares run): each firmware is a separate process and the starter's own child, a recovery
reuses the starter, nothing outlives the core, ``VDSP_FW_TEMPLATE=0`` boots ``python -m
dsp_side.firmware`` as before, and each process says its role in ``ps`` (its command line)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from arm_side import CORE_0, CORE_1, Soc, errors, opids
from tests.conftest import wait_until
from tests.live import LiveSoc
from vdsp_sim.soc.private_soc import children

pytestmark = pytest.mark.live


def comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def cmdline(pid: int) -> str:
    """What ``ps aux`` shows of ``pid``: its command line (NULs as spaces)."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()


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
    """The core's starter: its one child, the firmware's parent."""
    kids = children(live_soc.pid(core))
    assert kids == [ppid(fw)], f"{core} has children {kids}, firmware {fw} has parent {ppid(fw)}"
    return kids[0]


def test_the_firmware_is_forked_from_the_starter_and_is_its_child(live_soc):
    for core, core_id in (("vdsp0", CORE_0), ("vdsp1", CORE_1)):
        fw = live_soc.fw_pid(core)
        template = template_of(live_soc, core, fw)
        assert ppid(fw) == template and children(template) == [fw]   # it waits for it and reports its status
        assert comm(fw) == f"{core}.fw" and cmdline(fw) == f"vdsp: {core} firmware"
        assert comm(template) == f"{core}.starter" and cmdline(template) == f"vdsp: {core} starter"
        assert cmdline(live_soc.pid(core)) == f"vdsp: {core} core"
        assert threads(template) == 1               # forking it is safe: no thread holds a lock
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
    assert comm(new) == "vdsp0.fw"
    assert template_of(live_soc, "vdsp0", new) == template      # no new starter: a recovery is a fork
    dmesg = (live_soc.rt / "dmesg").read_text()
    assert "crash detected in vdsp0: type killed by SIGKILL" in dmesg
    assert dmesg.count("remote processor vdsp0 is now up") == 2


def test_a_killed_core_takes_its_starter_and_firmware_with_it(live_soc):
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
        assert cmdline(fw) == "vdsp: vdsp0 firmware"        # its title, once it runs
        starter = ppid(fw)
        assert children(soc.pid("vdsp0")) == [starter] and comm(starter) == "vdsp0.starter"
        # the starter imported none of what firmwares run (no template): the firmware imported it all
        assert "numpy" not in Path(f"/proc/{starter}/maps").read_text()
        assert "numpy" in Path(f"/proc/{fw}/maps").read_text()
        with Soc() as client:
            assert client.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
    finally:
        soc.stop_and_check()


def test_the_module_protocol_md_names_for_a_fresh_firmware_is_the_one_started_and_runs():
    """PROTOCOL.md §1, the firmware row: "... or `python -m dsp_side.firmware_main`". That is the
    command a starter without templates runs, and ``python -m`` runs it in this build: with the
    compiled build (the suite's 3.11 run) ``dsp_side.firmware`` is an extension module, which
    ``-m`` cannot run ("No code object available")."""
    from dsp_side import core_main
    row = next(line for line in (Path(__file__).parents[2] / "PROTOCOL.md").read_text().splitlines()
               if line.startswith("| firmware (task endpoint)"))
    module = re.search(r"`python -m ([\w.]+)`", row).group(1)
    assert core_main.FIRMWARE["firmware"].command == ("-m", module)
    res = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert f"usage: python -m {module} " in res.stdout


def test_vdsp_up_forks_the_cores_from_one_soc_starter_and_down_leaves_nothing(runtime_env, monkeypatch):
    """``vdsp up``: one starter for the SoC, the supervisor's only child; the cores and the relay are
    forked from it (and are its children), each core makes its own starter, and so the imports of
    all of them are in memory once. Each process says its role in ``ps`` (PostgreSQL's way): before,
    nine identical ``... vdsp up -d`` lines. A killed core is forked again; ``vdsp down`` ends them all."""
    from tests.supervised import VDSP, down_and_check, run, rt_processes
    from tests.live import shm_entries
    from vdsp_board.processes.pidfile import PidFile
    monkeypatch.delenv("VDSP_SOC_TEMPLATE", raising=False)     # the default (see vdsp_board/processes/starter.py)
    before = shm_entries()
    res = run(VDSP + ["up", "-d"], runtime_env)
    try:
        assert res.returncode == 0, res.stdout + res.stderr
        sup = PidFile(runtime_env / "soc.pid").read()
        assert sup is not None and cmdline(sup) == "vdsp: supervisor"
        [soc_starter] = children(sup)
        assert (comm(soc_starter), cmdline(soc_starter)) == ("soc.starter", "vdsp: soc starter")
        assert threads(soc_starter) == 1
        kids = {comm(p): p for p in children(soc_starter)}
        assert set(kids) == {"vdsp0", "vdsp1", "relay"}, kids
        assert cmdline(kids["relay"]) == "vdsp: relay"
        titles = {}
        for core in ("vdsp0", "vdsp1"):
            assert cmdline(kids[core]) == f"vdsp: {core} core"
            [starter] = children(kids[core])
            [fw] = children(starter)
            titles[core] = (cmdline(starter), cmdline(fw))
        assert titles == {c: (f"vdsp: {c} starter", f"vdsp: {c} firmware") for c in ("vdsp0", "vdsp1")}
        old_fw = [p for p in children(children(kids["vdsp1"])[0]) if comm(p) == "vdsp1.fw"]
        with Soc(autostart_relay=False) as soc:
            assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}
            os.kill(kids["vdsp1"], signal.SIGKILL)
            assert wait_until(lambda: not any(alive(p) for p in old_fw), 10), "the firmware outlived its core"
            assert wait_until(lambda: ping_ok(soc, CORE_1), 30), "vdsp1 did not come back"
        assert children(sup) == [soc_starter]
        again = {comm(p): p for p in children(soc_starter)}
        assert again["vdsp1"] != kids["vdsp1"] and not alive(kids["vdsp1"])
        assert cmdline(again["vdsp1"]) == "vdsp: vdsp1 core"
        assert [comm(p) for p in children(again["vdsp1"])] == ["vdsp1.starter"]
        everything = rt_processes(runtime_env)
        assert len(everything) == 9, everything     # supervisor, relay, soc starter, 2 x (core, starter, fw)
    finally:
        down_and_check(runtime_env, before)

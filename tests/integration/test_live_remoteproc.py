"""Firmware images and the remoteproc lifecycle against a live SoC."""
from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from arm_side import CORE_0, CORE_1, Soc, errors, opids
from dsp_side import fw_image
from vdsp_board.processes import rundir
from tests.conftest import wait_until
from tests.live import LiveSoc

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
FAULTY = ROOT / "tests" / "firmware_src" / "faulty"
RAISE, KILL, HANG, REFUSE = 0x1400, 0x1401, 0x1402, 0x1403


def build_version(src: Path, version: str, out: Path, tmp: Path) -> None:
    """Build ``src`` with VERSION replaced (a new release of the same operators)."""
    tree = tmp / f"src-{version}"
    shutil.copytree(src, tree)
    text = (tree / "firmware.py").read_text()
    (tree / "firmware.py").write_text(text.replace('VERSION = "', f'VERSION = "{version}"  # was "', 1))
    fw_image.build(tree, out)


@pytest.fixture
def soc_wd(runtime_env):
    """A SoC whose cores have a 2 s watchdog (1 s tripped on a firmware merely starved of CPU
    on a loaded 2-CPU machine)."""
    live = LiveSoc(runtime_env, core_args=["--watchdog-ms", "2000"])
    live.start()
    try:
        yield live
    finally:
        live.stop_and_check()


def load_faulty(soc: Soc, rt: Path, core: str = "vdsp1") -> None:
    fw_image.build(FAULTY, rundir.firmware_dir(rt) / "faulty")
    assert soc.control(core, "state", "stop") == "offline"
    soc.control(core, "firmware", "faulty")
    assert soc.control(core, "state", "start") == "running"


def wait_state(soc: Soc, core: str, state: str, timeout: float = 15) -> bool:
    return bool(wait_until(lambda: soc.control(core, "state") == state, timeout, 0.1))


# --- the state table, row by row, through CONTROL -------------------------------------

def test_every_row_of_the_state_table(live_soc):
    with Soc() as soc:
        load_faulty(soc, live_soc.rt)
        soc.control("vdsp1", "recovery", "disabled")
        # running
        for attr, value, exc in [("state", "start", errors.RemoteprocBusy), ("state", "bogus", errors.RemoteprocInvalid),
                                 ("firmware", "vdsp1", errors.RemoteprocBusy), ("recover", "x", errors.RemoteprocInvalid),
                                 ("recovery", "recover", errors.RemoteprocInvalid),
                                 ("recovery", "sometimes", errors.RemoteprocInvalid),
                                 ("coredump", "always", errors.RemoteprocInvalid), ("name", "x", errors.RemoteprocInvalid)]:
            with pytest.raises(exc):
                soc.control("vdsp1", attr, value)
        assert soc.control("vdsp1", "coredump", "enabled") == "enabled"
        assert soc.control("vdsp1", "name") == "vdsp1"
        # crashed
        with pytest.raises(errors.CoreCrashed):
            soc.rpc(RAISE, core=CORE_1).wait(5000)
        assert wait_state(soc, "vdsp1", "crashed")
        for attr, value, exc in [("state", "start", errors.RemoteprocBusy), ("state", "stop", errors.RemoteprocInvalid),
                                 ("firmware", "vdsp1", errors.RemoteprocBusy),
                                 ("coredump", "disabled", errors.RemoteprocBusy)]:
            with pytest.raises(exc):
                soc.control("vdsp1", attr, value)
        assert soc.control("vdsp1", "recovery", "enabled") == "enabled"   # allowed, does not recover by itself
        assert soc.control("vdsp1", "state") == "crashed"
        with pytest.raises(errors.CoreCrashed):
            soc.rpc(opids.PING, core=CORE_1).wait(2000)                   # fails at once, no timeout
        assert soc.control("vdsp1", "recovery", "recover") == "running"
        assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}
        # offline
        assert soc.control("vdsp1", "state", "stop") == "offline"
        with pytest.raises(errors.RemoteprocInvalid):
            soc.control("vdsp1", "state", "stop")
        with pytest.raises(errors.RemoteprocInvalid):
            soc.control("vdsp1", "recovery", "recover")
        with pytest.raises(errors.RemoteprocInvalid):
            soc.control("vdsp1", "firmware", "")
        assert soc.control("vdsp1", "firmware", "vdsp1\n") == "vdsp1"     # echo's newline is trimmed
        assert soc.control("vdsp1", "coredump", "inline") == "inline"
        with pytest.raises(errors.CoreOffline):
            soc.rpc(opids.PING, core=CORE_1).wait(2000)
        assert soc.control("vdsp1", "state", "start") == "running"
        assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}


# --- crashes ---------------------------------------------------------------------------

@pytest.mark.exclusive     # a 2 s watchdog and crash times measured: a busy neighbour trips or slows them
@pytest.mark.parametrize("op, kind", [(RAISE, "exception"), (KILL, "killed by SIGKILL"), (HANG, "watchdog")])
def test_crash_by_exception_process_death_and_watchdog(soc_wd, op, kind):
    events = []
    with Soc() as soc:
        soc.on_event(events.append)
        load_faulty(soc, soc_wd.rt)
        soc.control("vdsp1", "coredump", "enabled")
        queued = soc.rpc(opids.SLEEP, params={"ms": 1}, core=CORE_1)
        queued.wait(2000)
        t0 = time.monotonic()
        with pytest.raises(errors.CoreCrashed) as exc:
            soc.rpc(op, core=CORE_1).wait(10000)
        assert exc.value.code == -6000291
        if op == RAISE:     # what raised, where, and the log that has its traceback
            assert "RuntimeError: operator bug () in operator raise_error" in exc.value.message, exc.value.message
            log = re.search(r"core log (\S+?)\)?$", exc.value.message)
            assert log and Path(log[1]) == soc_wd.rt / "log" / "vdsp1.log", exc.value.message
            assert "RuntimeError: operator bug" in Path(log[1]).read_text()
        assert time.monotonic() - t0 < (5 if op == HANG else 2)
        assert soc.rpc(opids.PING, core=CORE_0).wait(2000) == {"core": "vdsp0"}   # the other core never noticed
        assert wait_state(soc, "vdsp1", "running")                               # recovery is enabled by default
        assert soc.rpc(REFUSE, core=CORE_1) and True
        with pytest.raises(errors.InvalidArgument):                              # an error reply is not a crash
            soc.rpc(REFUSE, core=CORE_1).wait(5000)
        assert soc.query("cores")["cores"][1]["crash_count"] == 1
    dmesg = (soc_wd.rt / "dmesg").read_text()
    assert f"crash detected in vdsp1: type {kind}" in dmesg
    assert "handling crash #1 in vdsp1" in dmesg and "recovering vdsp1" in dmesg
    dump = json.loads((soc_wd.rt / "coredump" / "vdsp1-crash1.json").read_text())
    assert dump["firmware_version"] == "9.9.9" and dump["type"] == kind
    if op == RAISE:
        assert dump["task"]["name"] == "raise_error" and dump["task"]["params"] == {"note": ""}
        assert "RuntimeError: operator bug" in dump["traceback"]
    states = [(e["core"], e["state"]) for e in events if e["core"] == "vdsp1"]
    assert ("vdsp1", "crashed") in states and states[-1] == ("vdsp1", "running")


def test_recovery_disabled_waits_for_recover_and_coredump_inline(live_soc):
    events = []
    with Soc() as soc:
        soc.on_event(events.append)
        load_faulty(soc, live_soc.rt)
        soc.control("vdsp1", "recovery", "disabled")
        soc.control("vdsp1", "coredump", "inline")
        with pytest.raises(errors.CoreCrashed):
            soc.rpc(RAISE, params={"note": "inline"}, core=CORE_1).wait(5000)
        assert wait_state(soc, "vdsp1", "crashed")
        time.sleep(1.0)
        assert soc.control("vdsp1", "state") == "crashed"                       # stays crashed
        crash = next(e for e in events if e["state"] == "crashed")["crash"]
        assert crash["dump"]["task"]["params"] == {"note": "inline"}           # the dump came with the event
        assert "operator bug (inline)" in crash["dump"]["traceback"]
        soc.control("vdsp1", "recovery", "recover")
        assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}
    dmesg = (live_soc.rt / "dmesg").read_text()
    assert "handling crash #1 in vdsp1" not in dmesg and "recovering vdsp1" in dmesg


def test_coredump_disabled_writes_nothing(live_soc):
    with Soc() as soc:
        load_faulty(soc, live_soc.rt)
        with pytest.raises(errors.CoreCrashed):
            soc.rpc(KILL, core=CORE_1).wait(5000)
        assert wait_state(soc, "vdsp1", "running")
    assert not (live_soc.rt / "coredump").exists()


# --- images ------------------------------------------------------------------------------

def test_hot_swap_of_a_firmware_image(live_soc, tmp_path):
    fwdir = rundir.firmware_dir(live_soc.rt)
    with Soc() as soc:
        build_version(ROOT / "examples" / "custom_op", "1.0.0", fwdir / "custom", tmp_path)
        soc.control("vdsp1", "state", "stop")
        soc.control("vdsp1", "firmware", "custom")
        soc.control("vdsp1", "state", "start")
        assert soc.query("cores")["cores"][1]["firmware_version"] == "1.0.0"
        soc.control("vdsp1", "state", "stop")
        build_version(ROOT / "examples" / "custom_op", "2.3.4", fwdir / "custom", tmp_path)   # replace the file
        soc.control("vdsp1", "state", "start")
        core = soc.query("cores")["cores"][1]
        assert core["firmware_version"] == "2.3.4" and any(o["name"] == "saturate_add" for o in core["operators"])
        buf = soc.mem.alloc(16)
        assert soc.rpc(0x1400, inputs=[buf], outputs=[buf], params={"delta": 3}, core=CORE_1).wait(5000)["bytes"] == 16
    assert "[DSP] DSP version = 2.3.4" in live_soc.log("vdsp1")


@pytest.mark.parametrize("damage", ["missing", "truncated", "corrupt", "not an image"])
def test_bad_images_fail_to_start_and_leave_the_core_offline(live_soc, damage):
    fwdir = rundir.firmware_dir(live_soc.rt)
    good = (fwdir / "vdsp1").read_bytes()
    bad = {"missing": None, "truncated": good[:-40], "corrupt": good[:-5] + b"XXXXX",
           "not an image": b"#!/bin/sh\necho hello\n"}[damage]
    with Soc() as soc:
        soc.control("vdsp1", "state", "stop")
        soc.control("vdsp1", "firmware", "broken")
        if bad is not None:
            (fwdir / "broken").write_bytes(bad)
        expected = errors.RemoteprocNoEnt if damage == "missing" else errors.RemoteprocInvalid
        with pytest.raises(expected) as exc:
            soc.control("vdsp1", "state", "start")
        assert exc.value.code == (-2 if damage == "missing" else -22)
        assert soc.control("vdsp1", "state") == "offline"
        soc.control("vdsp1", "firmware", "vdsp1")
        assert soc.control("vdsp1", "state", "start") == "running"


def test_firmware_search_path_is_searched_first(live_soc, tmp_path):
    custom = tmp_path / "image"
    build_version(ROOT / "examples" / "custom_op", "5.0.0", custom / "vdsp0", tmp_path)
    rundir.firmware_path_file(live_soc.rt).write_text(str(custom) + "/")
    with Soc() as soc:
        soc.control("vdsp0", "state", "stop")
        soc.control("vdsp0", "state", "start")
        assert soc.query("cores")["cores"][0]["firmware_version"] == "5.0.0"

"""The J5 remoteproc shell workflow and the README's custom-operator tutorial, as commands."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
VDSP = [sys.executable, "-m", "vdsp_sim.cli"]
RP1, RP2 = "/sys/class/remoteproc/remoteproc1", "/sys/class/remoteproc/remoteproc2"


@pytest.fixture
def sh(live_soc):
    """Run a command line as a user in the SoC's runtime dir would."""
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(live_soc.rt), PYTHONPATH=str(ROOT))

    def run(*argv, cwd=None) -> subprocess.CompletedProcess:
        return subprocess.run([*argv], env=env, cwd=cwd or ROOT, capture_output=True, text=True, timeout=60)
    run.rt = live_soc.rt
    return run


def test_sysfs_cat_echo_ls_like_the_board(sh):
    assert sh(*VDSP, "sysfs", "cat", f"{RP1}/firmware").stdout == "vdsp0\n"
    assert sh(*VDSP, "sysfs", "cat", f"{RP2}/state").stdout == "running\n"
    res = sh(*VDSP, "sysfs", "echo", "start", f"{RP1}/state")     # the board's line, then the core's reason
    assert res.returncode == 1 and res.stderr.splitlines() == [
        "sh: echo: write error: Device or resource busy", "vdsp sysfs: cannot write 'start' to state of vdsp0 while running"]
    res = sh(*VDSP, "sysfs", "echo", "vdsp0", f"{RP1}/firmware")
    assert res.returncode == 1 and res.stderr.splitlines() == [
        "sh: echo: write error: Device or resource busy",
        "vdsp sysfs: cannot write 'vdsp0' to firmware of vdsp0 while running"]
    assert sh(*VDSP, "sysfs", "echo", "stop", f"{RP1}/state").returncode == 0
    assert sh(*VDSP, "sysfs", "cat", f"{RP1}/state").stdout == "offline\n"
    res = sh(*VDSP, "sysfs", "echo", "stop", f"{RP1}/state")
    assert res.returncode == 1 and res.stderr.splitlines() == [
        "sh: echo: write error: Invalid argument", "vdsp sysfs: cannot write 'stop' to state of vdsp0 while offline"]
    assert sh(*VDSP, "sysfs", "echo", "vdsp0", f"{RP1}/firmware").returncode == 0
    assert sh(*VDSP, "sysfs", "echo", "-n", "/tmp_vdsp/image/", "/sys/module/firmware_class/parameters/path").returncode == 0
    assert sh(*VDSP, "sysfs", "cat", "/sys/module/firmware_class/parameters/path").stdout == "/tmp_vdsp/image/\n"
    assert sh(*VDSP, "sysfs", "echo", "start", f"{RP1}/state").returncode == 0   # falls back to the default dir
    assert sh(*VDSP, "sysfs", "cat", f"{RP1}/state").stdout == "running\n"
    assert sh(*VDSP, "sysfs", "echo", "disabled", "/sys/kernel/debug/remoteproc/remoteproc2/recovery").returncode == 0
    assert sh(*VDSP, "sysfs", "cat", f"{RP2}/recovery").stdout == "disabled\n"
    res = sh(*VDSP, "sysfs", "cat", "/sys/class/remoteproc/remoteproc9/state")
    assert res.returncode == 1 and "No such file or directory" in res.stderr
    listing = sh(*VDSP, "sysfs", "ls").stdout.split()
    assert f"{RP2}/coredump" in listing and "/sys/module/firmware_class/parameters/path" in listing
    dmesg = sh(*VDSP, "dmesg").stdout
    assert "remoteproc remoteproc1: stopped remote processor vdsp0" in dmesg


def test_deploy_installs_new_images_on_both_cores(sh, tmp_path):
    images = tmp_path / "image"
    for name in ("vdsp0", "vdsp1"):
        res = sh(*VDSP, "firmware", "build", "examples/custom_op", "-o", str(images / name))
        assert res.returncode == 0 and "version 1.0.0" in res.stdout
    res = sh(*VDSP, "deploy", str(images))
    assert res.returncode == 0, res.stderr
    assert "stopped vdsp0" in res.stdout and "stopped vdsp1" in res.stdout
    assert res.stdout.count("running, firmware") == 2 and res.stdout.count("version 1.0.0") >= 2
    assert "?" not in res.stdout and res.stdout.count("custom_op 1.0.0, signed by install") == 2, res.stdout
    (images / "vdsp1").write_bytes((images / "vdsp1").read_bytes()[:100])
    res = sh(*VDSP, "deploy", str(images))
    assert res.returncode == 1 and "truncated" in res.stderr        # refused before touching a core
    assert sh(*VDSP, "sysfs", "cat", f"{RP2}/state").stdout == "running\n"


def test_the_readme_custom_operator_tutorial(sh, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples", work / "examples")
    (work / "examples/custom_op/custom_op_stubs.py").unlink()      # made by the stubs step below
    steps = [
        [*VDSP, "firmware", "build", "examples/custom_op", "-o", "build/image/vdsp1"],
        [*VDSP, "firmware", "info", "build/image/vdsp1"],
        [*VDSP, "sysfs", "echo", "stop", f"{RP2}/state"],
        [*VDSP, "sysfs", "echo", "-n", f"{work}/build/image/", "/sys/module/firmware_class/parameters/path"],
        [*VDSP, "sysfs", "echo", "vdsp1", f"{RP2}/firmware"],
        [*VDSP, "sysfs", "echo", "start", f"{RP2}/state"],
        [*VDSP, "status", "-v"],
        [*VDSP, "firmware", "stubs", "build/image/vdsp1", "-o", "examples/custom_op/custom_op_stubs.py"],
        [sys.executable, "examples/custom_op/call_it.py"],
    ]
    outputs = []
    for argv in steps:
        res = sh(*argv, cwd=work)
        assert res.returncode == 0, (argv, res.stdout, res.stderr)
        outputs.append(res.stdout)
    assert "0x1400  saturate_add" in outputs[1]
    assert "saturate_add(0x1400)" in outputs[6]
    assert "saturate_add(0x1400)" in outputs[7]
    assert (work / "examples/custom_op/custom_op_stubs.py").read_text() == \
        (ROOT / "examples/custom_op/custom_op_stubs.py").read_text()       # the checked-in stub is this image's
    assert outputs[8].strip().splitlines() == [      # prepare once per shape/delta; private state counts the tasks
        "delta 10: {'bytes': 8, 'prepares': 1, 'tasks': 1} output: [10, 11, 110, 210, 255, 255, 17, 19]",
        "delta 10: {'bytes': 8, 'prepares': 1, 'tasks': 2} output: [10, 11, 110, 210, 255, 255, 17, 19]",
        "delta -5: {'bytes': 8, 'prepares': 2, 'tasks': 3} output: [0, 0, 95, 195, 245, 250, 2, 4]"]
    core_log = sh.rt / "log" / "vdsp1.log"
    assert "saturate_add: init, lookup table of 256 bytes" in core_log.read_text()
    assert "saturate_add: destroy" not in core_log.read_text()
    res = sh(*VDSP, "sysfs", "echo", "stop", f"{RP2}/state")     # unloading runs the destroy hook
    assert res.returncode == 0, res.stderr
    assert "saturate_add: destroy after 3 tasks, lookup table freed" in core_log.read_text()
    # step 5: a stock operator is refused by name of the core until the stock image is back
    assert sh(*VDSP, "sysfs", "echo", "start", f"{RP2}/state").returncode == 0
    from arm_side import CORE_1, Soc, errors
    assert os.environ["VDSP_RUNTIME_DIR"] == str(sh.rt)
    with Soc() as soc, soc.mem.alloc(64) as buf:
        with pytest.raises(errors.UnknownOperator, match=r"vdsp1: no operator 0x0410 in its firmware 1\.0\.0"):
            soc.rpc(0x0410, inputs=[buf], outputs=[buf], core=CORE_1).wait(5000)
    assert sh(*VDSP, "sysfs", "echo", "stop", f"{RP2}/state").returncode == 0
    steps = [[*VDSP, "sysfs", "echo", "-n", "", "/sys/module/firmware_class/parameters/path"],
             [*VDSP, "sysfs", "echo", "start", f"{RP2}/state"],
             [*VDSP, "sample", "nn", "yolov3"]]
    for argv in steps:
        res = sh(*argv, cwd=work)
        assert res.returncode == 0, (argv, res.stdout, res.stderr)
    assert "check result right" in res.stderr and "yolov3 finish" in res.stderr
    assert sh(*VDSP, "sysfs", "cat", f"{RP2}/firmware").stdout == "vdsp1\n"

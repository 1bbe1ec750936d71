"""Helpers of the tests of ``vdsp up`` as a service manager (test_live_supervisor*.py): run a
``vdsp`` command for a private runtime directory, find that SoC's processes, and ``vdsp down``
with the checks that nothing of it is left (processes, socket files, /dev/shm segments)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path


from arm_side import Soc, errors, opids, CORE_0
from vdsp_board.processes import rundir
from vdsp_board.memory import ddr
from vdsp_board.processes.pidfile import alive
from tests.conftest import wait_until
from tests.live import own_shm_prefix, shm_entries

VDSP = [sys.executable, "-m", "vdsp_sim.cli"]
# What a task may fail with when part of the SoC is killed (README "faults end tasks").
FAULT_CODES = {str(errors.RelayUnavailable.code), str(errors.CoreCrashed.code), str(errors.CoreDead.code),
               str(errors.CoreOffline.code)}
RECOVERY_LIMIT_S = 5.0


def run(cmd, rt: Path, timeout=90) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=dict(os.environ, VDSP_RUNTIME_DIR=str(rt)), capture_output=True, text=True,
                          timeout=timeout)


def rt_processes(rt: Path) -> list[int]:
    """Live processes (not this one) whose environment names runtime dir ``rt``."""
    needle = f"VDSP_RUNTIME_DIR={rt}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:
            continue
        if needle in env and alive(int(entry)):
            found.append(int(entry))
    return found


def core_pids(rt: Path) -> dict[str, tuple[int, int]]:
    """Core name -> (core pid, firmware pid), asked of the cores themselves."""
    with Soc(mode="direct", autostart_relay=False, connect_timeout_s=5) as soc:
        return {c["name"]: (c["pid"], c["fw_pid"]) for c in soc.query("cores")["cores"]}


def ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rpartition(")")[2].split()[1])


def supervisor_of(pid: int) -> int:
    """The supervisor that started ``pid``: the parent of the SoC's starter (``soc.starter``),
    which is the parent of every process of the SoC; 0 when ``pid``'s parent is no SoC starter."""
    parent = ppid(pid)
    with open(f"/proc/{parent}/comm") as fh:
        return ppid(parent) if fh.read().strip() == "soc.starter" else 0


def status_json(rt: Path) -> dict:
    return json.loads(run(VDSP + ["status", "--json"], rt).stdout)


def ping(soc: Soc, core) -> bool:
    try:
        return soc.rpc(opids.PING, core=core, priority=255).wait(1000) == {
            "core": "vdsp0" if core == CORE_0 else "vdsp1"}
    except errors.VdspError:
        return False


def down_and_check(rt: Path, shm_before: set[str]) -> None:
    """``vdsp down``; then nothing of ``rt`` may be left: processes, socket files, shm segments."""
    res = run(VDSP + ["down"], rt)
    problems = [] if res.returncode == 0 else [f"vdsp down failed: {res.stdout} {res.stderr}"]
    wait_until(lambda: not rt_processes(rt), 10)
    left = rt_processes(rt)
    if left:
        problems.append(f"processes of {rt} left running: {left}")
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    sockets = sorted(p.name for p in rt.glob("*.sock"))
    if sockets:
        problems.append(f"socket files left in {rt}: {sockets}")
    if os.path.lexists(rt / rundir.SOCKETS_LINK):     # a long runtime dir's short sockets' directory
        problems.append(f"{rt / rundir.SOCKETS_LINK} left, naming {os.readlink(rt / rundir.SOCKETS_LINK)}")
    mine = own_shm_prefix()

    def leaked() -> set[str]:
        ddr.reap()
        return {n for n in shm_entries() - shm_before if not n.startswith(mine)}
    wait_until(lambda: not leaked(), 10, 0.1)
    if leaked():
        problems.append(f"/dev/shm entries leaked: {sorted(leaked())}")
    assert not problems, "; ".join(problems)

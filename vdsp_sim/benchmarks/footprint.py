"""A running SoC's memory (PSS of every process), its CPU while idle, and how fast a killed
firmware serves again.

PSS (proportional set size, ``/proc/<pid>/smaps_rollup``) charges a page shared by n processes
1/n to each, so the sum over the SoC's processes is the memory the SoC takes, shared libraries
and copy-on-write pages counted once.
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (``/proc/<pid>/task/*/children``)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            out += [int(p) for p in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except (OSError, ValueError):
            pass
    return out


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children(p)
    return out


def pss_kb(pid: int) -> int:
    """The process's PSS in KiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def name_of(pid: int) -> str:
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        if comm != "python":
            return comm
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        return " ".join(c.decode(errors="replace") for c in cmd[1:4])
    except OSError:
        return "?"


def soc_pss(rt: Path) -> dict:
    """PSS of the SoC whose supervisor's pid is in ``rt/soc.pid``: total MB and per process."""
    sup = int((rt / "soc.pid").read_text().split()[0])
    procs = {f"{name_of(p)} ({p})": pss_kb(p) / 1024 for p in tree(sup)}
    return {"total_mb": sum(procs.values()), "processes_mb": procs}


def cpu_ns(pid: int) -> int:
    """CPU time the process's threads have run, in ns (``/proc/<pid>/task/*/schedstat``: ns, not
    the 10 ms clock ticks of ``/proc/<pid>/stat``); 0 when it is gone."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tasks:
        try:
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def idle_cpu(root: int, seconds: float = 2.0) -> dict:
    """CPU that ``root`` and its descendants use in ``seconds`` of nobody calling them: total ms of
    CPU per second, and per process (the processes alive at the start)."""
    pids = tree(root)
    before = {p: cpu_ns(p) for p in pids}
    t0 = time.perf_counter()
    time.sleep(seconds)
    after = {p: cpu_ns(p) for p in pids}
    wall = time.perf_counter() - t0
    procs = {f"{name_of(p)} ({p})": max(0, after[p] - before[p]) / 1e6 / wall for p in pids}
    return {"total_ms_per_s": sum(procs.values()), "processes_ms_per_s": procs}


def soc_idle_cpu(rt: Path, seconds: float = 2.0) -> dict:
    """:func:`idle_cpu` of the SoC whose supervisor's pid is in ``rt/soc.pid``."""
    return idle_cpu(int((rt / "soc.pid").read_text().split()[0]), seconds)


def firmware_pid(rt: Path, core: str) -> int:
    """The pid of ``core``'s firmware process (a child of the core's starter, named ``<core>.fw``,
    or running ``dsp_side.firmware``)."""
    state = json.loads((rt / "soc.state.json").read_text())
    core_pid = int(state["processes"][core]["pid"])
    for p in tree(core_pid)[1:]:
        try:
            if Path(f"/proc/{p}/comm").read_text().strip() == f"{core}.fw" or \
                    b"dsp_side.firmware" in Path(f"/proc/{p}/cmdline").read_bytes():
                return p
        except OSError:
            continue
    raise RuntimeError(f"no firmware process under {core} (pid {core_pid})")


def restart_s(soc, rt: Path, core: str, core_id: int, timeout_s: float = 30.0) -> float:
    """SIGKILL ``core``'s firmware; seconds until a ping on that core succeeds again."""
    from arm_side import opids
    from protocol import errors
    pid = firmware_pid(rt, core)
    t0 = time.perf_counter()
    os.kill(pid, signal.SIGKILL)
    while True:
        try:
            soc.rpc(opids.PING, core=core_id).wait(200)
            if firmware_pid(rt, core) != pid:
                return time.perf_counter() - t0
        except (errors.VdspError, RuntimeError):
            pass
        if time.perf_counter() - t0 > timeout_s:
            raise RuntimeError(f"{core}: no firmware serving {timeout_s:.0f} s after its firmware was killed")
        time.sleep(0.005)

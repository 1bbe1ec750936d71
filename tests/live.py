"""A real SoC for integration tests, and the leak checks run when it stops."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from vdsp_sim.board import ddr
from vdsp_sim.board.pidfile import PidFile, alive
from vdsp_sim.supervisor import Supervisor, stop_pid


def shm_entries() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith("vdsp-")}


def own_shm_prefix() -> str:
    """Names of this (test) process's own DDR owner: alive as long as pytest is."""
    return f"vdsp-{ddr.current_owner().id:06x}"


class LiveSoc:
    """relay + vdsp0 + vdsp1 as processes in runtime dir ``rt``."""

    def __init__(self, rt: Path, **supervisor_kw) -> None:
        self.rt = rt
        self.sup = Supervisor(rt, log_dir=rt / "log", **supervisor_kw)
        self.shm_before = shm_entries()
        self.status: dict = {}

    def start(self) -> None:
        self.sup.start()
        self.status = self.sup.wait_ready(60)

    def pid(self, name: str) -> int:
        """pid of relay / vdsp0 / vdsp1 (the process the supervisor started)."""
        return self.sup.procs[name].pid

    def relay_pid(self) -> int | None:
        """The relay now serving (it may have been restarted by the SDK)."""
        return PidFile(self.rt / "relay.pid").read()

    def fw_pid(self, core: str) -> int:
        """pid of a core's firmware process, from the core itself."""
        from arm_side import Soc
        with Soc(mode="direct", connect_timeout_s=5) as soc:
            for c in soc.query("cores")["cores"]:
                if c["name"] == core:
                    return c["fw_pid"]
        raise AssertionError(f"no core {core}")

    def log(self, name: str) -> str:
        path = self.rt / "log" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop_and_check(self) -> None:
        """Stop everything; raise AssertionError for leftover processes, sockets or shm."""
        fw_pids = []
        try:
            fw_pids = [p for p in (self.fw_pid(c) for c in ("vdsp0", "vdsp1")) if p]
        except Exception:  # a test may have left a core down; its pid is then gone anyway
            pass
        extra_relay = self.relay_pid()
        self.sup.stop()
        if extra_relay is not None:  # a relay auto-started by the SDK during the test
            stop_pid(extra_relay, 5)
        problems = []
        for pid in fw_pids:
            deadline = time.monotonic() + 10
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if alive(pid):
                problems.append(f"firmware process {pid} still running")
                os.kill(pid, signal.SIGKILL)
        sockets = sorted(p.name for p in self.rt.glob("*.sock"))
        if sockets:
            problems.append(f"socket files left in {self.rt}: {sockets}")
        mine = own_shm_prefix()
        deadline = time.monotonic() + 10
        while True:
            ddr.reap()
            leaked = {n for n in shm_entries() - self.shm_before if not n.startswith(mine)}
            if not leaked or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if leaked:
            problems.append(f"/dev/shm entries leaked: {sorted(leaked)}")
        if problems:
            raise AssertionError("; ".join(problems))

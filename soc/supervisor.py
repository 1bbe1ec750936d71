"""Bringing a local SoC up and down: relay + vdsp0 + vdsp1 as separate processes."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from protocol import errors
from protocol.constants import CORE_NAMES
from soc import proc
from soc.pidfile import PidFile, alive

log = logging.getLogger("vdsp.soc")


def _env(rt: Path) -> dict:
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(rt))
    root = str(Path(__file__).resolve().parent.parent)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([root, *paths])
    return env


class Supervisor:
    """Starts the processes of one SoC in runtime dir ``rt`` and stops them all.

    ``log_dir`` None: children write to our stderr; else one log file each.
    """

    def __init__(self, rt: Path, *, cores: tuple[str, ...] = CORE_NAMES, relay: bool = True,
                 log_dir: Path | None = None, core_args: list[str] | None = None,
                 relay_args: list[str] | None = None) -> None:
        self.rt, self.cores, self.relay, self.log_dir = rt, cores, relay, log_dir
        self.core_args, self.relay_args = core_args or [], relay_args or []
        self.procs: dict[str, subprocess.Popen] = {}

    def _spawn(self, name: str, cmd: list[str]) -> None:
        out = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{name}.log", "ab")
        try:
            self.procs[name] = subprocess.Popen(cmd, env=proc.child_env(_env(self.rt)), stdin=subprocess.DEVNULL,
                                                stdout=out, stderr=out)
        finally:
            if out is not None:
                out.close()

    def start(self) -> None:
        """Spawn cores then the relay. Raises ApiUseError if a relay already runs here."""
        if self.relay and PidFile(self.rt / "relay.pid").read() is not None:
            raise errors.ApiUseError(f"a relay already runs for {self.rt} (vdsp down first)")
        from soc.firmware_cli import install_stock
        for path in install_stock(self.rt, self.cores):
            log.info("installed the stock firmware image as %s", path)
        for name in self.cores:
            self._spawn(name, [sys.executable, "-m", "soc.cli", "core", "--name", name, *self.core_args])
        if self.relay:
            self._spawn("relay", [sys.executable, "-m", "relay_server.main", *self.relay_args])

    def wait_ready(self, timeout_s: float = 60.0) -> dict:
        """Block until every core is running (as the relay or the cores report).

        Raises CoreOffline with the last status seen, or if a process died.
        """
        from arm_side.soc import Soc  # late: the SDK is a client of what we start
        deadline = time.monotonic() + timeout_s
        last: dict = {}
        while time.monotonic() < deadline:
            dead = self.dead()
            if dead:
                raise errors.CoreOffline(f"process(es) exited during start-up: {', '.join(dead)}")
            try:
                with Soc(mode="relay" if self.relay else "direct", autostart_relay=False,
                         connect_timeout_s=2.0) as soc:
                    last = soc.query("cores")
                if all(c.get("state") == "running" for c in last.get("cores", [])) and last.get("cores"):
                    return last
            except errors.VdspError as exc:
                last = {"error": str(exc)}
            time.sleep(0.2)
        raise errors.CoreOffline(f"SoC not running after {timeout_s:.0f}s: {last}")

    def dead(self) -> list[str]:
        return [f"{n} (exit {p.returncode})" for n, p in self.procs.items() if p.poll() is not None]

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM the relay, then the cores; SIGKILL what is left after ``timeout_s``."""
        order = [n for n in ("relay",) if n in self.procs] + [n for n in self.procs if n != "relay"]
        for name in order:
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in %.0fs; killing it", name, timeout_s)
                proc.kill()
                proc.wait()
        self.procs.clear()


def stop_pid(pid: int, timeout_s: float = 15.0) -> bool:
    """SIGTERM ``pid`` and wait for it; SIGKILL after the timeout. True if it is gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    time.sleep(0.1)
    return not alive(pid)

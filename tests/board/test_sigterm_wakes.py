"""A SIGTERM ends the relay's and a core's loop when it comes, not when the loop's poll times out.

Their SIGTERM handlers only clear the loop's flag; the loop saw it once its poll returned: after
its 100 ms tick, so that stopping a SoC (``vdsp down``, every test's SoC) waited that long for
each of its three processes in turn. Now a signal also makes a pipe the loop polls readable
(``proc.signal_wake_fd``). Here each server runs in a child whose poll timeout is made a minute
long: it must exit within seconds of its SIGTERM, which it did only after that minute before."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LONG_POLL_MS = 60_000
EXIT_WITHIN_S = 20.0        # a minute before; a busy CI runner gets its seconds

_RELAY = r"""
import sys
from relay_server import main, server
server.TICK_MS = int(sys.argv[1])
server.RELINK_FIRST_S = server.RELINK_MOST_S = 60.0     # its dead control link wakes it no sooner
sys.exit(main.main(sys.argv[2:]))
"""

_CORE = r"""
import sys, zmq
from dsp_side import core_main
poll = zmq.Poller.poll
zmq.Poller.poll = lambda self, timeout=None: poll(self, int(sys.argv[1]))
sys.exit(core_main.main(sys.argv[2:]))
"""


def _stops_soon(script: str, argv: list[str], rt: Path, ready: Path) -> float:
    """Start ``script``, wait for ``ready`` (its socket) and a turn of its loop, SIGTERM it: how long it took to exit."""
    env = dict(os.environ, VDSP_RUNTIME_DIR=str(rt), VDSP_SHM_DIR=str(rt / "ddr"))
    (rt / "ddr").mkdir(mode=0o700)
    child = subprocess.Popen([sys.executable, "-c", script, str(LONG_POLL_MS), *argv], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, f"{ready} never appeared"
            time.sleep(0.05)
        time.sleep(1.0)     # in its long poll by now
        t0 = time.monotonic()
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(EXIT_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {EXIT_WITHIN_S:.0f} s after its SIGTERM (its poll waits {LONG_POLL_MS} ms)")
        took = time.monotonic() - t0
        out, err = child.communicate()
        assert child.returncode == 0, err
        return took
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()


def test_the_relay_exits_at_its_sigterm_not_at_its_tick(short_dir):
    socks = short_dir / "s"
    socks.mkdir(mode=0o700)
    took = _stops_soon(_RELAY, ["--bind", f"ipc://{socks}/relay.sock", "--core", f"vdsp0=ipc://{socks}/none.sock"],
                       short_dir, socks / "relay.sock")
    print(f"relay: exited {took:.3f} s after its SIGTERM")


def test_a_core_exits_at_its_sigterm_not_at_its_poll_timeout(short_dir):
    socks = short_dir / "s"
    socks.mkdir(mode=0o700)
    took = _stops_soon(_CORE, ["--name", "vdsp0", "--bind", f"ipc://{socks}/vdsp0.sock", "--no-autostart"],
                       short_dir, socks / "vdsp0.sock")
    print(f"core: exited {took:.3f} s after its SIGTERM")

"""What the SDK does when no relay answers at the local (ipc) relay endpoint of a runtime dir.

- A SoC supervisor runs there (``vdsp up``: ``soc.pid``). It restarts its relay by itself,
  so the SDK starts nothing: it waits for that relay as long as the supervisor lives and has
  not given the relay up (up to the caller's connect timeout: a relay starved of CPU on a busy
  host answers late, not never), and fails at once, saying why, when the supervisor exits,
  gives the relay up or is stopping the SoC.
- A relay runs there without a supervisor (``relay.pid``): the SDK waits for it while its
  process lives, and fails at once when it exits.
- No supervisor, but DSP cores answer at their endpoints (cores started on their own, like a
  board's DSPs after boot): the SDK starts ``dsp_relay_server`` for them, as the J5 sample
  scripts rely on. That relay exits by itself once no core has answered for
  ``RELAY_EXIT_WITHOUT_CORES_S``, so it never outlives the cores it serves.
- Nothing runs: the SDK starts nothing and fails, saying to run ``vdsp up -d``. (Starting a
  whole SoC from a library call would leave long-lived processes that no one owns, and
  would bring a SoC back right after a ``vdsp down`` for a client still running.)
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from protocol import errors
from vdsp_board.config import settings
from vdsp_board.processes import rundir
from vdsp_board.processes.pidfile import PidFile, supervisor_state
from vdsp_board.processes.procfacts import exited

RELAY_EXIT_WITHOUT_CORES_S = 5.0   # a relay the SDK started exits after this long without a core
PROBE_S = 0.5                      # a relay that runs answers HELLO well within this


@dataclass
class Plan:
    """``action``: "wait" (for the supervisor's relay, or a relay that runs), "start" (a relay for
    running cores) or "fail"; ``message``: what to say if the wait ends without an answer;
    ``supervised``: the supervisor decides (see :func:`supervisor_problem`); ``relay_pid``: the
    relay process whose exit ends the wait."""

    action: str
    message: str
    supervised: bool = False
    relay_pid: int | None = None


class LocalRelay:
    """The policy for the relay of runtime dir ``rt`` at the local ``endpoint`` (ipc), for a
    client's wait (``arm_side.connect_wait.RelayWait``); ``may_start``: start one for cores that
    run without one (else that case fails, saying so)."""

    def __init__(self, rt: Path, endpoint: str, may_start: bool = True) -> None:
        self.rt, self.endpoint, self.may_start = rt, endpoint, may_start

    def probe_delay(self) -> float:
        """Seconds to wait for a relay's READY before :meth:`unanswered`: none if no socket file is there."""
        return PROBE_S if os.path.exists(self.endpoint[len("ipc://"):]) else 0.0

    def unanswered(self) -> Plan:
        """What to do now that no relay answered within the probe delay (a relay started: its pid in the plan)."""
        decision = plan(self.rt, self.endpoint)
        if decision.action == "start":
            if not self.may_start:
                return Plan("fail", f"no relay runs in {self.rt} (its DSP cores do) and this client "
                                    "starts none (autostart_relay=False)")
            decision.relay_pid = start_relay(self.rt)
        return decision

    def problem(self, decision: Plan) -> str | None:
        """Why waiting longer for the relay of ``decision`` is pointless now; None to keep waiting."""
        return wait_problem(self.rt, decision)


def plan(rt: Path, endpoint: str) -> Plan:
    """What to do now that no relay answers at ``endpoint`` (an ipc endpoint in ``rt``)."""
    pid = PidFile(rt / "soc.pid").read()
    if pid is not None:
        return Plan("wait", f"no relay answers at {endpoint} although the SoC supervisor (pid {pid}) runs and "
                            f"has not given it up; see 'vdsp status' and {rt / 'log'}", supervised=True)
    relay = PidFile(rt / "relay.pid").read()
    if relay is not None:
        return Plan("wait", f"the relay of {rt} (pid {relay}) runs but has not answered at {endpoint}; "
                            f"see {rt / 'relay.log'}", relay_pid=relay)
    if cores_listening(rt):
        return Plan("start", f"started dsp_relay_server but it does not answer at {endpoint}; see {rt / 'relay.log'}")
    return Plan("fail", f"no SoC is up in {rt}: no relay answers at {endpoint} and no DSP core runs there. "
                        "Start one with 'vdsp up -d' (stop it with 'vdsp down'), or set VDSP_RUNTIME_DIR "
                        "to the runtime dir of a SoC that is up")


def wait_problem(rt: Path, decision: Plan) -> str | None:
    """Why waiting longer for a relay is pointless now (the process we wait for died or was given
    up: a kernel fact or the supervisor's word); None while it lives."""
    if decision.supervised:
        return supervisor_problem(rt)
    pid = decision.relay_pid
    if pid is not None and exited(pid):
        return f"the relay (pid {pid}) exited; see {rt / 'relay.log'}"
    return None


def supervisor_problem(rt: Path) -> str | None:
    """Why waiting for the supervisor's relay is pointless now; None to keep waiting."""
    if PidFile(rt / "soc.pid").read() is None:
        return f"the SoC supervisor of {rt} has exited; start the SoC again with 'vdsp up -d'"
    state = supervisor_state(rt)
    if state is None:
        return None
    if state.get("state") == "failed":
        return f"the SoC in {rt} failed to start: {str(state.get('reason', '?'))[:2000]}"
    if state.get("state") == "stopping":
        return f"the SoC in {rt} is being stopped ('vdsp down')"
    relay = state.get("processes", {}).get("relay", {})
    if relay.get("gave_up"):
        return (f"the SoC supervisor gave up restarting the relay ({relay.get('last_exit_text', '')}); see "
                f"'vdsp status' and {rt / 'log' / 'relay.log'}")
    return None


def cores_listening(rt: Path) -> bool:
    """True if some DSP core endpoint of ``rt`` accepts connections (a core process serves it)."""
    try:
        endpoints = rundir.core_endpoints(rt)
    except errors.CoreOffline:      # a long runtime dir whose sockets' directory no core made
        return False
    return any(listening(endpoint) for endpoint in endpoints.values())


def listening(endpoint: str) -> bool:
    """True if a process accepts connections at ``endpoint`` (ipc or tcp)."""
    try:
        if endpoint.startswith("ipc://"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(0.5)
                sock.connect(endpoint[6:])
            return True
        if endpoint.startswith("tcp://"):
            url = urlsplit(endpoint)
            with socket.create_connection((url.hostname, url.port), timeout=0.5):
                return True
    except (OSError, ValueError):
        return False
    return False


def relay_command() -> str:
    """The relay executable: from PATH, else next to this Python (an unactivated venv).

    Raises RelayUnavailable when neither has it.
    """
    exe = shutil.which("dsp_relay_server")
    if exe is None:
        candidate = Path(sys.executable).parent / "dsp_relay_server"
        if candidate.exists():
            exe = str(candidate)
    if exe is None:
        raise errors.RelayUnavailable("no relay answers and dsp_relay_server is not on PATH "
                                      "(install vdsp-sim or use VDSP_RPC_MODE=direct)")
    return exe


def start_relay(rt: Path) -> int:
    """Start a detached relay for the cores of runtime dir ``rt``; returns its pid. It exits by
    itself once no core has answered for RELAY_EXIT_WITHOUT_CORES_S. Its log: rt/relay.log."""
    running = PidFile(rt / "relay.pid").read()
    if running is not None:
        return running
    env = settings.child_env(VDSP_RUNTIME_DIR=str(rt))
    with open(rt / "relay.log", "ab") as logf:
        proc = subprocess.Popen([relay_command(), "--exit-without-cores", str(RELAY_EXIT_WITHOUT_CORES_S)],
                                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env, start_new_session=True)
    return proc.pid

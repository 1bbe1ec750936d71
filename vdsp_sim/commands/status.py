"""``vdsp status [--json]``: cores, state, firmware version, operators; restarts of each process."""
from __future__ import annotations

import argparse
import json

from protocol import errors
from vdsp_board.config import settings
from vdsp_board.processes import rundir
from vdsp_board.processes.pidfile import PidFile, supervisor_state


def add_parser(sub) -> argparse.ArgumentParser:
    st = sub.add_parser("status", help="cores, state, firmware version, operators; restarts of each process")
    st.add_argument("--json", action="store_true", help="machine-readable output (every field, every operator)")
    st.add_argument("--timeout", type=float, default=30.0,
                    help="seconds to wait for a SoC whose processes live but answer slowly; one that is "
                         "down is reported at once")
    st.add_argument("-v", "--verbose", action="store_true", help="also list every operator of every core")
    return st


def run(args: argparse.Namespace) -> int:
    from arm_side.soc import Soc
    rt = rundir.runtime_dir()
    relay_up = PidFile(rt / "relay.pid").read() is not None or bool(settings.current().relay_endpoint)
    try:
        # a loaded host answers late: wait while the SoC's processes live (the SDK fails at once,
        # naming the process, when one exited or was given up)
        with Soc(mode="relay" if relay_up else "direct", autostart_relay=False,
                 connect_timeout_s=args.timeout) as soc:
            status = soc.query("cores")
            status["mode"] = soc.mode
    except errors.VdspError as exc:
        status = {"cores": [], "error": str(exc)}
    status["runtime_dir"] = str(rt)
    supervisor = supervisor_state(rt)
    if supervisor is not None:
        status["supervisor"] = {"pid": supervisor["supervisor_pid"], "state": supervisor.get("state", "?"),
                                "restart_policy": supervisor.get("restart_policy", {}),
                                "processes": supervisor.get("processes", {})}
    if args.json:
        print(json.dumps(status, indent=1))
    else:
        _print_status(status, verbose=args.verbose)
    gave_up = supervisor is not None and any(p.get("gave_up") for p in supervisor.get("processes", {}).values())
    running = status.get("cores") and all(c.get("state") == "running" and c.get("fw_link") != "refused"
                                          for c in status["cores"])
    return 0 if running and not gave_up else 3


def _print_status(status: dict, verbose: bool = False) -> None:
    print(f"runtime dir: {status['runtime_dir']}" + (f"  (via {status['mode']})" if "mode" in status else ""))
    if "supervisor" in status:
        _print_supervisor(status["supervisor"])
    if "error" in status:
        print(f"SoC not reachable: {status['error']}")
        print(f"identity: {identity_of(status)}")
        return
    print(f"{'core':8} {'state':10} {'firmware':10} {'crashes':>7} {'operators':>9}")
    for core in status["cores"]:
        ops = core.get("operators", [])
        print(f"{core['name']:8} {core.get('state', '?'):10} {core.get('firmware_version', '') or '-':10} "
              f"{core.get('crash_count', 0):>7} {len(ops):>9}")
    if verbose:     # every operator of every core, wrapped to the terminal
        import shutil
        import textwrap
        width = max(40, shutil.get_terminal_size().columns - 1)
        for core in status["cores"]:
            names = ", ".join(f"{o['name']}(0x{o['id']:04x})" for o in core.get("operators", []))
            print(textwrap.fill(names or "-", width, initial_indent=f"{core['name']} operators: ",
                                subsequent_indent="    "))
    elif any(core.get("operators") for core in status["cores"]):
        print("(operator names: vdsp status --verbose, or --json)")
    print(f"identity: {identity_of(status)}")
    signers = [f"{c['name']} {c['firmware_signer']}" for c in status["cores"] if c.get("firmware_signer")]
    if signers:
        print(f"firmware signed by: {', '.join(signers)}")
    for core in status["cores"]:
        if core.get("fw_link") == "refused":
            print(f"{core['name']}'s firmware refused the relay: {core.get('fw_refused') or '?'}")
        elif core.get("state") != "running" and core.get("reason"):
            print(f"{core['name']} is {core.get('state')}: {core['reason']}")
    for core in status["cores"]:
        if core.get("allow_unsigned"):
            print(f"WARNING: {core['name']} runs with --allow-unsigned: it boots UNSIGNED firmware images "
                  "(development only)")


def identity_of(status: dict) -> str:
    """How the SoC's servers prove which process opened an ipc connection (PROTOCOL.md §5.2), as
    the relay (relay mode) or the cores (direct mode) say; this host's own answer if none did."""
    said = [status.get("identity")] + [c.get("identity") for c in status.get("cores", [])]
    texts = list(dict.fromkeys(str(s) for s in said if s))
    if texts:
        return "; ".join(texts)
    from vdsp_board.identity import peerproof
    return f"{peerproof.describe()} (this host's; no SoC said)"


def _print_supervisor(sup: dict) -> None:
    policy = sup.get("restart_policy", {})
    print(f"supervisor: pid {sup['pid']}, {sup['state']}; gives a process up after {policy.get('burst', '?')} "
          f"exits within {policy.get('window_s', '?')} s")
    print(f"{'process':8} {'pid':>7}  {'state':10} {'restarts':>8}  last exit")
    for name, p in sup.get("processes", {}).items():
        note = ""
        if p.get("gave_up"):
            note = f"  -- gave up after {p.get('recent_exits', '?')} exits; not restarted"
        elif p.get("restart_in_s") is not None:
            note = f"  -- restarting in {p['restart_in_s']:.1f} s"
        state = "gave up" if p.get("gave_up") else p.get("state", "?")
        print(f"{name:8} {p.get('pid') or '-':>7}  {state:10} {p.get('restarts', 0):>8}  "
              f"{p.get('last_exit_text') or '-'}{note}")
    print()

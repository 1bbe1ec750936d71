"""``python -m vdsp_sim.soc.prepare``: what a SoC needs before its processes start: CURVE keys where an
endpoint is tcp (``vdsp keys init``), and the signed stock firmware images where one is missing
or would be refused (``vdsp firmware install-stock``).

``vdsp up``'s supervisor runs it as a job of the SoC's starter (a process of its own that exits),
not in itself: making keys and signing images puts secrets in a process's memory (the SoC's key
pairs, the firmware-signing key), and what the supervisor holds, a starter forked from it later
would hand to every core, relay and firmware. (A supervisor whose starter starts fresh
interpreters, such as a test's private SoC, calls :func:`prepare` itself: an exec inherits no
memory.) It prints one JSON line: ``{"keys": [FILE...], "installed": [[IMAGE, WHY]...]}``, or
``{"error": {code, name, message}}`` (exit status 1).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from protocol import errors
from protocol.constants import CORE_NAMES
from vdsp_board.processes import proc, rundir
from vdsp_board.identity import curve


def keys(rt: Path, cores: tuple[str, ...], relay: bool) -> list[Path]:
    """A SoC with a tcp endpoint needs CURVE keys: make those missing. The key files made."""
    # create: where the runtime dir is too long for its sockets, their short directory is made now
    endpoints = [e for name, e in rundir.core_endpoints(rt, create=True).items() if name in cores] + \
        ([rundir.relay_endpoint(rt, create=True)] if relay else [])
    if not any(curve.is_tcp(e) for e in endpoints):
        return []
    directory = curve.keys_dir(rt)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return curve.init(directory)


def prepare(rt: Path, cores: tuple[str, ...], relay: bool, allow_unsigned: bool) -> dict:
    """Keys and stock images: ``{"keys": [FILE...], "installed": [[IMAGE, WHY]...]}``. Raises VdspError."""
    from vdsp_sim.soc.stock import install_stock
    made = keys(rt, cores, relay)
    # an image the cores would refuse is replaced; the cores' own policy decides ("--allow-unsigned")
    installed = install_stock(rt, cores, allow_unsigned=allow_unsigned)
    return {"keys": [str(p) for p in made], "installed": [[str(p), why] for p, why in installed]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vdsp_sim.soc.prepare", description=__doc__.split("\n")[0])
    ap.add_argument("--core", action="append", default=[], help="a core of the SoC (default: vdsp0 and vdsp1)")
    ap.add_argument("--no-relay", action="store_true", help="the SoC runs no relay")
    ap.add_argument("--allow-unsigned", action="store_true", help="the cores boot unsigned images too")
    args = ap.parse_args(argv)
    proc.title("prepare")
    proc.private_umask()
    try:
        doc = prepare(rundir.runtime_dir(), tuple(args.core) or CORE_NAMES, not args.no_relay, args.allow_unsigned)
    except errors.VdspError as exc:
        print(json.dumps({"error": exc.to_wire()}), flush=True)
        return 1
    print(json.dumps(doc), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``vdsp core`` / ``python -m dsp_side.core_main``: the command line of one core process."""
from __future__ import annotations

import argparse
import logging
import signal

from protocol.constants import DEFAULT_WATCHDOG_MS, HEARTBEAT_INTERVAL_MS, HUNG_AFTER_MS
from dsp_side import firmware, heap, preload
from dsp_side.core import CoreServer
from vdsp_board.config import clihelp, settings
from vdsp_board.processes import proc, rundir
from vdsp_board.observability import log as soclog
from vdsp_board.processes.starter import Entry, Starter

log = logging.getLogger("vdsp.core")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="vdsp core",
                                 description="Run one simulated DSP core (remoteproc device + firmware process).")
    add_arguments(ap)
    clihelp.finish(ap)
    run_from_args(ap.parse_args(argv))


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--name", default="vdsp0", help="core name (vdsp0, vdsp1)")
    ap.add_argument("--bind", help="control endpoint (default: this core's entry in VDSP_CORE_ENDPOINTS, "
                                   "else ipc://$VDSP_RUNTIME_DIR/<name>.sock)")
    ap.add_argument("--fw-bind", help="firmware task endpoint (default: next to the control endpoint)")
    ap.add_argument("--firmware", help="firmware image name (default: the core name)")
    ap.add_argument("--no-autostart", action="store_true", help="stay offline until 'start' is written to state")
    ap.add_argument("--watchdog-ms", type=int, default=DEFAULT_WATCHDOG_MS,
                    help="kill a firmware stuck this long in one task")
    ap.add_argument("--heartbeat-ms", type=int, default=HEARTBEAT_INTERVAL_MS,
                    help="interval of this core's heartbeats to its peers (relay, direct clients)")
    ap.add_argument("--hung-ms", type=int, default=HUNG_AFTER_MS,
                    help="a peer silent this long is dropped; announced in READY, so that direct clients "
                         "take this core for hung only after as long (a core that exits is known at once)")
    ap.add_argument("--allow-unsigned", action="store_true",
                    help="DEVELOPMENT ONLY: also boot images that carry no signature (logged at every boot, "
                         "shown by 'vdsp status'); images signed by an unknown key or with a bad signature "
                         "are still refused")
    clihelp.add_version(ap, "vdsp core")


def _run_firmware(argv: list[str]) -> int:
    """The firmware entry point of a core's starter: a firmware forked from it."""
    firmware.main(argv, forked=True)     # exits
    return 1


FIRMWARE = {"firmware": Entry(_run_firmware, ("-m", "dsp_side.firmware_main"))}


def firmware_starter(core: str) -> Starter:
    """The core's starter, which forks its firmwares (made while the core has one thread and
    has read no key: what a firmware inherits holds none). With templates (the default) what
    firmwares import is imported first, here, so that each boot is a fork; the firmwares' heap
    setting is made in the starter (``dsp_side.heap``)."""
    templates = settings.current().fw_template
    if templates:
        # imported here, before anything listens: a boot never waits for the imports with the
        # core deaf to its peers (a no-op in a core forked from the SoC's starter)
        preload.preload(core)
    return Starter(core, FIRMWARE, templates=templates, prepare=heap.keep_heap)


def run_from_args(args: argparse.Namespace) -> None:
    proc.die_with_parent()
    proc.title(f"{args.name} core", args.name)
    soclog.setup("dsp")
    rt = rundir.runtime_dir()
    # an ipc path past the limit is refused now (InvalidArgument), not when the firmware fails to bind it
    bind = rundir.check_endpoint(args.bind or rundir.core_endpoints(rt, create=True).get(args.name)
                                 or rundir.ipc(rundir.socket_dir(rt, create=True) / f"{args.name}.sock"))
    fw_bind = rundir.check_endpoint(args.fw_bind or rundir.fw_endpoint_for(bind))
    starter = firmware_starter(args.name)    # now: one thread, no key read yet (the server reads its own)
    server = CoreServer(args.name, bind, fw_bind, rt, starter, firmware=args.firmware,
                        autostart=not args.no_autostart, watchdog_ms=args.watchdog_ms,
                        heartbeat_ms=args.heartbeat_ms, hung_ms=args.hung_ms, allow_unsigned=args.allow_unsigned,
                        wake_fd=proc.signal_wake_fd())
    if args.allow_unsigned:
        log.warning("%s: --allow-unsigned: this core also boots UNSIGNED firmware images (development only)",
                    args.name)

    def stop(signum, frame):
        server.running = False
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.run()
    if server.exit_code:
        raise SystemExit(server.exit_code)


if __name__ == "__main__":
    main()

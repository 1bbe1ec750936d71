"""``dsp_relay_server``: the command that runs the relay."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time

from protocol import errors
from protocol.constants import HEARTBEAT_INTERVAL_MS, HUNG_AFTER_MS, MAX_TASKS_PER_CLIENT
from relay_server.engine import CREDIT
from relay_server.server import RelayServer
from vdsp_board.config import clihelp, settings
from vdsp_board.processes import proc, rundir
from vdsp_board.observability import log as soclog
from vdsp_board.processes.pidfile import PidFile

log = logging.getLogger("vdsp.relay")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="dsp_relay_server",
        description="Relay server of the simulated SoC: accepts any number of ARM client processes and "
                    "schedules their tasks onto the DSP cores by priority, custom id and arrival order.")
    ap.add_argument("--bind", help="client endpoint (default $VDSP_RELAY_ENDPOINT or ipc://$VDSP_RUNTIME_DIR/relay.sock)")
    ap.add_argument("--core", action="append", metavar="NAME=ENDPOINT",
                    help="a core's control endpoint, repeatable (default $VDSP_CORE_ENDPOINTS or vdsp0, vdsp1 in the "
                         "runtime dir)")
    ap.add_argument("--heartbeat-ms", type=int, default=HEARTBEAT_INTERVAL_MS,
                    help="interval of the relay's heartbeats to cores and clients")
    ap.add_argument("--hung-ms", type=int, default=HUNG_AFTER_MS,
                    help="a core or client silent this long whose process (where the relay can see it) is "
                         "stopped or idle is taken for hung: a core is declared dead (its tasks fail), a "
                         "client is dropped. A process that exits is known at once, not after this")
    ap.add_argument("--credit", type=int, default=CREDIT,
                    help="tasks sent ahead to each core's firmware, which keeps them in priority order")
    ap.add_argument("--max-queue", type=int, default=8192, help="queued tasks before clients get a busy error")
    ap.add_argument("--max-tasks-per-client", type=int, default=MAX_TASKS_PER_CLIENT,
                    help="tasks one client may have in flight; the next fails with TaskNumExceedLimit "
                         "(HB_DNN_TASK_NUM_EXCEED_LIMIT)")
    ap.add_argument("--exit-without-cores", type=float, default=0.0, metavar="SECONDS",
                    help="exit once no core has answered for this long (0: never); the SDK starts its relays "
                         "so, so that one never outlives the cores it serves")
    ap.add_argument("--metrics-port", type=int, default=settings.current().metrics_port,
                    metavar="PORT", help="serve Prometheus metrics on http://ADDR:PORT/metrics (default "
                    "$VDSP_METRICS_PORT; 0: off); names in docs/observability.md")
    ap.add_argument("--metrics-addr", default=settings.current().metrics_addr,
                    help="address of the metrics endpoint (default $VDSP_METRICS_ADDR or 127.0.0.1; "
                         "0.0.0.0 in a container)")
    clihelp.add_version(ap)
    return clihelp.finish(ap)


def exit_without_cores(server: RelayServer, seconds: float) -> None:
    """Stop ``server`` once none of its cores has been heard for ``seconds`` (runs in a thread;
    it only reads core states and clears ``running``, which the loop checks every tick)."""
    since = time.monotonic()
    while server.running:
        time.sleep(min(0.5, seconds / 4))
        if any(core.state not in ("unknown", "dead") for core in server.cores):
            since = time.monotonic()
        elif time.monotonic() - since >= seconds:
            log.warning("no DSP core has answered for %.0f s: exiting (--exit-without-cores)", seconds)
            server.running = False


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    proc.die_with_parent()
    proc.title("relay")
    proc.private_umask()
    soclog.setup("dsp")
    try:
        rt = rundir.runtime_dir()
        bind = rundir.check_endpoint(args.bind or rundir.relay_endpoint(rt, create=True))
        cores = rundir.parse_core_list(args.core) if args.core else rundir.core_endpoints(rt, create=True)
        pidfile = PidFile(rt / "relay.pid")
        pidfile.acquire()
    except errors.VdspError as exc:
        print(f"dsp_relay_server: {exc}", file=sys.stderr)
        return 2
    log.info("Relay server mode, pid %d", os.getpid())
    metrics = None
    try:
        if args.metrics_port:
            from relay_server import metrics as relay_metrics
            metrics = relay_metrics.RelayMetrics()
            relay_metrics.serve(metrics, args.metrics_port, args.metrics_addr)
            log.info("Prometheus metrics on http://%s:%d/metrics", args.metrics_addr, args.metrics_port)
        server = RelayServer(bind, cores, heartbeat_ms=args.heartbeat_ms, hung_ms=args.hung_ms, credit=args.credit,
                             max_queued=args.max_queue, max_tasks_per_client=args.max_tasks_per_client,
                             metrics=metrics, wake_fd=proc.signal_wake_fd())
    except Exception as exc:  # zmq bind errors: address in use, bad endpoint; metrics port in use
        pidfile.release()
        print(f"dsp_relay_server: cannot start on {bind}: {exc}", file=sys.stderr)
        return 1

    def stop(signum, frame):
        server.running = False
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.exit_without_cores > 0:
        threading.Thread(target=exit_without_cores, args=(server, args.exit_without_cores),
                         name="exit-without-cores", daemon=True).start()
    try:
        profile = settings.current().profile_relay
        if profile:  # developer aid: cProfile stats of the relay loop, written at exit
            import cProfile
            cProfile.runctx("server.run()", globals(), {"server": server}, profile)
        else:
            server.run()
    finally:
        pidfile.release()
    return 0


if __name__ == "__main__":
    from vdsp_board.processes import proc
    proc.fast_exit(main())     # what a normal exit does for us, without the interpreter's teardown

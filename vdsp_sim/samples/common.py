"""What every sample shares: glog-style logging and a SoC to run against."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Iterator

from arm_side import Soc
from protocol import errors
from vdsp_board.config import settings
from vdsp_board.processes import rundir
from vdsp_board.observability import log as soclog
from vdsp_board.memory import ddr
from vdsp_board.processes.pidfile import PidFile
from vdsp_board.config.version import __version__

log = logging.getLogger("vdsp.sample")


def soc_is_up(rt: Path) -> bool:
    """A SoC to use exists: endpoints given by the environment (containers, other hosts),
    or a local one in the runtime dir."""
    if settings.current().relay_endpoint or settings.current().core_endpoints:
        return True
    if PidFile(rt / "soc.pid").read() is not None:
        return True
    try:
        return os.path.exists(rundir.core_endpoints(rt)["vdsp0"][len("ipc://"):])
    except errors.VdspError:    # a long runtime dir whose sockets' directory no core made
        return False


@contextlib.contextmanager
def local_soc() -> Iterator[None]:
    """Use the SoC that is up in the runtime dir, or bring one up for the sample's duration
    (in that runtime dir and DDR directory, as ``vdsp up`` would; clients as configured)."""
    from vdsp_sim.soc.private_soc import private_soc
    rt = rundir.runtime_dir()
    if soc_is_up(rt):
        yield
        return
    log.info("no SoC is up in %s: starting relay, vdsp0, vdsp1", rt)
    try:
        with private_soc(runtime_dir=rt, ddr_dir=Path(ddr.shm_dir()), mode=settings.current().raw("VDSP_RPC_MODE"),
                         strict_cache=None):
            yield
    finally:
        log.info("SoC stopped")


def setup_logging() -> None:
    soclog.setup("arm")


_banner_shown = False


def dsp_banner(mode: str, stream=None) -> None:
    """The lines the J5 DSP RPC library writes when a sample process first connects: its
    version, its logger's level and mode, the receiving thread it started; ours say the same
    of the SDK (its version, ``VDSP_LOG_LEVEL`` as the DSP logger's number, relay or direct
    mode, the reader thread ``Soc()`` started). Once per process, in the DSP log format."""
    global _banner_shown
    if _banner_shown:
        return
    _banner_shown = True
    stream = stream or sys.stderr
    banner = logging.getLogger("vdsp.sample.dsp")
    banner.propagate = False
    handler = logging.StreamHandler(stream)
    handler.setFormatter(soclog.DspFormatter())
    banner.handlers[:] = [handler]
    banner.setLevel(soclog.level())
    number = {v: k for k, v in soclog.DSP_LEVELS.items()}.get(soclog.level(), 3)
    print(f"[DSP] DSP version = {__version__}", file=stream, flush=True)
    banner.critical("Init logger, level:%d", number)          # A: always shown
    if mode == "relay":
        banner.critical("Relay server mode")
        banner.info("Start thread for receive msg from relay server")
    else:
        banner.critical("Direct mode")
        banner.info("Start thread for receive msg from vdsp0, vdsp1")


@contextlib.contextmanager
def sample_soc() -> Iterator[Soc]:
    """The SoC a sample runs against (``local_soc``), connected, with the DSP banner logged."""
    with local_soc(), Soc() as soc:
        dsp_banner(soc.mode)
        yield soc

"""What every sample shares: glog-style logging and a SoC to run against."""
from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Iterator

from vdsp_sim.board import ddr, log as soclog, runtime, settings
from vdsp_sim.board.pidfile import PidFile

log = logging.getLogger("vdsp.sample")


def soc_is_up(rt: Path) -> bool:
    """A SoC to use exists: endpoints given by the environment (containers, other hosts),
    or a local one in the runtime dir."""
    if settings.current().relay_endpoint or settings.current().core_endpoints:
        return True
    return PidFile(rt / "soc.pid").read() is not None or (rt / "vdsp0.sock").exists()


@contextlib.contextmanager
def local_soc() -> Iterator[None]:
    """Use the SoC that is up in the runtime dir, or bring one up for the sample's duration
    (in that runtime dir and DDR directory, as ``vdsp up`` would; clients as configured)."""
    from vdsp_sim.private_soc import private_soc
    rt = runtime.runtime_dir()
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

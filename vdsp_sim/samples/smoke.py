"""``vdsp sample smoke``: PING every core, then memory operators on shared buffers, with timings."""
from __future__ import annotations

import argparse
import logging
import time
import zlib

import numpy as np

from arm_side import CLEAN, CORE_0, CORE_1, INVALIDATE, Soc, opids
from vdsp_sim.samples.common import sample_soc, setup_logging
from vdsp_board.config import clihelp
from vdsp_board.processes import proc

log = logging.getLogger("vdsp.sample.smoke")


def run(soc: Soc, size: int, rounds: int) -> bool:
    ok = True
    for core in (CORE_0, CORE_1):
        lat = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            values = soc.rpc(opids.PING, core=core).wait(5000)
            lat.append((time.perf_counter() - t0) * 1e6)
        lat.sort()
        log.info("ping %s: %d round trips, p50 %.0f us, max %.0f us", values["core"], rounds,
                 lat[len(lat) // 2], lat[-1])
    src, dst = soc.mem.alloc_cached(size), soc.mem.alloc_cached(size)
    pattern = (np.arange(size, dtype=np.uint32) * 2654435761 >> 24).astype(np.uint8)
    src.array()[:] = pattern
    src.flush(CLEAN)
    log.info("alloc src 0x%x dst 0x%x (%d bytes, cached), src written and cleaned", src.phys_addr, dst.phys_addr, size)
    for core in (CORE_0, CORE_1):
        dst.array()[:] = 0
        dst.flush(CLEAN)
        log.info("rpc begin: memcpy on core %d", core.index)
        t0 = time.perf_counter()
        task = soc.rpc(opids.MEMCPY, inputs=[src], outputs=[dst], core=core)
        values = task.wait(10000)
        elapsed = (time.perf_counter() - t0) * 1e3
        log.info("rpc finish: %s copied %d bytes in %.3f ms (dsp %.3f ms)", task.core, values["bytes"], elapsed,
                 task.exec_us / 1e3)
        dst.flush(INVALIDATE)
        same = np.array_equal(dst.array(), pattern)
        ok &= same
        log.info("check result %s", "right" if same else "WRONG")
    task = soc.rpc(opids.CHECKSUM, inputs=[src])
    values = task.wait(10000)
    expect = zlib.crc32(pattern.tobytes())
    ok &= values["crc32"] == expect
    log.info("checksum on %s: crc32 0x%08x (%s)", task.core, values["crc32"],
             "right" if values["crc32"] == expect else f"WRONG, expected 0x{expect:08x}")
    task = soc.rpc(opids.FILL, outputs=[dst], params={"value": 0x5A})
    task.wait(10000)
    dst.flush(INVALIDATE)
    filled = bool((dst.array() == 0x5A).all())
    ok &= filled
    log.info("fill on %s: %s", task.core, "right" if filled else "WRONG")
    src.free()
    dst.free()
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vdsp sample smoke", description=__doc__)
    ap.add_argument("--size", type=int, default=1 << 20, help="buffer size in bytes")
    ap.add_argument("--rounds", type=int, default=200, help="PING round trips per core")
    args = clihelp.finish(ap).parse_args(argv)
    setup_logging()
    proc.exit_on_sigterm()
    log.info("smoke begin")
    with sample_soc() as soc:
        log.info("connected in %s mode, cores: %s", soc.mode, soc.core_states)
        ok = run(soc, args.size, args.rounds)
    log.info("smoke %s", "finish" if ok else "FAILED")
    return 0 if ok else 1

"""What every firmware imports, imported once by whoever makes a starter (``vdsp_board.processes.starter``):
numpy, cv2, ZeroMQ and the stock operators (and numba with the compiled point-cloud kernels loaded
where the stock image runs them: no C compiler for its C kernels).

Why: a firmware booted by ``python -m dsp_side.firmware_main`` imported all of it again and loaded the
numba kernels again: 1-1.6 s per boot, and every core recovery is a boot; and each firmware held
its own copy (an idle SoC was ~500 MB PSS). Forked from a starter that has them, a process starts
with all of that in place, shared copy-on-write (counted once in PSS). A firmware boot is a fork
plus the image's verification and load (``dsp_side.fw_image.load``: signature, header, payload
digest, then the image's code, then the manifest check): nothing of an image runs before its
checks, and nothing of any image runs in a starter.

Two levels. Each core imports all of it at start, before it listens (so that no boot waits for
imports while the core is deaf to its peers), then makes its starter (``vdsp: vdsp0 starter``)
while it is single-threaded, and that one forks the core's firmwares: the imports are in memory
once per core. ``vdsp up`` imports them itself, then makes the SoC's starter, which forks the
cores and the relay: the imports are then in memory once per SoC, the supervisor's included (an
idle SoC ~155 MB PSS instead of ~345; ``VDSP_SOC_TEMPLATE=0`` starts each core and the relay as
a fresh interpreter again). Whoever preloads then lets go of the library pages importing mapped
(``vdsp_board.processes.filepages``): a fork does not inherit a file mapping's pages, so they were the
preloading process's alone (111 MB of numba's LLVM in the supervisor on Linux 6.18; an idle SoC
273 -> 155 MB PSS). A private SoC (tests, benchmarks, samples: ``vdsp_sim.soc.private_soc``) gets
the same from a SoC's starter that is a fresh interpreter (``python -m vdsp_sim.soc.entries``). A core
started alone (``vdsp core``, containers) is a fresh interpreter with a starter of its own.
"""
from __future__ import annotations

import gc
import logging
import os
import time
from pathlib import Path

log = logging.getLogger("vdsp.core")
_preloaded = False


def preload(who: str) -> None:
    """What every firmware imports, and the compiled kernels loaded (their init hook's work).
    Once per process (and so not again in a process forked from one that did it: ``vdsp up``
    does it before it makes the SoC's starter, so that the supervisor shares these pages too).
    The collector is off meanwhile (what is imported here lives as long as the process)."""
    global _preloaded
    if _preloaded:
        return
    _preloaded = True
    collecting = gc.isenabled()
    gc.disable()
    try:
        _imports(who)
    finally:
        if collecting:
            gc.enable()
    # what importing mapped and this process does not run again (LLVM's constructors touch
    # libllvmlite all over: 111 MB of it resident); a forked process maps only what it runs
    from vdsp_board.processes import filepages
    before = filepages.resident()
    filepages.drop()
    log.info("%s: library pages the imports mapped let go: resident %.0f -> %.0f MB", who, before / 2**20,
             filepages.resident() / 2**20)


def _imports(who: str) -> None:
    t0 = time.perf_counter()
    import numpy  # noqa: F401
    # numpy 2 imports numpy.ma at its first use (np.unique asks np.ma.is_masked): a firmware's
    # first yolov3_detection_output took 21 ms in-process against 3 ms for the next (57-69 ms
    # after `vdsp up -d` on a 16-CPU machine whose imports are slow, past the first task's 50 ms)
    import numpy.ma  # noqa: F401
    import cv2  # noqa: F401
    import zmq  # noqa: F401
    from dsp_side import firmware, heap, fw_image  # noqa: F401
    from dsp_side.operators import cv, nn, pointcloud
    del cv, nn
    from dsp_side import ckernel
    stock = Path(__file__).resolve().parent / "firmware_src" / "stock" / "firmware.py"
    if not ckernel.available(str(stock), cxx=True):
        # the stock image's point-cloud stages are then the numba kernels: their cached machine
        # code, 0.5-0.8 s that no firmware boot pays again. With a compiler they are C kernels, and
        # numba (~0.45 s of imports, its LLVM) stays out of the SoC; an image that binds the numba
        # kernels still loads them at its boot (pointcloud.warm, its init hook)
        pointcloud.warm(None)
    log.info("%s: firmware imports and kernels loaded in %.0f ms (pid %d)", who, (time.perf_counter() - t0) * 1e3,
             os.getpid())

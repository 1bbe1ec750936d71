"""vdsp-sim, the product's top: the SoC's runtime (``vdsp_sim.soc``: supervisor, process
entries, readiness, private SoCs, the in-process loopback SoC) and the tools above it: the
``vdsp`` CLI (``cli``, ``commands/``), samples, load test, fuzzer, benchmarks, builds.

Imports go down only: protocol <- vdsp_board (its rooms) <- arm_side | dsp_side | relay_server
<- vdsp_sim.soc <- the rest of vdsp_sim (tests/project/test_layers.py enforces it).
"""
from vdsp_board.config import version as _version

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name == "__version__":          # read when asked (vdsp_board.config.version)
        return _version.version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""vdsp-sim, the product: the board layer (``vdsp_board``: DDR, runtime directory, logs,
keys, ownership) under the SDK and both sides, and the tools above them (``vdsp`` CLI,
supervisor, samples, load test, fuzzer, benchmarks).

Imports go down only: protocol <- vdsp_board <- arm_side | dsp_side | relay_server <- the
rest of vdsp_sim (tests/test_layers.py enforces it).
"""
from vdsp_board.config.version import __version__

__all__ = ["__version__"]

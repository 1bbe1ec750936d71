"""vdsp-sim, the product: the board layer (``vdsp_sim.board``: DDR, runtime directory, logs,
keys, ownership) under the SDK and both sides, and the tools above them (``vdsp`` CLI,
supervisor, samples, load test, fuzzer, benchmarks).

Imports go down only: protocol <- vdsp_sim.board <- arm_side | dsp_side | relay_server <- the
rest of vdsp_sim (tests/test_layers.py enforces it).
"""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("vdsp-sim")
except PackageNotFoundError:     # a source tree that was not installed
    __version__ = "0+unknown"

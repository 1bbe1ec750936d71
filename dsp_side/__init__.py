"""DSP side of the simulated SoC: core processes, firmware runner, operators."""
from protocol.native import use as _use

_use(__path__, __name__)   # the compiled build of some modules, when current (protocol.native)

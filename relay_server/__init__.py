"""The relay server (``dsp_relay_server``): schedules tasks from many ARM processes onto the DSP cores."""
from protocol.native import use as _use

_use(__path__, __name__)   # the compiled build of some modules, when current (protocol.native)

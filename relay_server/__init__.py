"""The relay server (``dsp_relay_server``): schedules tasks from many ARM processes onto the DSP cores."""

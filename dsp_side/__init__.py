"""DSP side of the simulated SoC: core processes, firmware runner, operators."""

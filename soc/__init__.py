"""The simulated board shared by both sides: DDR, runtime directory, logging, supervision."""

"""Samples run by ``vdsp sample NAME`` against a running SoC (one is started if none is up).

Each sample is a module here with ``main(argv) -> int``; ``SAMPLES`` lists them.
"""
SAMPLES = ("smoke", "cv", "nn")

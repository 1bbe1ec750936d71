"""Samples run by ``vdsp sample NAME`` against a running SoC (one is started if none is up)."""

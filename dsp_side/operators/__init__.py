"""Operators shipped with vdsp-sim, grouped by command-id range."""

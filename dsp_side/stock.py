"""The stock firmware: every operator the project ships, registered explicitly."""
from __future__ import annotations

from dsp_side.operators import framework
from dsp_side.registry import Registry

VERSION = "0.1.0"


def build_registry() -> Registry:
    registry = Registry()
    framework.register(registry)
    return registry

"""What a core's engine (``dsp_side.core_engine``) asks its adapter to do: the effects in
``CoreEngine.out``, carried out in order (carrying one out, a boot, may add more).

Each is a frozen, slotted dataclass; :data:`CoreEffect` is their union. An adapter dispatches
on it with ``match`` and ends with ``case _: assert_never(effect)``, so an effect added here
that a driver does not handle is a mypy error (tests/project/test_effects_typed.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from protocol.remoteproc import Action


@dataclass(frozen=True, slots=True)
class ToPeer:
    """Send ``frames`` to peer ``identity``."""
    identity: bytes
    frames: list


@dataclass(frozen=True, slots=True)
class KmsgLine:
    """Write ``line`` to the core's kernel log."""
    line: str


@dataclass(frozen=True, slots=True)
class Boot:
    """Find, verify and start the firmware image (``action``: BOOT or RECOVER); its READY follows."""
    action: Action


@dataclass(frozen=True, slots=True)
class StopFw:
    """Stop the firmware process (asked to: shutdown, or the core exits)."""


@dataclass(frozen=True, slots=True)
class KillFw:
    """Kill the firmware process for ``reason`` (``watchdog``, ``boot-timeout``), if it runs."""
    reason: str


@dataclass(frozen=True, slots=True)
class Coredump:
    """Write ``dump`` as JSON to ``path`` (its directory made if missing)."""
    path: str
    dump: dict[str, Any]


CoreEffect: TypeAlias = ToPeer | KmsgLine | Boot | StopFw | KillFw | Coredump

"""Operator command-id ranges (Horizon UCP convention) and the framework operators."""
from __future__ import annotations

RANGES = {
    "framework": (0x0000, 0x03FF),
    "nn": (0x0400, 0x07FF),
    "cv": (0x0800, 0x0FFF),
    "hpl": (0x1000, 0x13FF),
    "custom": (0x1400, 0xFFFE),
}

# Framework operators shipped in every firmware image.
PING = 0x0000
MEMCPY = 0x0001
FILL = 0x0002
CHECKSUM = 0x0003
SLEEP = 0x0004
COUNT = 0x0005


def range_of(op_id: int) -> str:
    """Name of the range holding ``op_id``. Raises ValueError outside 0..0xfffe."""
    for name, (lo, hi) in RANGES.items():
        if lo <= op_id <= hi:
            return name
    raise ValueError(f"operator id 0x{op_id:04x} is outside 0x0000..0xfffe")

"""The one scheduling order of the SoC, shared by the relay and the firmware queues.

Higher priority first (255 = PREEMP is therefore always at the head), then
smaller custom_id, then arrival order (seq: an int, or the relay's
``(fair-share turn, arrival)`` pair, which compares the same way).
"""
from __future__ import annotations


def order_key(priority: int, custom_id: int, seq: int | tuple[int, int]) -> tuple:
    return (-priority, custom_id, seq)

"""What releasing (cancelling) a task achieved: one vocabulary for the firmware's, the relay's
and the SDK's answers.

- ``cancelled``: the task was still waiting and will never run (it ends with
  HB_DSP_TASK_CANCELLED);
- ``running``: it has started, or was handed on and may have; it runs to the end and its
  result is discarded;
- ``unknown``: no such task waits or runs here (it finished already, or never existed).
"""
from __future__ import annotations

import enum


class CancelOutcome(str, enum.Enum):
    CANCELLED = "cancelled"
    RUNNING = "running"
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, value: object) -> "CancelOutcome":
        """An outcome read off the wire; anything else is taken as ``running`` (the safe
        reading: the result, should one come, is discarded)."""
        try:
            return cls(value)
        except ValueError:
            return cls.RUNNING

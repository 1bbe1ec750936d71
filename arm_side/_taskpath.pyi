# The compiled build's per-task path of the blocking client (arm_side/taskpath.c; arm_side.reading uses it when built).
from typing import Any, Callable

def lead(reading: Any, req: Any, deadline: float | None, lane: tuple, deferred: list,
         closed: Callable[[], bool]) -> None: ...

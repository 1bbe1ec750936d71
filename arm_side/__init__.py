"""ARM-side SDK of vdsp-sim: memory (hbSys*), tasks, remoteproc control.

``from arm_side import Soc, CLEAN, CORE_ANY`` is all an application needs to start.
"""
from protocol import errors, opids
from protocol.constants import Core, PRIORITY_HIGHEST, PRIORITY_LOWEST, PRIORITY_PREEMP
from arm_side.memory import ANY_OWNER, CLEAN, INVALIDATE, Grant, Mem, MemoryManager
from arm_side.soc import AsyncSoc, Soc
from arm_side.task import Task
from protocol.task_options import TaskOptions
from vdsp_board.config import version as _version

CORE_ANY, CORE_0, CORE_1 = Core.ANY, Core.CORE_0, Core.CORE_1

__all__ = ["Soc", "AsyncSoc", "Task", "TaskOptions", "Mem", "MemoryManager", "Grant", "ANY_OWNER", "CLEAN", "INVALIDATE",
           "CORE_ANY", "CORE_0", "CORE_1", "PRIORITY_LOWEST", "PRIORITY_HIGHEST", "PRIORITY_PREEMP", "errors", "opids",
           "__version__"]


def __getattr__(name: str) -> str:
    if name == "__version__":          # read when asked (vdsp_board.config.version)
        return _version.version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""asyncio pieces shared by :class:`arm_side.AsyncSoc` and the awaitable forms of the cv/nn helpers.

Awaiting never blocks the event loop: a task's completion arrives through the SDK's
background reader (``Task.add_done_callback``), and anything that may block (opening a
connection, copying pixels, cancelling) runs in the loop's default executor.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Generator, TypeVar

from protocol import errors
from arm_side.task import Task

T = TypeVar("T")


async def wait_task(task: Task, timeout_ms: float = 0) -> dict:
    """``await`` form of ``task.wait(timeout_ms)``: the same values, the same errors.

    ``timeout_ms <= 0`` waits for ever. On TaskTimeout the task stays in flight, as with
    ``Task.wait``: a later wait can still collect it, ``task.release()`` gives it up.
    """
    if task.released:
        raise errors.InvalidTaskHandle(f"task {task.msg_id} was released")
    if not task.done():
        fut = task._as_future()
        try:
            if timeout_ms and timeout_ms > 0:
                await asyncio.wait_for(fut, timeout_ms / 1000.0)
            else:
                await fut
        except TimeoutError:     # asyncio.TimeoutError is TimeoutError since 3.11
            raise errors.TaskTimeout(f"task {task.msg_id} not done after {timeout_ms:.0f} ms; it is still in "
                                     "flight, wait again to collect it") from None
        except errors.VdspError:
            pass    # re-raised below by wait(), exactly as the blocking call does
    return task.wait(0)     # done: returns at once (values, or the task's error)


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run a blocking call in the loop's default executor."""
    return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args))


class AsyncTask:
    """A submitted task seen from asyncio: ``await`` it for what ``Task.wait`` returns.

    Returned by ``AsyncSoc.rpc(..., timeout_ms=...)``: awaiting it applies that timeout
    (TaskTimeout, the task stays in flight). Every attribute of the :class:`Task`
    (``msg_id``, ``values``, ``core``, ``exec_us``, ``done()`` ...) is available here too.
    """

    def __init__(self, task: Task, timeout_ms: float = 0) -> None:
        self.task, self.timeout_ms = task, timeout_ms

    def __await__(self) -> Generator[Any, None, dict]:
        return wait_task(self.task, self.timeout_ms).__await__()

    async def wait(self, timeout_ms: float | None = None) -> dict:
        """Await the result with ``timeout_ms`` (default: the one given to ``rpc``)."""
        return await wait_task(self.task, self.timeout_ms if timeout_ms is None else timeout_ms)

    async def release(self) -> str:
        """``Task.release`` without blocking the loop (it may ask the relay)."""
        return await in_thread(self.task.release)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.task, name)

    def __repr__(self) -> str:
        return f"AsyncTask({self.task.msg_id}, op=0x{self.task.op:04x}, done={self.task.done()})"

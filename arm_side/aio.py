"""asyncio pieces shared by :class:`arm_side.AsyncSoc` and the awaitable forms of the cv/nn helpers.

Awaiting never blocks the event loop: a task's completion resolves a future. On an AsyncSoc
(``arm_side.async_client``) the readers are coroutines of the same loop; a plain ``Soc``'s task
can be awaited too (its reader thread resolves the future, and ``release_task`` runs its
blocking release in the loop's default executor).
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Generator, TypeVar

from protocol import errors
from protocol.cancel import CancelOutcome
from arm_side.task import Request, Task

T = TypeVar("T")


async def wait_request(req: Request, timeout_ms: float = 0) -> Any:
    """``await`` form of ``req.wait(timeout_ms)``: the same values, the same errors.

    ``timeout_ms <= 0`` waits for ever. The timeout is on a future of the request, never on a
    receive: on TaskTimeout the request stays in flight, as with ``Request.wait``.
    """
    if not req.done():
        fut = req._as_future()
        try:
            if timeout_ms and timeout_ms > 0:
                await asyncio.wait_for(fut, timeout_ms / 1000.0)
            else:
                await fut
        except TimeoutError:     # asyncio.TimeoutError is TimeoutError since 3.11
            what = "task" if isinstance(req, Task) else "request"
            raise errors.TaskTimeout(f"{what} {req.msg_id} not done after {timeout_ms:.0f} ms; it is still in "
                                     "flight, wait again to collect it") from None
        except errors.VdspError:
            pass    # raised below, exactly as the blocking call does
    if req.error is not None:
        raise req.error
    return req._result()


async def wait_task(task: Task, timeout_ms: float = 0) -> dict:
    """``await`` form of ``task.wait(timeout_ms)``: the same values, the same errors.

    ``timeout_ms <= 0`` waits for ever. On TaskTimeout the task stays in flight, as with
    ``Task.wait``: a later wait can still collect it, ``task.release()`` gives it up.
    """
    if task.released:
        raise errors.InvalidTaskHandle(f"task {task.msg_id} was released")
    return await wait_request(task, timeout_ms)


async def release_task(task: Task) -> str:
    """``task.release()`` without blocking the loop: awaited on an AsyncSoc's task, in a worker
    thread on a blocking Soc's."""
    release_async = getattr(task.client, "release_async", None)
    if release_async is None:
        return await in_thread(task.release)
    if task.released or task.done():
        task.released = True
        return CancelOutcome.UNKNOWN.value
    task.released = True
    return await release_async(task)


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run a blocking call in the loop's default executor (a blocking Soc's, never an AsyncSoc's)."""
    return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args))


class AsyncTask:
    """A submitted task seen from asyncio: ``await`` it for what ``Task.wait`` returns.

    Returned by ``AsyncSoc.rpc(..., timeout_ms=...)``: awaiting it applies that timeout
    (TaskTimeout, the task stays in flight). Every attribute of the :class:`Task`
    (``msg_id``, ``values``, ``core``, ``exec_us``, ``board_us``, ``done()`` ...) is available here too.
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
        return await release_task(self.task)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.task, name)

    def __repr__(self) -> str:
        return f"AsyncTask({self.task.msg_id}, op=0x{self.task.op:04x}, done={self.task.done()})"

"""Tasks: futures for requests sent to the SoC (wait with a timeout, release, callbacks)."""
from __future__ import annotations

import dataclasses
import os
import select
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

from protocol import errors
from protocol.cancel import CancelOutcome
from protocol.task_options import DEFAULT, TaskOptions
from vdsp_board.config import settings

if TYPE_CHECKING:     # imported by _as_future, when a task is awaited (arm_side.soc says why)
    import asyncio

DEFAULT_WAIT_MS = 10000.0


def default_wait_ms() -> float:
    """How long a wait that the caller gives no timeout lasts (``Soc.call``, ``Soc.batch``, the cv
    functions): ``VDSP_TASK_WAIT_MS``, else 10 s (0: no limit)."""
    value = settings.current().task_wait_ms
    return DEFAULT_WAIT_MS if value is None else value

_OPTIONS: dict = {}     # (wait default, loose keywords and their types) -> the TaskOptions they make
_OPTIONS_MAX = 256


def task_options(options: TaskOptions | None, loose: Mapping[str, Any],
                 wait_default: float | None = None) -> TaskOptions:
    """``TaskOptions.of(options, **loose)`` (with ``wait_default``: its ``timeout_ms`` set to
    ``wait_ms(wait_default)``), remembered for ``options`` None: a call's loose keywords
    (``core=CORE_0``) are a handful of values repeated call after call, and a TaskOptions is
    frozen, so each distinct set is checked and built once. The key holds each value's type as
    well (``core=True`` is refused although ``True == 1``); an unhashable value goes to
    ``TaskOptions.of``, which refuses it."""
    key: Any = None
    if options is None:
        try:
            if len(loose) == 1:     # the usual call (core=...): a flat key, built in a third of the time
                ((name, value),) = loose.items()
                key = (wait_default, name, value, type(value))
            else:
                key = (wait_default, *loose.items(), *map(type, loose.values()))
            return _OPTIONS[key]
        except KeyError:
            pass
        except TypeError:       # an unhashable value: not a valid option anyway
            key = None
    opts = TaskOptions.of(options, **loose)
    if wait_default is not None:
        opts = dataclasses.replace(opts, timeout_ms=opts.wait_ms(wait_default))
    if key is not None and len(_OPTIONS) < _OPTIONS_MAX:
        _OPTIONS[key] = opts
    return opts


class _Waker:
    """What a thread blocked in ``Request.wait`` sleeps on: an eventfd, written by the thread that
    completes the request (the thread that reads, ``arm_side.reading``). ``os.eventfd_write``
    lets go of the GIL before it wakes the sleeper, so the woken thread seldom has to wait for the
    GIL as well (a ``threading.Lock`` released by the reader wakes it while the reader still holds
    the GIL: a second wake-up, one more voluntary switch per task measured, and no less CPU)."""

    def __init__(self) -> None:
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.poll = select.poll()
        self.poll.register(self.fd, select.POLLIN)

    def __call__(self, req: "Request") -> None:
        """A done-callback: wake the thread (from a reader that defers its wake-ups: when it
        calls :func:`wake_deferred`, just before it sleeps and lets go of the GIL)."""
        deferred = _THREAD.__dict__.get("deferred")
        if deferred is None:
            self.wake()
        else:
            deferred.append(self)

    def wake(self) -> None:
        os.eventfd_write(self.fd, 1)

    def sleep(self, timeout_s: float | None) -> None:
        """Until woken (or a wake-up left from an earlier wait), at most ``timeout_s`` (None: no limit)."""
        if self.poll.poll(None if timeout_s is None else max(0.0, timeout_s) * 1000):
            try:
                os.eventfd_read(self.fd)
            except BlockingIOError:
                pass

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except (OSError, AttributeError, TypeError):     # already closed; interpreter shutdown
            pass


_THREAD = threading.local()     # each thread's _Waker, made at its first blocking wait
os.register_at_fork(after_in_child=lambda: _THREAD.__dict__.clear())    # the parent's eventfd is not ours


def defer_wakes() -> list:
    """This thread (a reader) defers the wake-ups of the threads whose requests it completes until
    :func:`wake_deferred`. Returns the list of wakers it keeps meanwhile (the reader may wake
    them itself: ``deferred.pop().wake()``)."""
    deferred: list = []
    _THREAD.deferred = deferred
    return deferred


def wake_deferred() -> None:
    deferred = _THREAD.deferred
    while deferred:
        deferred.pop().wake()


def undefer_wakes() -> None:
    """This thread no longer reads: it wakes the threads whose requests it completes at once."""
    _THREAD.__dict__.pop("deferred", None)


def waker() -> _Waker:
    """This thread's waker (made at its first blocking wait)."""
    made = _THREAD.__dict__.get("waker")
    if made is None:
        made = _THREAD.waker = _Waker()
    return made


class Request:
    """A request in flight, keyed by msg_id; completed exactly once by the reader (the blocking
    client's thread that reads at the time, or the asyncio client's reader coroutine). ``client``: the driver it
    was sent by, which blocks in :meth:`wait` (``client.wait_for``) as it can."""

    # Slots: the compiled task path (arm_side/taskpath.c) reads and writes them at their offsets, not
    # by name; a request still takes other attributes (its __dict__), and weak references.
    __slots__ = ("client", "msg_id", "_done", "_callbacks", "_cb_lock", "body", "raw", "header", "error",
                 "submitted_at", "completed_at", "__dict__", "__weakref__")

    def __init__(self, client: Any, msg_id: int) -> None:
        self.client, self.msg_id = client, msg_id
        self._done = False
        self._callbacks: list[Callable] = []
        self._cb_lock = threading.Lock()
        self.body: dict = {}
        self.raw: list = []
        self.header: tuple = ()
        self.error: errors.VdspError | None = None
        self.submitted_at = time.perf_counter()
        self.completed_at = 0.0  # perf_counter() when the reply arrived

    def done(self) -> bool:
        return self._done

    def _complete(self, body: dict | None, error: errors.VdspError | None, header: tuple = (),
                  raw: list | None = None) -> bool:
        """Record the outcome (first call wins) and run callbacks. Returns False if already done."""
        with self._cb_lock:
            if self._done:
                return False
            self.body, self.error, self.header, self.raw = body or {}, error, header, raw or []
            self.completed_at = time.perf_counter()
            self._on_complete()
            self._done = True
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            self._run_callback(cb)
        return True

    def _on_complete(self) -> None:
        """Hook for subclasses (runs once, before waiters wake)."""

    def _result(self) -> dict:
        """What ``wait`` and ``await`` return once done without error."""
        return self.body

    def _run_callback(self, cb: Callable) -> None:
        try:
            cb(self)
        except Exception:  # a user callback must not kill the reader
            import logging
            logging.getLogger("vdsp.sdk").exception("task done-callback raised")

    def add_done_callback(self, cb: Callable[["Request"], None]) -> None:
        """Call ``cb(task)`` when the task ends (at once if it already has), in the thread that
        reads its reply (as soon as the reply arrives, whoever waits or not: the thread waiting for
        it, another waiting one, a thread whose send found the reply waiting while no thread read,
        or the SDK's reader thread; the asyncio client's reader
        coroutine), which owns the session then (``arm_side.links``): it may submit, not wait."""
        with self._cb_lock:
            if not self._done:
                self._callbacks.append(cb)
                return
        self._run_callback(cb)

    def _block(self, timeout_s: float | None, closed: Callable[[], bool]) -> None:
        """Block this thread until the request ends; the thread that reads its reply wakes it
        (``timeout_s`` None: no limit). Raises TaskTimeout (the request stays in flight), or
        ApiUseError if ``closed()`` says its connection was closed meanwhile."""
        sleeper = waker()
        with self._cb_lock:
            if self._done:
                return
            self._callbacks.append(sleeper)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while not self._done:
                if closed():
                    raise errors.ApiUseError("the SoC connection was closed while waiting")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise errors.TaskTimeout(f"request {self.msg_id} not done after {(timeout_s or 0) * 1000:.0f} "
                                             "ms; it is still in flight, wait again to collect it")
                sleeper.sleep(remaining)
        finally:
            if not self._done:
                with self._cb_lock:
                    if sleeper in self._callbacks:
                        self._callbacks.remove(sleeper)

    def wait(self, timeout_ms: float = 0) -> dict:
        """Block until done; ``timeout_ms <= 0`` waits forever.

        Returns the reply body. Raises TaskTimeout (the request stays in flight and a
        later wait can still collect it) or the error the SoC replied with.
        """
        if not self._done:
            self.client.wait_for(self, None if timeout_ms <= 0 else timeout_ms / 1000.0)
        if self.error is not None:
            raise self.error
        return self.body

    def __await__(self):
        return self._as_future().__await__()

    def _as_future(self) -> asyncio.Future:
        """A future of the running loop resolved when the request ends (by the loop's own reader
        for an AsyncSoc, else through ``call_soon_threadsafe`` from the reader thread)."""
        import asyncio
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        loop_thread = threading.get_ident()

        def resolve(req: "Request") -> None:
            def settle() -> None:
                if fut.done():
                    return
                if req.error is not None:
                    fut.set_exception(req.error)
                else:
                    fut.set_result(req._result())
            if threading.get_ident() == loop_thread:
                settle()
            else:
                loop.call_soon_threadsafe(settle)
        self.add_done_callback(resolve)
        return fut


BOARD_MODELS = ("cycles", "table")     # RESULT's board_model values (PROTOCOL.md §5.3)
_INF = float("inf")


class Task(Request):
    """A TASK on a DSP core, submitted with ``options`` (``protocol.task_options``). After it
    ends: ``values`` (the operator's result), ``core`` (which core ran it), ``exec_us``
    (compute time on the DSP), ``queue_us`` (time queued in the relay; 0 in direct mode),
    ``latency_us`` (submit to reply), ``board_us`` (the firmware's estimate of the task's time
    on a J5 DSP, None when it gave none) and ``board_model`` (how it was got: ``"cycles"``
    counted from a C kernel, ``"table"`` from a Python operator's table entry; None)
    (PROTOCOL.md §5.3, docs/dsp_kernels.md "Board time")."""

    __slots__ = ("op", "outputs", "options", "core", "values", "exec_us", "queue_us", "board_us", "board_model",
                 "released")

    def __init__(self, client: Any, msg_id: int, op: int, outputs: list, core_name: str = "", *,
                 options: TaskOptions = DEFAULT) -> None:
        # (the compiled submit makes a Task in arm_side/taskpath.c, make_task, as this and
        # Request.__init__ do, slot by slot: a change here is made there too)
        super().__init__(client, msg_id)
        self.op, self.outputs, self.options = op, outputs, options
        self.core = core_name
        self.values: dict = {}
        self.exec_us = 0
        self.queue_us = 0
        self.board_us: float | None = None
        self.board_model: str | None = None
        self.released = False

    def _on_complete(self) -> None:
        # (the compiled build completes a RESULT's Task in arm_side/taskpath.c, complete_task, as this
        # and Request._complete do: a change here is made there too; tests/tools/test_native.py compares)
        get = self.body.get
        self.values = get("values", {})
        self.core = get("core", self.core)
        self.exec_us = get("exec_us", 0)
        us = get("board_us")
        if us is not None:      # a peer may lie: kept only if what PROTOCOL.md §5.3 says (no bool, NaN, inf)
            kind, model = us.__class__, get("board_model")
            if (kind is float or kind is int) and 0 <= us < _INF and model in BOARD_MODELS:
                self.board_us, self.board_model = float(us), model
        if self.header:
            queued = self.header[5]
            self.queue_us = queued if queued > 0 else 0
        if self.error is None and self.outputs:
            self.client.after_task(self)
        tracer = self.client.tracer     # a Task's client is a Client or an AsyncClient (Links.submit): it has one
        if tracer.rec.on:               # complete's own test, without its call and keywords
            tracer.complete(self.msg_id, code=self.error.code if self.error else 0, core=self.core,
                            exec_us=self.exec_us, queue_us=self.queue_us)

    def _result(self) -> dict:
        return self.values

    @property
    def latency_us(self) -> float:
        return (self.completed_at - self.submitted_at) * 1e6 if self.completed_at else 0.0

    def wait(self, timeout_ms: float | None = None) -> dict:
        """Wait for the task; returns the operator's result values (see Request.wait).
        ``timeout_ms`` None: the task's ``options.timeout_ms``, else for ever."""
        if self.released:
            raise errors.InvalidTaskHandle(f"task {self.msg_id} was released")
        tracer = self.client.tracer     # a Task's client has one (see _on_complete)
        t0 = tracer.wait_begin() if tracer.rec.on else 0     # wait_begin's own test first
        if not self._done:
            if timeout_ms is None:
                timeout_ms = self.options.timeout_ms or 0       # options.wait_ms(0), without its call
            try:      # Request.wait, without its call
                self.client.wait_for(self, None if timeout_ms <= 0 else timeout_ms / 1000.0)
            finally:
                if t0:
                    tracer.wait_end(self.msg_id, t0)
        elif t0:
            tracer.wait_end(self.msg_id, t0)
        if self.error is not None:
            raise self.error
        return self.values

    def release(self) -> str:
        """Give the task up: a queued task is removed (never runs), a running task's
        result is discarded. Returns a ``protocol.cancel.CancelOutcome`` value: ``cancelled``,
        ``running`` or ``unknown`` (it had finished already, or was released before)."""
        if self.released or self.done():
            self.released = True
            return CancelOutcome.UNKNOWN.value
        self.released = True
        return self.client.release(self)

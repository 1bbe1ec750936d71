"""The user-facing SDK: ``Soc`` (blocking) and ``AsyncSoc`` (asyncio).

::

    with Soc() as soc:
        src = soc.mem.alloc_cached(1 << 20); dst = soc.mem.alloc(1 << 20)
        src.array()[:] = 7; src.flush(CLEAN)
        task = soc.rpc(cmd=MEMCPY, inputs=[src], outputs=[dst], core=CORE_ANY, priority=0)
        task.wait(timeout_ms=1000)

Relay mode is the default; ``VDSP_RPC_MODE=direct`` (or ``mode="direct"``) talks
to the cores without a relay.
"""
from __future__ import annotations

import contextlib
import os
import types
from typing import TYPE_CHECKING, Any, Sequence, Unpack

from protocol import errors, messages
from protocol.constants import Core
from protocol.task_options import SubmitKw, TaskKw, TaskOptions
from arm_side import interrupts, tracing
from arm_side.client import Client
from arm_side.memory import Mem, MemoryManager
from arm_side.reading import _C, bind_compiled
from arm_side.task import _OPTIONS, Task, default_wait_ms, task_options
from arm_side.transport import Transport, ZmqTransport
from vdsp_board.config import settings
from vdsp_board.memory import ddr

if TYPE_CHECKING:  # asyncio (with ssl and concurrent.futures: ~0.1 s of CPU) is imported by AsyncSoc's
    # methods when they run: a process with blocking Socs only (each `vdsp` command) never imports it
    from arm_side.aio import AsyncTask
    from arm_side.async_client import AsyncClient


_NO_BUFFERS: tuple = ()      # the default of ``inputs`` / ``outputs``: no buffer to look at


def _handles(buffers: Sequence[Any], what: str, memory: MemoryManager, check: bool) -> tuple[list, list]:
    """Wire handles for Mems (or raw ``(phys, size[, flags])`` tuples), and the Mems."""
    handles, mems = [], []
    for i, buf in enumerate(buffers):
        if isinstance(buf, Mem):
            if buf.freed:
                raise errors.SysInvalidArgument(f"{what}[{i}]: memory 0x{buf.phys_addr:x} was freed")
            if check:
                memory.check_before_submit(buf)
            handles.append(buf.handle())
            mems.append(buf)
        elif isinstance(buf, (tuple, list)) and len(buf) in (2, 3):
            handles.append([int(buf[0]), int(buf[1]), int(buf[2]) if len(buf) == 3 else 0])
        else:
            raise errors.InvalidArgument(f"{what}[{i}] must be a Mem or (phys_addr, size), got {type(buf).__name__}")
    return handles, mems


class Soc:
    """A connection to the simulated SoC plus this process's shared memory."""

    def __init__(self, mode: str | None = None, *, transport: Transport | None = None,
                 strict: bool | None = None, connect_timeout_s: float = 20.0, autostart_relay: bool = True,
                 busy_poll_us: int | None = None, trace: str | os.PathLike | None = None) -> None:
        """``trace``: a path: the whole SoC is traced while this Soc lives and the merged
        Chrome/Perfetto trace is written there at close() (``arm_side.tracing.SocTrace``).
        ``transport`` (``arm_side.transport``): the links to the SoC, and where its servers are
        (its ``discovery``, ``arm_side.discovery``); by default a ``ZmqTransport`` of ``mode``
        (``relay`` or ``direct``; default ``$VDSP_RPC_MODE``, else relay) for the runtime dir of
        ``$VDSP_RUNTIME_DIR``. ``busy_poll_us`` (``$VDSP_BUSY_POLL_US``) is accepted and has no
        effect (``arm_side.client``)."""
        if busy_poll_us is None:
            busy_poll_us = settings.current().busy_poll_us
        own = transport is None
        if transport is None:
            mode = mode or settings.current().rpc_mode
            if mode not in ("relay", "direct"):
                raise errors.InvalidArgument(f"VDSP_RPC_MODE must be relay or direct, got {mode!r}")
            transport = ZmqTransport(mode, autostart_relay=autostart_relay)
        mem: MemoryManager | None = None
        try:
            self.mem = mem = MemoryManager(strict=strict)
            owner = ddr.current_owner()
            self.client: Client | AsyncClient = Client(
                transport, owner=owner.id, connect_timeout_s=connect_timeout_s, busy_poll_us=busy_poll_us,
                own_transport=own, lock_fd=owner.lock_fd)
        except BaseException:       # a refusal, or an interruption at any moment (arm_side.interrupts)
            with contextlib.suppress(Exception):    # the first exception is the news
                interrupts.each(transport.close if own else lambda: None,
                                mem.close if mem is not None else lambda: None)
            raise
        self.client.memory = self.mem
        self._trace = tracing.SocTrace(trace).start() if trace else None
        self.mode = transport.mode
        self._compiled_rpc()

    def _compiled_rpc(self) -> None:
        """The compiled build: this Soc's ``rpc`` is ``arm_side/taskpath.c``'s for the usual call,
        ``rpc(op)`` or ``rpc(op, core=...)`` (0.8-2.3 µs of the client's CPU a task less in a window
        of 32, 2-4 µs sequentially: vdsp_sim/benchmarks/README.md), and this class's Python for
        every other call (a subclass's own ``rpc`` stays its own)."""
        if _C is not None and type(self).rpc is Soc.rpc and getattr(self.client, "_submit_c", None) is not None:
            bind_compiled(self, "rpc", types.MethodType(Soc.rpc, self), _C.rpc, self.client, _OPTIONS)

    @classmethod
    def _over(cls, client: Client | AsyncClient, mem: MemoryManager, trace: tracing.SocTrace | None = None) -> "Soc":
        """A Soc over a client already connected (an AsyncSoc's: its calls that never block)."""
        soc = cls.__new__(cls)
        soc.client, soc.mem, soc._trace, soc.mode = client, mem, trace, client.mode
        client.memory = mem
        return soc

    # --- tasks ----------------------------------------------------------------------------
    def rpc(self, cmd: int, inputs: Sequence = (), outputs: Sequence = (), params: dict | None = None, *,
            options: TaskOptions | None = None, **task: Unpack[TaskKw]) -> Task:
        """Submit operator ``cmd`` on shared buffers; returns a Task at once.

        ``options``: a :class:`~protocol.task_options.TaskOptions` (core, priority, custom_id,
        timeout_ms: the default of ``Task.wait``); or its fields as keywords (``core=CORE_1``),
        which replace the same fields of ``options``.

        Raises InvalidArgument, InvalidCore, SysInvalidArgument (freed buffer),
        CacheCoherencyError (strict mode), TaskNumExceedLimit, CoreOffline, RelayUnavailable.
        """
        opts = task_options(options, task)
        in_h = _handles(inputs, "inputs", self.mem, True)[0] if inputs is not _NO_BUFFERS else []
        out_h, out_mems = _handles(outputs, "outputs", self.mem, False) if outputs is not _NO_BUFFERS else ([], [])
        return self.client.submit(cmd, in_h, out_h, dict(params) if params else {}, opts, out_mems=out_mems)

    def call(self, cmd: int, inputs: Sequence = (), outputs: Sequence = (), params: dict | None = None,
             timeout_ms: float | None = None, *, options: TaskOptions | None = None, **task: Unpack[SubmitKw]) -> dict:
        """``rpc`` then ``wait``: the operator's result values (``timeout_ms``: else the options',
        else ``VDSP_TASK_WAIT_MS``, else 10000)."""
        opts = TaskOptions.of(options, timeout_ms=timeout_ms, **task)
        return self.rpc(cmd, inputs, outputs, params, options=opts).wait(opts.wait_ms(default_wait_ms()))

    def batch(self, cmd: int, items: Sequence[dict], *, timeout_ms: float | None = None,
              options: TaskOptions | None = None, **task: Unpack[SubmitKw]) -> list[dict]:
        """Run one operator on a batch split over both cores: the first half of ``items`` on
        CORE_0, the rest on CORE_1 (like multi-batch inference over two NPU cores); results
        come back in item order. Each item is ``{"inputs": [...], "outputs": [...], "params": {...}}``.
        ``options`` (or its fields as keywords) as ``rpc``; its core is replaced per item.

        Raises the first item's error (after every task has ended), or TaskTimeout.
        """
        opts = TaskOptions.of(options, timeout_ms=timeout_ms, **task)
        half = (len(items) + 1) // 2
        tasks = []
        for i, item in enumerate(items):
            tasks.append(self.rpc(cmd, item.get("inputs", ()), item.get("outputs", ()), item.get("params"),
                                  options=opts, core=Core.CORE_0 if i < half else Core.CORE_1))
        results: list = []
        first_error: errors.VdspError | None = None
        for t in tasks:
            try:
                results.append(t.wait(opts.wait_ms(default_wait_ms())))
            except errors.VdspError as exc:
                first_error = first_error or exc
                results.append(None)
        if first_error is not None:
            raise first_error
        return results

    # --- control and queries --------------------------------------------------------------
    def query(self, what: str = "cores", timeout_ms: float = 5000) -> dict:
        """Relay mode: the relay's view (``cores`` or ``stats``). Direct mode: each core's status."""
        if self.client.mode == "relay":
            return self.client.request(messages.query(next(self.client.ids), what)).wait(timeout_ms)
        cores = []
        for peer in self.client.peers:
            if not peer.alive:
                cores.append({"name": peer.name, "state": self.client.core_states.get(peer.name, "unreachable")})
                continue
            cores.append(self.client.request(messages.query(next(self.client.ids), "status"), peer.name).wait(timeout_ms))
        return {"cores": cores}

    def control(self, core: str, attr: str, value: str | None = None, timeout_ms: float = 30000) -> str:
        """Read (value None) or write a remoteproc attribute of ``core``; returns its value.

        Raises RemoteprocBusy / RemoteprocInvalid (EBUSY / EINVAL) like the sysfs files.
        """
        msg = messages.control(next(self.client.ids), core, attr, value)
        return self.client.request(msg, core).wait(timeout_ms).get("value", "")

    def on_event(self, callback) -> None:
        """Call ``callback(body)`` for every core state EVENT (running, offline, crashed)."""
        self.client.event_callbacks.append(callback)

    @property
    def core_states(self) -> dict[str, str]:
        return dict(self.client.core_states)

    # --- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        """Disconnect and free every buffer this Soc allocated (all of it, when a signal's
        exception interrupts it: ``arm_side.interrupts``)."""
        interrupts.each(self.client.close, self.mem.close, self._finish_trace)

    def _finish_trace(self) -> None:
        trace, self._trace = self._trace, None
        if trace is not None:
            trace.finish()

    def __enter__(self) -> "Soc":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncSoc:
    """asyncio face of :class:`Soc`, call for call, never blocking the event loop::

        async with AsyncSoc() as soc:
            values = await soc.rpc(MEMCPY, [src], [dst], timeout_ms=1000)   # = task.wait(1000)
            task = soc.rpc(SLEEP, params={"ms": 50})        # submitted at once
            values = await soc.wait(task, timeout_ms=500)   # or: await task

    ``rpc`` submits at once and returns an :class:`~arm_side.aio.AsyncTask`; awaiting it
    returns what ``Task.wait`` returns (the operator's values) and raises what it raises,
    TaskTimeout after ``timeout_ms`` (<= 0, the default as for ``Task.wait``: no limit).
    The cv and nn helpers take an AsyncSoc too and then return awaitables.

    It runs on pyzmq's asyncio sockets with no thread of its own (``arm_side.async_client``):
    use it from the thread of the event loop that opened it.
    """

    def __init__(self, mode: str | None = None, *, transport: Transport | None = None, strict: bool | None = None,
                 connect_timeout_s: float = 20.0, autostart_relay: bool = True, busy_poll_us: int | None = None,
                 trace: str | os.PathLike | None = None) -> None:
        """The arguments of :class:`Soc` (``busy_poll_us`` has no use here: nothing spins); the
        connection opens in ``async with`` (or ``await open()``)."""
        self._mode, self._transport, self._strict = mode, transport, strict
        self._connect_timeout_s, self._autostart_relay, self._trace_path = connect_timeout_s, autostart_relay, trace
        self._soc: Soc | None = None

    async def open(self) -> "AsyncSoc":
        """Connect (waiting for the relay, or starting one, as ``Soc()`` does, without blocking the
        loop). Raises what ``Soc()`` raises. ``trace=`` blocks while the SoC's tracing starts."""
        if self._soc is not None:
            return self
        from arm_side.async_client import AsyncClient
        transport, own = self._transport, self._transport is None
        if transport is None:
            mode = self._mode or settings.current().rpc_mode
            if mode not in ("relay", "direct"):
                raise errors.InvalidArgument(f"VDSP_RPC_MODE must be relay or direct, got {mode!r}")
            transport = ZmqTransport(mode, autostart_relay=self._autostart_relay)
        mem = MemoryManager(strict=self._strict)
        owner = ddr.current_owner()
        try:
            client = AsyncClient(transport, owner=owner.id, connect_timeout_s=self._connect_timeout_s,
                                 own_transport=own, lock_fd=owner.lock_fd)
            await client.connect()
        except BaseException:
            mem.close()
            raise
        trace = tracing.SocTrace(self._trace_path).start() if self._trace_path else None
        self._soc = Soc._over(client, mem, trace)
        return self

    async def close(self) -> None:
        """Disconnect and free this Soc's buffers."""
        from arm_side.async_client import AsyncClient
        soc, self._soc = self._soc, None
        if soc is not None:
            assert isinstance(soc.client, AsyncClient)
            await soc.client.aclose()
            soc.mem.close()
            trace, soc._trace = soc._trace, None
            if trace is not None:
                trace.finish()

    async def __aenter__(self) -> "AsyncSoc":
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def soc(self) -> Soc:
        """A :class:`Soc` over this connection, for the calls that never block (``rpc``, ``mem``);
        its blocking waits raise ApiUseError on the loop's thread (they would stop the loop that
        reads the replies) and block in another thread."""
        if self._soc is None:
            raise errors.ApiUseError("the AsyncSoc is not open: use 'async with AsyncSoc() as soc' "
                                     "or 'await soc.open()'")
        return self._soc

    @property
    def _client(self) -> AsyncClient:
        from arm_side.async_client import AsyncClient
        client = self.soc.client
        assert isinstance(client, AsyncClient)
        return client

    @property
    def mem(self) -> MemoryManager:
        return self.soc.mem

    @property
    def mode(self) -> str:
        return self.soc.mode

    def rpc(self, cmd: int, inputs: Sequence = (), outputs: Sequence = (), params: dict | None = None, *,
            options: TaskOptions | None = None, **task: Unpack[TaskKw]) -> AsyncTask:
        """Submit now (errors of submission raise here, as ``Soc.rpc``); ``await`` the returned
        AsyncTask for the values, with the options' ``timeout_ms`` (None or <= 0: no limit).
        ``options`` and its fields as keywords as ``Soc.rpc``."""
        from arm_side.aio import AsyncTask
        opts = task_options(options, task)
        return AsyncTask(self.soc.rpc(cmd, inputs, outputs, params, options=opts), opts.wait_ms(0))

    async def wait(self, task: Task | AsyncTask, timeout_ms: float = 0) -> dict:
        """``task.wait(timeout_ms)``, awaited: the values, or the task's error, or TaskTimeout
        (the task stays in flight; wait again or release it)."""
        from arm_side.aio import AsyncTask, wait_task
        return await wait_task(task.task if isinstance(task, AsyncTask) else task, timeout_ms)

    async def call(self, cmd: int, inputs: Sequence = (), outputs: Sequence = (), params: dict | None = None,
                   timeout_ms: float | None = None, *, options: TaskOptions | None = None,
                   **task: Unpack[SubmitKw]) -> dict:
        """``rpc`` then ``wait`` (``Soc.call``, awaited; ``timeout_ms``: else the options', else
        ``VDSP_TASK_WAIT_MS``, else 10000)."""
        opts = TaskOptions.of(options, timeout_ms=timeout_ms, **task)
        return await self.rpc(cmd, inputs, outputs, params, options=opts, timeout_ms=opts.wait_ms(default_wait_ms()))

    async def batch(self, cmd: int, items: Sequence[dict], *, timeout_ms: float | None = None,
                    options: TaskOptions | None = None, **task: Unpack[SubmitKw]) -> list[dict]:
        """``Soc.batch``, awaited: items split over CORE_0 and CORE_1, results in item order;
        raises the first item's error after every task has ended."""
        import asyncio
        from arm_side.aio import wait_task
        opts = TaskOptions.of(options, timeout_ms=timeout_ms, **task)
        half = (len(items) + 1) // 2
        tasks = [self.soc.rpc(cmd, item.get("inputs", ()), item.get("outputs", ()), item.get("params"),
                              options=opts, core=Core.CORE_0 if i < half else Core.CORE_1)
                 for i, item in enumerate(items)]
        wait = opts.wait_ms(default_wait_ms())
        outcomes = await asyncio.gather(*(wait_task(t, wait) for t in tasks), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return list(outcomes)   # type: ignore[arg-type]

    async def query(self, what: str = "cores", timeout_ms: float = 5000) -> dict:
        """``Soc.query``, awaited."""
        from arm_side.aio import wait_request
        client = self._client
        if client.mode == "relay":
            return await wait_request(client.request(messages.query(next(client.ids), what)), timeout_ms)
        cores = []
        for peer in client.peers:
            if not peer.alive:
                cores.append({"name": peer.name, "state": client.core_states.get(peer.name, "unreachable")})
                continue
            msg = messages.query(next(client.ids), "status")
            cores.append(await wait_request(client.request(msg, peer.name), timeout_ms))
        return {"cores": cores}

    async def control(self, core: str, attr: str, value: str | None = None, timeout_ms: float = 30000) -> str:
        """``Soc.control``, awaited."""
        from arm_side.aio import wait_request
        client = self._client
        msg = messages.control(next(client.ids), core, attr, value)
        return (await wait_request(client.request(msg, core), timeout_ms)).get("value", "")

    def on_event(self, callback) -> None:
        """As ``Soc.on_event`` (the callback runs on the event loop, in the reader)."""
        self.soc.on_event(callback)

    @property
    def core_states(self) -> dict[str, str]:
        return self.soc.core_states

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

import asyncio
import os
from typing import Any, Sequence

from protocol import errors, messages
from protocol.constants import Core, HANDLE_REGISTERED
from arm_side.client import Client
from arm_side.memory import Mem, MemoryManager
from arm_side.task import Task
from vdsp_sim.board import ddr


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

    def __init__(self, mode: str | None = None, *, strict: bool | None = None,
                 connect_timeout_s: float = 20.0, autostart_relay: bool = True,
                 busy_poll_us: int | None = None) -> None:
        """``busy_poll_us`` (default ``$VDSP_BUSY_POLL_US``, else 0): a waiting thread spins
        that long before it sleeps — lower latency, one busy CPU while waiting."""
        mode = mode or os.environ.get("VDSP_RPC_MODE", "relay")
        if busy_poll_us is None:
            busy_poll_us = int(os.environ.get("VDSP_BUSY_POLL_US", "0") or 0)
        self.mem = MemoryManager(strict=strict)
        owner = ddr.current_owner().id
        try:
            self.client = Client(mode, owner=owner, connect_timeout_s=connect_timeout_s,
                                 autostart_relay=autostart_relay, busy_poll_us=busy_poll_us)
        except BaseException:
            self.mem.close()
            raise
        self.client.memory = self.mem
        self.mode = mode

    # --- tasks ----------------------------------------------------------------------------
    def rpc(self, cmd: int, inputs: Sequence = (), outputs: Sequence = (), params: dict | None = None, *,
            core: int = Core.ANY, priority: int = 0, custom_id: int = 0) -> Task:
        """Submit operator ``cmd`` on shared buffers; returns a Task at once.

        Raises InvalidArgument, InvalidCore, SysInvalidArgument (freed buffer),
        CacheCoherencyError (strict mode), TaskNumExceedLimit, CoreOffline, RelayUnavailable.
        """
        in_h, _ = _handles(inputs, "inputs", self.mem, True)
        out_h, out_mems = _handles(outputs, "outputs", self.mem, False)
        return self.client.submit(cmd, in_h, out_h, dict(params or {}), core=core, priority=priority,
                                  custom_id=custom_id, out_mems=out_mems)

    def call(self, cmd: int, inputs: Sequence = (), outputs: Sequence = (), params: dict | None = None,
             timeout_ms: float = 10000, **kw) -> dict:
        """``rpc`` then ``wait``: the operator's result values."""
        return self.rpc(cmd, inputs, outputs, params, **kw).wait(timeout_ms)

    def batch(self, cmd: int, items: Sequence[dict], *, timeout_ms: float = 10000, priority: int = 0,
              custom_id: int = 0) -> list[dict]:
        """Run one operator on a batch split over both cores: the first half of ``items`` on
        CORE_0, the rest on CORE_1 (like multi-batch inference over two NPU cores); results
        come back in item order. Each item is ``{"inputs": [...], "outputs": [...], "params": {...}}``.

        Raises the first item's error (after every task has ended), or TaskTimeout.
        """
        half = (len(items) + 1) // 2
        tasks = []
        for i, item in enumerate(items):
            tasks.append(self.rpc(cmd, item.get("inputs", ()), item.get("outputs", ()), item.get("params"),
                                  core=Core.CORE_0 if i < half else Core.CORE_1, priority=priority,
                                  custom_id=custom_id))
        results, first_error = [], None
        for task in tasks:
            try:
                results.append(task.wait(timeout_ms))
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
        """Disconnect and free every buffer this Soc allocated."""
        self.client.close()
        self.mem.close()

    def __enter__(self) -> "Soc":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncSoc:
    """asyncio face of :class:`Soc`: ``async with AsyncSoc() as soc: await soc.rpc(...)``."""

    def __init__(self, mode: str | None = None, **kw: Any) -> None:
        self._args, self._kw = mode, kw
        self._soc: Soc | None = None

    async def __aenter__(self) -> "AsyncSoc":
        loop = asyncio.get_running_loop()
        self._soc = await loop.run_in_executor(None, lambda: Soc(self._args, **self._kw))
        return self

    async def __aexit__(self, *exc) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._soc.close)

    @property
    def mem(self) -> MemoryManager:
        return self._soc.mem

    def rpc(self, *args: Any, **kw: Any) -> Task:
        """Submit at once; ``await task`` for its result (values, as ``Task.wait``)."""
        return self._soc.rpc(*args, **kw)

    async def call(self, *args: Any, timeout_ms: float = 10000, **kw: Any) -> dict:
        task = self._soc.rpc(*args, **kw)
        try:
            await asyncio.wait_for(task, timeout_ms / 1000)
        except asyncio.TimeoutError:
            raise errors.TaskTimeout(f"task {task.msg_id} not done after {timeout_ms} ms") from None
        return task.values

    async def query(self, what: str = "cores") -> dict:
        return await asyncio.get_running_loop().run_in_executor(None, self._soc.query, what)

    async def control(self, core: str, attr: str, value: str | None = None) -> str:
        return await asyncio.get_running_loop().run_in_executor(None, self._soc.control, core, attr, value)

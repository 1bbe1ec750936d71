"""One task-options value (protocol.task_options.TaskOptions): what it accepts, how the loose
keywords build it, its wire encoding, and that every entry point (Soc.rpc, the stubs, the cv
helpers, hb) sends the same TASK header for the value as for its keywords (loopback SoC)."""
from __future__ import annotations

import pytest

from arm_side import CORE_0, CORE_1, Soc, TaskOptions, cv, errors, hb, opids
from arm_side.stubs import framework
from protocol import header, messages, wire
from protocol.constants import Command, Core
from vdsp_sim.soc.loopback import LoopbackTransport


def test_defaults_and_bad_values():
    o = TaskOptions()
    assert (o.core, o.priority, o.custom_id, o.timeout_ms) == (Core.ANY, 0, 0, None)
    with pytest.raises(errors.InvalidCore):
        TaskOptions(core=7)
    with pytest.raises(errors.InvalidCore):
        TaskOptions(core=True)
    for bad in (256, -1, 1.5, "1", True):
        with pytest.raises(errors.InvalidArgument, match="priority"):
            TaskOptions(priority=bad)
    for bad in (1 << 63, 0.5):
        with pytest.raises(errors.InvalidArgument, match="custom_id"):
            TaskOptions(custom_id=bad)
    with pytest.raises(errors.InvalidArgument, match="timeout_ms"):
        TaskOptions(timeout_ms="soon")
    with pytest.raises(Exception):          # frozen: a value, shared safely
        o.priority = 3                      # type: ignore[misc]


def test_loose_keywords_build_the_value_over_options():
    base = TaskOptions(core=CORE_1, priority=9, custom_id=4, timeout_ms=250)
    assert TaskOptions.of() == TaskOptions()
    assert TaskOptions.of(base) is base
    assert TaskOptions.of(base, priority=200, core=None) == TaskOptions(core=CORE_1, priority=200, custom_id=4,
                                                                        timeout_ms=250)
    with pytest.raises(errors.InvalidArgument, match="unknown task option.*prio"):
        TaskOptions.of(prio=3)
    with pytest.raises(errors.InvalidArgument, match="options must be a TaskOptions"):
        TaskOptions.of({"core": 1})         # type: ignore[arg-type]
    assert TaskOptions(timeout_ms=250).wait_ms(10000) == 250 and TaskOptions().wait_ms(10000) == 10000


def test_the_wire_encoding_is_the_task_header():
    o = TaskOptions(core=CORE_0, priority=255, custom_id=-(1 << 63), timeout_ms=5)
    frames = wire.encode(messages.task(7, opids.PING, inputs=[], outputs=[], **o.header()))
    h = header.Header.parse(frames[0])
    assert (h.priority, h.core, h.custom_id) == (255, int(CORE_0), -(1 << 63))     # no timeout on the wire


class Seen(LoopbackTransport):
    """A loopback SoC that keeps the header of every TASK a client sends."""

    def __init__(self) -> None:
        super().__init__("relay")
        self.headers: list[tuple] = []

    def open(self, endpoint, name, *, watch=False, server_key=""):
        link = super().open(endpoint, name, watch=watch)
        send = link.send

        def spy(frames, send=send):
            h = header.Header.parse(frames[0])
            if h.command is Command.TASK:
                self.headers.append((h.priority, h.core, h.custom_id))
            return send(frames)
        link.send = spy
        return link


def test_every_entry_point_sends_the_value_as_its_keywords():
    transport = Seen()
    try:
        with Soc(transport=transport) as soc:
            buf = soc.mem.alloc(64)
            urgent = TaskOptions(core=CORE_1, priority=200, custom_id=11, timeout_ms=5000)
            soc.rpc(opids.PING, core=CORE_1, priority=200, custom_id=11).wait(5000)
            soc.rpc(opids.PING, options=urgent).wait()                   # timeout_ms from the value
            soc.call(opids.PING, options=urgent)
            framework.fill(soc, buf, value=1, options=urgent).wait()
            framework.fill(soc, buf, value=1, core=CORE_1, priority=200, custom_id=11).wait()
            img = cv.alloc_image(soc, "Y", 8, 8)
            cv.flip(soc, img, img, flip_code=1, options=urgent)
            cv.flip(soc, img, img, flip_code=1, core=CORE_1, priority=200, custom_id=11)
            ctrl = hb.hbDSPRpcCtrlParam(dspCoreId=CORE_1, priority=200, customId=11)
            assert ctrl.options() == TaskOptions(core=CORE_1, priority=200, custom_id=11)
            soc.rpc(opids.PING, options=urgent, priority=3).wait()      # a keyword over the value
            with pytest.raises(errors.InvalidArgument, match="flip: priority"):
                cv.flip(soc, img, img, options=urgent, priority=999)
            with pytest.raises(errors.InvalidArgument, match="unknown task option"):
                soc.rpc(opids.PING, prio=3)                               # type: ignore[call-arg]
    finally:
        transport.close()
    assert transport.headers == [(200, int(CORE_1), 11)] * 7 + [(3, int(CORE_1), 11)]


@pytest.mark.live
def test_the_values_timeout_is_the_waits_default_in_soc_and_async_soc(shared_soc):
    import asyncio

    from arm_side import AsyncSoc
    brief = TaskOptions(core=CORE_0, timeout_ms=30)
    with Soc() as soc:
        task = soc.rpc(opids.SLEEP, params={"ms": 400}, options=brief)
        with pytest.raises(errors.TaskTimeout, match="30 ms"):
            task.wait()
        assert task.wait(5000) == {"slept_ms": 400.0}           # a wait that names one still rules

    async def main():
        async with AsyncSoc() as asoc:
            slow = asoc.rpc(opids.SLEEP, params={"ms": 400}, options=brief)
            with pytest.raises(errors.TaskTimeout, match="30 ms"):
                await slow
            assert await slow.wait(5000) == {"slept_ms": 400.0}
    asyncio.run(main())

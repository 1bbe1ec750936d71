"""Every bad input gets a clear error with a code, and the relay and cores keep serving."""
from __future__ import annotations

import gc
import multiprocessing as mp
import struct
import time

import msgpack
import pytest
import zmq

from arm_side import CORE_0, CORE_1, Soc, errors, opids
from protocol import messages, wire
from vdsp_board.memory import ddr

pytestmark = pytest.mark.live


@pytest.fixture
def soc(mode_soc):
    return mode_soc


def still_serving(soc):
    assert soc.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
    assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}


def raises_code(code, fn, *args, **kw):
    with pytest.raises(errors.VdspError) as exc:
        fn(*args, **kw)
    assert exc.value.code == code, exc.value
    return exc.value


# --- operators and parameters -------------------------------------------------------------

def test_unknown_operator(soc):
    err = raises_code(-6000260, soc.call, 0x1234)
    assert "0x1234" in str(err)
    still_serving(soc)


@pytest.mark.parametrize("params, word", [
    ({"value": "seven"}, "'value' must be int"),
    ({"value": True}, "'value' must be int"),
    ({"value": 256}, "<= 255"),
    ({}, "missing required parameter 'value'"),
    ({"value": 1, "colour": 2}, "unknown parameter"),
])
def test_bad_parameters_are_refused_before_compute(soc, params, word):
    buf = soc.mem.alloc(64)
    err = raises_code(-6000001, soc.call, opids.FILL, outputs=[buf], params=params)
    assert word in str(err)
    still_serving(soc)


def test_wrong_buffer_counts_and_sizes(soc):
    a, b = soc.mem.alloc(64), soc.mem.alloc(32)
    assert "takes 1 inputs" in str(raises_code(-6000001, soc.call, opids.MEMCPY, inputs=[], outputs=[b]))
    assert "exceeds the output buffer" in str(
        raises_code(-6000001, soc.call, opids.MEMCPY, inputs=[a], outputs=[b], params={"size": 64}))
    still_serving(soc)


def test_bad_core_and_priority_are_refused_locally(soc):
    raises_code(-6000261, soc.rpc, opids.PING, core=3)
    raises_code(-6000001, soc.rpc, opids.PING, priority=256)
    raises_code(-6000001, soc.rpc, "ping")


# --- handles ----------------------------------------------------------------------------

def test_unknown_freed_and_out_of_bounds_handles(soc):
    owner = ddr.current_owner().id
    bogus = ddr.make_phys(owner, 0xFF_0000_0000)
    raises_code(-6000280, soc.call, opids.FILL, outputs=[(bogus, 64)], params={"value": 1})
    buf = soc.mem.alloc(4096)
    handle = buf.handle()
    soc.call(opids.FILL, outputs=[handle], params={"value": 1})   # a raw handle is fine while live
    buf.free()
    raises_code(-6000281, soc.call, opids.FILL, outputs=[handle], params={"value": 1})
    buf2 = soc.mem.alloc(4096)
    raises_code(-6000282, soc.call, opids.FILL, outputs=[(buf2.phys_addr, 8192)], params={"value": 1})
    raises_code(-6000282, soc.call, opids.FILL, outputs=[(buf2.phys_addr + 4000, 200)], params={"value": 1})
    still_serving(soc)


def _foreign_owner(q_out: mp.Queue, q_in: mp.Queue) -> None:
    from arm_side.memory import MemoryManager
    with MemoryManager() as mm:
        buf = mm.alloc(4096)
        q_out.put(buf.phys_addr)
        to = q_in.get(timeout=60)
        buf.share(to=to)
        q_out.put("shared")
        q_in.get(timeout=60)


def test_foreign_memory_needs_a_grant(soc):
    """Another process's memory is refused until it grants it (tests/integration/test_live_ownership.py has more)."""
    ctx = mp.get_context("spawn")
    q_out, q_in = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_foreign_owner, args=(q_out, q_in))
    p.start()
    try:
        phys = q_out.get(timeout=30)
        err = raises_code(-6000283, soc.call, opids.FILL, outputs=[(phys, 4096)], params={"value": 1})
        assert f"0x{phys:x}" in str(err)
        raises_code(-6000283, soc.call, opids.FILL, outputs=[(phys, 4096, 1)], params={"value": 1})  # REGISTERED
        raises_code(-6000131, soc.mem.register, phys, 4096)
        q_in.put(soc.mem.owner_id)
        assert q_out.get(timeout=30) == "shared"
        foreign = soc.mem.register(phys, 4096)
        assert soc.call(opids.FILL, outputs=[foreign], params={"value": 4}) == {"bytes": 4096}
        foreign.flush(1)  # INVALIDATE: registered memory is cached
        assert (foreign.array() == 4).all()
        soc.mem.unregister(foreign)
    finally:
        q_in.put("done")
        q_in.put("done")
        p.join(30)
        # the queues' semaphores freed here, not whenever a later garbage collection finds them:
        # on 3.13 a collection that ran while multiprocessing's resource tracker registered
        # something else warned "ResourceTracker called reentrantly ... might leak" (CI's run)
        for q in (q_out, q_in):
            q.close()
            q.cancel_join_thread()
        del q, q_out, q_in
        gc.collect()
    still_serving(soc)


# --- the wire: garbage at every endpoint -------------------------------------------------

class Raw:
    """A bare DEALER speaking (or mis-speaking) the protocol."""

    def __init__(self, endpoint: str) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.linger = 0
        self.sock.rcvtimeo = 5000
        self.sock.connect(endpoint)

    def ask(self, frames: list, msg_id: int = 77) -> wire.Message:
        """Send ``frames``; the reply carrying ``msg_id`` (other traffic is skipped)."""
        self.sock.send_multipart(frames)
        while True:
            msg = wire.decode(self.sock.recv_multipart())
            if msg.msg_id == msg_id and msg.command is not wire.Command.EVENT:
                return msg

    def close(self) -> None:
        self.sock.close(0)
        self.ctx.term()


def header(cmd=0x10, msg_id=77, magic=b"VD", version=2, core=0):
    return struct.pack("<2sBBHBBQq", magic, version, cmd, 0, 0, core, msg_id, 0)


GARBAGE = [
    ("bad magic", [header(magic=b"XX"), b"\x80"], -6000258),
    ("bad version", [header(version=9), b"\x80"], -6000258),
    ("unknown command", [header(cmd=0x7E), b"\x80"], -6000262),
    ("no body frame", [header()], -6000257),
    ("body not msgpack", [header(), b"\xc1\xc1"], -6000257),
    ("body not a map", [header(), msgpack.packb([1, 2])], -6000257),
    ("ext type in body", [header(), msgpack.packb({"params": msgpack.ExtType(5, b"x")})], -6000257),
    ("oversize body", [header(), b"\x80" * (1 << 20 | 1)], -6000259),
    ("too many frames", [header(), b"\x80"] + [b"x"] * 80, -6000259),
    ("handle not a triple", [header(), msgpack.packb({"outputs": [[1, 2]]})], -6000001),
    # ~1 KB bodies nested 1,000 deep once killed the relay, a core or a firmware (RecursionError)
    ("deeply nested task", [header(), b"\x81\xa1a" + b"\x91" * 1000 + b"\x80"], -6000257),
    ("deeply nested query", [header(cmd=0x31), b"\x81\xa4what" + b"\x91" * 1000 + b"\x80"], -6000257),
    ("task over the message size", [header(), b"\x80"] + [b"\x00" * (32 << 20)] * 3, -6000259),
]


def endpoints(rt):
    return {"relay": f"ipc://{rt}/relay.sock", "core": f"ipc://{rt}/vdsp0.sock",
            "firmware": f"ipc://{rt}/vdsp0.fw.sock"}


@pytest.mark.parametrize("where", ["relay", "core", "firmware"])
def test_garbage_gets_coded_errors_and_servers_keep_serving(shared_soc, where):
    raw = Raw(endpoints(shared_soc.rt)[where])
    try:
        for name, frames, code in GARBAGE:
            if where == "core" and name == "handle not a triple":
                continue  # the control endpoint refuses TASK before looking at handles
            reply = raw.ask(frames)
            assert reply.command is wire.Command.ERROR, name
            assert reply.msg_id == 77, name
            assert reply.body["code"] == code, (name, reply.body)
            assert reply.body["message"] and reply.body["name"].startswith("HB_"), name
        raw.sock.send_multipart([b"no header at all"])          # nobody to answer: logged only
        raw.sock.send_multipart([b"x" * 24, b"y"])                  # header-sized: answered BadMagic
        hello = raw.ask(wire.encode(messages.hello(5, "client")), msg_id=5)
        assert hello.command is wire.Command.READY and hello.msg_id == 5
    finally:
        raw.close()
    with Soc() as soc:
        still_serving(soc)


def test_relay_refuses_a_bad_core_in_the_header(shared_soc):
    raw = Raw(endpoints(shared_soc.rt)["relay"])
    try:
        msg = messages.task(9, opids.PING, inputs=[], outputs=[], core=7)
        reply = raw.ask(wire.encode(msg), msg_id=9)
        assert reply.body["code"] == -6000261
    finally:
        raw.close()


def test_tasks_at_the_control_endpoint_are_redirected(shared_soc):
    raw = Raw(endpoints(shared_soc.rt)["core"])
    try:
        reply = raw.ask(wire.encode(messages.task(3, opids.PING, inputs=[], outputs=[])), msg_id=3)
        assert reply.body["code"] == -6000015 and "firmware endpoint" in reply.body["message"]
    finally:
        raw.close()


def test_a_client_written_from_the_document_cancels_a_running_task_as_it_says(shared_soc):
    """PROTOCOL.md 5.5 over the bare wire (issue 22 reported 'unknown' and a RESULT after it):
    a CANCEL of a task running at the relay answers 'running', and no reply for the task
    comes afterwards, while the client keeps heartbeating as 9 asks."""
    raw = Raw(endpoints(shared_soc.rt)["relay"])
    try:
        assert raw.ask(wire.encode(messages.hello(1, "client")), msg_id=1).command is wire.Command.READY
        raw.sock.send_multipart(wire.encode(messages.task(2, opids.SLEEP, inputs=[], outputs=[],
                                                          params={"ms": 600}, core=1)))
        time.sleep(0.2)                                    # it runs on vdsp0 now
        reply = raw.ask(wire.encode(messages.cancel(3, 2)), msg_id=3)
        assert reply.command is wire.Command.RESULT and reply.body["state"] == "running", reply.body
        seen, end = [], time.monotonic() + 2.0             # the sleep ends well within this
        while time.monotonic() < end:
            raw.sock.send_multipart(wire.encode(messages.heartbeat()))
            if raw.sock.poll(200):
                msg = wire.decode(raw.sock.recv_multipart())
                if msg.command is not wire.Command.HEARTBEAT and msg.command is not wire.Command.EVENT:
                    seen.append((msg.command, msg.msg_id))
        assert seen == [], seen
        ping = raw.ask(wire.encode(messages.task(4, opids.PING, inputs=[], outputs=[], core=1)), msg_id=4)
        assert ping.body["values"] == {"core": "vdsp0"}
    finally:
        raw.close()

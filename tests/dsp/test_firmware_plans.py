"""A TASK body the firmware checked before runs from its kept plan (dsp_side.firmware._Plan), and
the CV operators keep their bound views (operators.cv.common.bind): what can change between two
tasks with the same body is still looked at on every task."""
from __future__ import annotations

import numpy as np
import pytest

from arm_side import opids
from arm_side.memory import MemoryManager
from dsp_side import firmware
from dsp_side.firmware import Firmware
from dsp_side.operators.cv import common
from protocol import errors, messages, wire
from protocol.constants import Command
from protocol.contract import cv_ids
from vdsp_sim import fuzz

W, H = 64, 48


@pytest.fixture
def fw(shm):
    version, registry = fuzz.stock_registry()
    firmware = Firmware("vdsp0", version, registry, None, None)
    yield firmware
    firmware.resolver.close()


@pytest.fixture
def mm(shm):
    with MemoryManager() as manager:
        yield manager


def run(fw, frames, binding=None):
    """``frames`` run for a connection that proved ``binding`` (default: this process's owner)."""
    reply = wire.decode(fw.run(frames, fuzz._owner_id() if binding is None else binding))
    return reply.command, reply.body


def threshold_task(msg_id, src, dst, thresh=100):
    desc = {"format": "Y", "width": W, "height": H}
    return wire.encode(messages.task(msg_id, cv_ids.THRESHOLD, inputs=[src.handle()], outputs=[dst.handle()],
                                     params={"src": desc, "dst": desc, "thresh": thresh, "maxval": 255},
                                     owner=fuzz._owner_id()))


def mapped_deleted(path) -> bool:
    with open("/proc/self/maps", encoding="ascii", errors="replace") as fh:
        return any(str(path) in line and "(deleted)" in line for line in fh)


def test_the_same_body_under_another_operator_is_checked_for_that_operator(fw, mm):
    a, b = mm.alloc(64), mm.alloc(64)
    a.write(bytes(range(64)))
    body = dict(inputs=[a.handle()], outputs=[b.handle()], params={"size": 16}, owner=fuzz._owner_id())
    cmd, _ = run(fw, wire.encode(messages.task(1, opids.MEMCPY, **body)))
    assert cmd == Command.RESULT
    # checksum takes one input and no output: the very body bytes are refused for it
    cmd, reply = run(fw, wire.encode(messages.task(2, opids.CHECKSUM, **body)))
    assert cmd == Command.ERROR and reply["code"] == errors.InvalidArgument.code
    assert "takes 0 outputs" in reply["message"]


def test_a_repeated_body_is_refused_once_its_connection_may_no_longer_use_the_memory(fw, mm):
    src, dst = mm.alloc(W * H), mm.alloc(W * H)
    for i in (1, 2):
        cmd, reply = run(fw, threshold_task(i, src, dst))
        assert cmd == Command.RESULT, reply
    cmd, reply = run(fw, threshold_task(3, src, dst), fuzz._owner_id() + 1)     # now bound to another owner
    assert cmd == Command.ERROR and reply["code"] == errors.ForeignHandle.code


def test_a_repeated_body_naming_freed_memory_gets_freed_handle(fw, mm):
    src, dst = mm.alloc(W * H), mm.alloc(W * H)
    pixels = np.arange(W * H, dtype=np.uint8)
    src.write(pixels.tobytes())
    frames = threshold_task(1, src, dst)
    assert run(fw, frames)[0] == Command.RESULT
    assert run(fw, frames)[0] == Command.RESULT
    assert np.array_equal(np.frombuffer(dst.read(), np.uint8), np.where(pixels > 100, 255, 0))
    dst.free()
    cmd, reply = run(fw, frames)
    assert cmd == Command.ERROR and reply["code"] == errors.FreedHandle.code


def test_kept_views_do_not_keep_a_freed_segment_mapped(fw, mm, shm):
    src, dst = mm.alloc(W * H), mm.alloc(W * H)
    assert run(fw, threshold_task(1, src, dst))[0] == Command.RESULT
    assert run(fw, threshold_task(2, src, dst))[0] == Command.RESULT
    dst.free()
    fw.resolver.purge()         # what the firmware does every second
    assert not mapped_deleted(shm)


def test_a_new_segment_at_a_freed_address_gets_new_views(fw, mm):
    src = mm.alloc(W * H)
    src.write(bytes([200]) * (W * H))
    dst = mm.alloc(W * H)
    assert run(fw, threshold_task(1, src, dst))[0] == Command.RESULT
    dst.free()
    fw.resolver.purge()
    dst2 = mm.alloc(W * H)
    cmd, reply = run(fw, threshold_task(2, src, dst2))
    assert cmd == Command.RESULT, reply
    assert dst2.read() == bytes([255]) * (W * H)


def test_bind_looks_again_at_a_descriptor_changed_in_place():
    buf = np.zeros(W * H, np.uint8)
    desc = {"format": "Y", "width": W, "height": H}
    ((img, (view,)),) = common.bind("t", [buf], [("src", desc, common.GRAY)])
    assert view.shape == (H, W)
    desc["height"] = H + 1          # now too tall for the buffer
    with pytest.raises(errors.InvalidArgument, match="too small"):
        common.bind("t", [buf], [("src", desc, common.GRAY)])
    desc["height"] = H // 2
    ((img, (view,)),) = common.bind("t", [buf], [("src", desc, common.GRAY)])
    assert view.shape == (H // 2, W)


def test_a_tensor_descriptor_changed_in_place_is_checked_again():
    from dsp_side.operators.nn import tensor
    desc = {"dtype": "S8", "layout": "NONE", "valid_shape": [1, 4],
            "quant": {"type": "SCALE", "axis": 1, "scale": [0.5, 0.25, 0.125, 1.0]}}
    t = tensor.parse("input", desc)
    assert t.quant.scale.tolist() == [0.5, 0.25, 0.125, 1.0]
    assert tensor.parse("input", desc) is t                 # kept
    desc["quant"]["scale"][1] = -1.0                         # now invalid
    with pytest.raises(errors.InvalidArgument, match="scale"):
        tensor.parse("input", desc)
    with pytest.raises(ValueError):                          # what is kept cannot be changed by an operator
        t.quant.scale[0] = 2.0


def test_a_task_is_quick_once_its_checked_body_ran_quickly_and_only_for_its_operator(fw, monkeypatch):
    """``Firmware.quick`` (the I/O thread's quick path, dsp_side.fwio): a body checked before
    whose last run took under QUICK_S, under the operator it was checked for. (QUICK_S set so
    that no load decides: 10 s for the no-op, 1 ms below a 2 ms sleep.)"""
    monkeypatch.setattr(firmware, "QUICK_S", 10.0)
    owner = fuzz._owner_id()
    ping = wire.encode(messages.task(1, opids.PING, inputs=[], outputs=[], owner=owner))
    assert not fw.quick(ping)                      # never checked
    run(fw, ping)
    run(fw, ping)                                   # from its plan: timed
    assert fw.quick(wire.encode(messages.task(2, opids.PING, inputs=[], outputs=[], owner=owner)))
    other = wire.encode(messages.task(3, opids.SLEEP, inputs=[], outputs=[], owner=owner))
    assert other[1] == ping[1] and not fw.quick(other)      # the same body bytes under another operator
    monkeypatch.setattr(firmware, "QUICK_S", 0.001)
    slow = wire.encode(messages.task(4, opids.SLEEP, inputs=[], outputs=[], params={"ms": 2.0}, owner=owner))
    run(fw, slow)
    run(fw, slow)
    assert not fw.quick(slow)


def test_a_quick_task_stays_quick_through_one_slow_run_and_not_through_two_in_a_row(fw, monkeypatch):
    """A preemption on a busy host makes one run of a no-op slow: its plan stays quick (the next
    tasks are not handed to the compute thread for it). Two slow runs in a row (QUICK_STRIKES):
    the operator is slow now, and its tasks leave the I/O thread. One quick run: quick again.
    (QUICK_S 10 s: every run is quick; 0: none is.) Holds PROTOCOL.md's scheduling line "tasks
    that ran under 50 µs before itself, one after another (one slower run in a row forgiven: a
    preemption on a busy host)"."""
    owner = fuzz._owner_id()

    def ping(msg_id):
        return wire.encode(messages.task(msg_id, opids.PING, inputs=[], outputs=[], owner=owner))
    monkeypatch.setattr(firmware, "QUICK_S", 10.0)
    run(fw, ping(1))
    run(fw, ping(2))
    assert fw.quick(ping(3))
    monkeypatch.setattr(firmware, "QUICK_S", 0.0)
    assert run(fw, ping(4))[0] == Command.RESULT
    assert fw.quick(ping(5))                        # one slow run: forgiven
    run(fw, ping(6))
    assert not fw.quick(ping(7))                    # two in a row
    run(fw, ping(8))
    assert not fw.quick(ping(9))                    # slow stays slow
    monkeypatch.setattr(firmware, "QUICK_S", 10.0)
    run(fw, ping(10))
    assert fw.quick(ping(11))
    monkeypatch.setattr(firmware, "QUICK_S", 0.0)
    run(fw, ping(12))
    assert fw.quick(ping(13))                       # the count starts again after a quick run


def test_the_job_of_an_unloading_firmware_sends_no_reply(fw):
    ping = wire.encode(messages.task(1, opids.PING, inputs=[], outputs=[], owner=fuzz._owner_id()))
    reply, _ = fw.run_job((b"peer", ping, fuzz._owner_id()))
    assert wire.decode(reply).command is Command.RESULT
    fw.unloading = True         # stopped while it ran: as on a powered-off DSP, the result is never sent
    assert fw.run_job((b"peer", ping, fuzz._owner_id()))[0] is None

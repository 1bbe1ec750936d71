"""`vdsp bench perf`'s protocol floor (``Baseline.protocol_throughput``): the raw pyzmq client plus
the per-task work the protocol asks of any client. Its figure is the reference the client rows
give beside the raw floor, so it must do that work on every task, against the real echo worker of
the direct floor, and leave nothing in flight."""
from __future__ import annotations

import pytest

from protocol import errors, wire
from vdsp_sim.benchmarks import bench_perf, bench_rpc


@pytest.fixture
def floor():
    base = bench_rpc.DirectBaseline(bench_rpc.ping_body_size())
    base.start()
    try:
        yield base
    finally:
        base.stop()


@pytest.mark.live
def test_each_task_is_packed_tracked_and_its_reply_decoded(floor, monkeypatch):
    packed, decoded = [], []
    real_pack, real_unpack = wire.pack_body, wire.unpack_body
    monkeypatch.setattr(wire, "pack_body", lambda body: packed.append(body) or real_pack(body))
    monkeypatch.setattr(wire, "unpack_body", lambda data: decoded.append(real_unpack(data)) or decoded[-1])
    rate = floor.protocol_throughput(8, 0.0, 0.3)
    assert rate > 0
    counted = round(rate * 0.3)
    # every task sent was packed, every reply (the echoed TASK body) decoded: nothing left in flight
    assert len(packed) == len(decoded) >= counted + 8
    assert decoded[0] == {"inputs": [], "outputs": [], "params": {}, "owner": packed[0]["owner"]}
    floor.call()        # the socket is in step: the next echo is the next request's


@pytest.mark.live
def test_a_reply_that_does_not_decode_fails_the_run(floor, monkeypatch):
    """The floor decodes with the protocol's checks, as a client must: a body that does not
    decode is the protocol's error, not a figure."""
    monkeypatch.setattr(wire, "pack_body", lambda body: b"\xc1")     # never valid msgpack
    with pytest.raises(errors.ProtocolError):
        floor.protocol_throughput(1, 0.0, 0.1)


def test_the_client_rows_say_the_protocol_floor_against_the_raw_client_and_the_sdk():
    said = bench_perf.protocol_floor(36.0, 30.0, 24.0)
    assert said == "(info) protocol floor 30 µs (1.25 x the raw client; the SDK's 1.20 x it)"
    assert bench_perf.protocol_floor(36.0, 0.0, 24.0) == "(info) protocol floor: not measured"


@pytest.mark.live
def test_a_worker_that_stops_answering_ends_the_run_with_an_error_not_a_hang(floor):
    floor.procs[0].kill()       # the echo worker
    floor.procs[0].wait()
    with pytest.raises(RuntimeError, match="no reply within 200 ms"):
        floor.protocol_throughput(4, 0.0, 5.0, reply_timeout_ms=200)

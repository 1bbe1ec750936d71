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


def test_the_latency_rows_pair_their_two_sides_in_alternating_blocks():
    """``paired_latency``: n round trips each, in blocks that alternate the two sides and which
    goes first, each block after a few warm-up trips of its own (the host changes under a run:
    a fixed order of two long blocks moved the direct p50 ratio from 1.14 to 1.52)."""
    calls = []

    def side(name):
        def measure(n, warmup):
            calls.append((name, n, warmup))
            return [float(len(calls))] * n
        return measure
    floor_lat, soc_lat = bench_perf.paired_latency(side("floor"), side("soc"), 250, 40)
    assert len(floor_lat) == len(soc_lat) == 250
    assert calls[:2] == [("floor", 0, 40), ("soc", 0, 40)]          # the round's warm-up, once each
    blocks = calls[2:]
    block, warm = bench_perf.LAT_BLOCK, bench_perf.LAT_BLOCK_WARM
    assert [n for _, n, _ in blocks] == [block, block, block, block, 250 - 2 * block, 250 - 2 * block]
    assert {w for _, _, w in blocks} == {warm}
    assert [name for name, _, _ in blocks] == ["floor", "soc", "soc", "floor", "floor", "soc"]

"""Fuzzing as a test: decoders, the firmware executor and a live SoC, in bounded time.

The decoders get property tests (hypothesis): any frames, any msgpack structure, and the
only outcome is a message or a ``VdspError`` with a code. The firmware executor and a
live SoC get the structure-aware generator of ``vdsp fuzz`` (soc/fuzz.py), seeded so a
failure replays; ``vdsp fuzz --messages 1000000`` is the long run.
"""
from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from protocol import errors, messages, wire
from vdsp_sim import fuzz

HEADER = st.builds(
    lambda magic, version, cmd, op, prio, core, msg_id, cid: (
        magic + bytes([version, cmd]) + op.to_bytes(2, "little") + bytes([prio, core])
        + msg_id.to_bytes(8, "little") + cid.to_bytes(8, "little", signed=True)),
    st.sampled_from([b"VD", b"VD", b"VD", b"XX"]), st.sampled_from([1, 1, 1, 0, 2]),
    st.one_of(st.sampled_from([0x01, 0x02, 0x10, 0x11, 0x12, 0x13, 0x20, 0x30, 0x31, 0x40, 0x50]),
              st.integers(0, 255)),
    st.integers(0, 0xFFFF), st.integers(0, 255), st.integers(0, 255), st.integers(0, 2**64 - 1),
    st.integers(-(2**63), 2**63 - 1))

KEYS = st.one_of(st.sampled_from(["inputs", "outputs", "params", "owner", "role", "what", "target", "core",
                                  "attr", "value", "state", "code", "message", "name"]), st.text(max_size=4))
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=True),
                   st.text(max_size=8), st.binary(max_size=8))
VALUES = st.recursive(LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(KEYS, inner, max_size=4)), max_leaves=30)
BODIES = st.one_of(st.dictionaries(KEYS, VALUES, max_size=6).map(lambda d: msgpack.packb(d, use_bin_type=True)),
                   VALUES.map(lambda v: msgpack.packb(v, use_bin_type=True)),
                   st.binary(max_size=64),
                   st.integers(0, 2000).map(lambda n: b"\x81\xa1a" + b"\x91" * n + b"\x80"))


def decode_and_check(frames: list) -> None:
    """What every peer does first with a message: the only exception allowed is VdspError."""
    try:
        messages.check_body(wire.decode(frames))
    except errors.VdspError as exc:
        assert exc.code < 0 and exc.name.startswith("HB_")


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(HEADER, BODIES, st.lists(st.binary(max_size=16), max_size=4))
def test_any_structured_message_decodes_or_is_a_coded_error(header, body, raw):
    decode_and_check([header, body, *raw])


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=70))
def test_any_frames_decode_or_are_a_coded_error(frames):
    decode_and_check(frames)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_firmware_executor_survives_the_generator(shm):
    """Hostile floats give results as C floats would (inf, NaN), without numpy warnings: a
    warning (noise on a firmware's stderr) is a finding."""
    ran, findings = fuzz.fuzz_firmware(20000, seed=20261123)
    assert ran == 20000
    assert not findings, "\n".join(f"message {f.index}: {f.frames!r:.200}\n{f.traceback}" for f in findings[:3])


def test_generator_gets_valid_tasks_through_to_compute(shm):
    """The fuzzer is worth running only if valid tasks reach compute, not just the validators."""
    outcomes: dict = {}
    fuzz.fuzz_firmware(4000, seed=7, outcomes=outcomes)
    assert outcomes.get("ok", 0) > 250, outcomes
    assert len([k for k in outcomes if isinstance(k, int)]) >= 8, outcomes   # many distinct error codes


def test_an_in_process_run_leaves_the_logging_as_it_found_it(shm):
    """The fuzzer quiets the firmware's refusals only while it runs (a silenced 'vdsp' logger
    once hid a sample's log lines from every later test in the process)."""
    import logging
    logger = logging.getLogger("vdsp")
    before = logger.level
    fuzz.fuzz_firmware(50, seed=3)
    assert logger.level == before
    assert logging.getLogger("vdsp.sample.pointcloud").isEnabledFor(logging.INFO) == \
        logging.getLogger().isEnabledFor(logging.INFO)


@pytest.mark.live
def test_live_soc_survives_20000_fuzzed_messages(live_soc):
    report = fuzz.fuzz_soc(live_soc.rt, 20000, seed=1123, batch=5000)
    print("\n".join(report.lines()))
    assert report.sent == 20000 and report.batches == 4
    assert report.replies > 10000, report
    assert report.ok(), report.failures

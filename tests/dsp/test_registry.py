"""dsp_side.registry (explicit operator registration) and the framework operators, called directly."""
from __future__ import annotations

import types
import zlib

import numpy as np
import pytest

from dsp_side.operators import framework
from dsp_side.registry import Registry
from protocol import errors, schema


def noop(ctx, inputs, outputs):
    """Does nothing.

    Second line of the docstring.
    """


def other(ctx, inputs, outputs):
    return None


@pytest.fixture
def reg():
    return Registry()


# --- registration ---------------------------------------------------------------------------------

def test_register_and_get(reg):
    spec = reg.register(0x1400, "my_noop", noop, inputs=1, outputs=(0, 2),
                        params={"k": {"type": "int", "default": 1}})
    assert reg.get(0x1400) is spec
    assert (spec.id, spec.name, spec.fn) == (0x1400, "my_noop", noop)
    assert spec.inputs == (1, 1) and spec.outputs == (0, 2)
    assert spec.params == {"k": {"type": "int", "default": 1}}
    assert spec.doc == "Does nothing."  # first docstring line
    assert len(reg) == 1


def test_explicit_doc_wins(reg):
    assert reg.register(0x1400, "a", noop, doc="explicit").doc == "explicit"


def test_decorator_registers_and_returns_the_function(reg):
    @reg.operator(0x1401, "scale", inputs=1, outputs=1, params={"factor": {"type": "float", "default": 2.0}})
    def scale(ctx, inputs, outputs, factor):
        """Scale."""

    assert callable(scale) and scale.__name__ == "scale"
    assert reg.get(0x1401).fn is scale
    assert reg.get(0x1401).params["factor"]["default"] == 2.0


def test_nothing_is_discovered(reg):
    def op_0x1402(ctx, inputs, outputs):  # a name that looks like an id is not registration
        pass
    assert len(reg) == 0
    with pytest.raises(errors.UnknownOperator):
        reg.get(0x1402)


def test_duplicate_id_rejected(reg):
    reg.register(0x1400, "first", noop)
    with pytest.raises(ValueError, match="0x1400"):
        reg.register(0x1400, "second", other)
    assert reg.get(0x1400).name == "first"
    assert len(reg) == 1


def test_duplicate_name_rejected(reg):
    reg.register(0x1400, "same", noop)
    with pytest.raises(ValueError, match="same"):
        reg.register(0x1401, "same", other)
    with pytest.raises(errors.UnknownOperator):
        reg.get(0x1401)


@pytest.mark.parametrize("op_id", [-1, 0xFFFF, 0x10000, 2**32])
def test_out_of_range_id_rejected(reg, op_id):
    with pytest.raises(ValueError):
        reg.register(op_id, "bad", noop)
    assert len(reg) == 0


@pytest.mark.parametrize("op_id", [0x0000, 0x03FF, 0x0400, 0x0800, 0x1000, 0x1400, 0xFFFE])
def test_range_boundaries_accepted(reg, op_id):
    assert reg.register(op_id, f"op{op_id}", noop).id == op_id


def test_bad_schema_rejected(reg):
    with pytest.raises(ValueError):
        reg.register(0x1400, "bad", noop, params={"k": {"type": "integer"}})
    assert len(reg) == 0


@pytest.mark.parametrize("op_id", [0x0005, 0x1234, 0xFFFE])
def test_get_unknown_is_unknown_operator(reg, op_id):
    reg.register(0x1400, "x", noop)
    with pytest.raises(errors.UnknownOperator) as info:
        reg.get(op_id)
    assert info.value.code == -6000260
    assert isinstance(info.value, errors.InvalidArgument)
    assert f"0x{op_id:04x}" in info.value.message


# --- check_counts ---------------------------------------------------------------------------------

def test_check_counts_exact(reg):
    spec = reg.register(0x1400, "copy", noop, inputs=1, outputs=1)
    spec.check_counts(1, 1)
    with pytest.raises(errors.InvalidArgument) as info:
        spec.check_counts(0, 1)
    assert info.value.code == -6000001
    assert info.value.message == "copy: takes 1 inputs, got 0"
    with pytest.raises(errors.InvalidArgument) as info:
        spec.check_counts(1, 3)
    assert info.value.message == "copy: takes 1 outputs, got 3"


def test_check_counts_range(reg):
    spec = reg.register(0x1400, "merge", noop, inputs=(2, 4), outputs=0)
    for n in (2, 3, 4):
        spec.check_counts(n, 0)
    with pytest.raises(errors.InvalidArgument) as info:
        spec.check_counts(5, 0)
    assert info.value.message == "merge: takes 2..4 inputs, got 5"
    with pytest.raises(errors.InvalidArgument) as info:
        spec.check_counts(1, 0)
    assert info.value.message == "merge: takes 2..4 inputs, got 1"
    with pytest.raises(errors.InvalidArgument) as info:
        spec.check_counts(2, 1)
    assert info.value.message == "merge: takes 0 outputs, got 1"


# --- table ---------------------------------------------------------------------------------------

def test_table_sorted_by_id_with_plain_data(reg):
    reg.register(0x1401, "b", other, outputs=(1, 2), doc="bee")
    reg.register(0x0400, "a", noop, inputs=1, params={"k": {"type": "int", "default": 3}})
    reg.register(0x0001, "c", other, doc="see")
    assert reg.table() == [
        {"id": 0x0001, "name": "c", "params": {}, "inputs": [0, 0], "outputs": [0, 0], "doc": "see"},
        {"id": 0x0400, "name": "a", "params": {"k": {"type": "int", "default": 3}}, "inputs": [1, 1],
         "outputs": [0, 0], "doc": "Does nothing."},
        {"id": 0x1401, "name": "b", "params": {}, "inputs": [0, 0], "outputs": [1, 2], "doc": "bee"},
    ]


def test_framework_register_table():
    reg = Registry()
    framework.register(reg)
    table = reg.table()
    assert [(e["id"], e["name"]) for e in table] == [(0, "ping"), (1, "memcpy"), (2, "fill"),
                                                     (3, "checksum"), (4, "sleep"), (5, "count")]
    by_name = {e["name"]: e for e in table}
    assert by_name["memcpy"]["inputs"] == [1, 1] and by_name["memcpy"]["outputs"] == [1, 1]
    assert by_name["fill"]["inputs"] == [0, 0] and by_name["fill"]["outputs"] == [1, 1]
    assert by_name["checksum"]["inputs"] == [1, 1] and by_name["checksum"]["outputs"] == [0, 0]
    assert set(by_name["fill"]["params"]) == {"value", "size"}
    assert "default" not in by_name["fill"]["params"]["value"]  # value is required


# --- framework operators called directly ------------------------------------------------------------

@pytest.fixture
def ctx():
    return types.SimpleNamespace(core="vdsp1", msg_id=7, watchdog_ms=30000)


def arr(data):
    return np.frombuffer(bytearray(data), dtype=np.uint8)


def ro(data):
    a = np.frombuffer(bytes(data), dtype=np.uint8)
    assert not a.flags.writeable
    return a


def test_ping_answers_core_name(ctx):
    assert framework.ping(ctx, [], []) == {"core": "vdsp1"}


def test_memcpy_default_copies_smaller_buffer(ctx):
    src, dst = ro(b"abcdefgh"), arr(b"\x00" * 5)
    assert framework.memcpy(ctx, [src], [dst], -1) == {"bytes": 5}
    assert dst.tobytes() == b"abcde"

    src, dst = ro(b"xyz"), arr(b"\x00" * 6)
    assert framework.memcpy(ctx, [src], [dst], -1) == {"bytes": 3}
    assert dst.tobytes() == b"xyz\x00\x00\x00"


def test_memcpy_explicit_size(ctx):
    src, dst = ro(b"abcdefgh"), arr(b"--------")
    assert framework.memcpy(ctx, [src], [dst], 3) == {"bytes": 3}
    assert dst.tobytes() == b"abc-----"
    assert framework.memcpy(ctx, [src], [dst], 0) == {"bytes": 0}
    assert dst.tobytes() == b"abc-----"
    assert framework.memcpy(ctx, [src], [dst], 8) == {"bytes": 8}
    assert dst.tobytes() == b"abcdefgh"


def test_memcpy_size_larger_than_dst_is_invalid_argument(ctx):
    src, dst = ro(b"abcdefgh"), arr(b"----")
    with pytest.raises(errors.InvalidArgument) as info:
        framework.memcpy(ctx, [src], [dst], 5)
    assert info.value.code == -6000001
    assert "output" in info.value.message
    assert dst.tobytes() == b"----"  # nothing written


def test_memcpy_size_larger_than_src_is_invalid_argument(ctx):
    src, dst = ro(b"ab"), arr(b"--------")
    with pytest.raises(errors.InvalidArgument) as info:
        framework.memcpy(ctx, [src], [dst], 3)
    assert "input" in info.value.message
    assert dst.tobytes() == b"--------"


def test_fill(ctx):
    dst = arr(b"\x00" * 6)
    assert framework.fill(ctx, [], [dst], 0xAB, -1) == {"bytes": 6}
    assert dst.tobytes() == b"\xab" * 6
    assert framework.fill(ctx, [], [dst], 7, 2) == {"bytes": 2}
    assert dst.tobytes() == b"\x07\x07" + b"\xab" * 4
    with pytest.raises(errors.InvalidArgument):
        framework.fill(ctx, [], [dst], 1, 7)
    assert dst.tobytes() == b"\x07\x07" + b"\xab" * 4


def test_checksum_matches_zlib_crc32(ctx):
    data = bytes(range(256)) * 4 + b"tail"
    crc_all = zlib.crc32(data)
    assert framework.checksum(ctx, [ro(data)], [], -1) == {"crc32": crc_all, "sum": sum(data), "bytes": len(data)}
    assert framework.checksum(ctx, [ro(data)], [], 100) == {"crc32": zlib.crc32(data[:100]),
                                                            "sum": sum(data[:100]), "bytes": 100}
    assert framework.checksum(ctx, [ro(data)], [], 0) == {"crc32": 0, "sum": 0, "bytes": 0}


def test_checksum_known_value(ctx):
    # CRC-32 check value of the ASCII string "123456789" (IEEE 802.3 polynomial).
    assert framework.checksum(ctx, [ro(b"123456789")], [], -1)["crc32"] == 0xCBF43926


def test_checksum_sum_does_not_wrap_at_8_bits(ctx):
    data = b"\xff" * 1000
    assert framework.checksum(ctx, [ro(data)], [], -1)["sum"] == 255000


def test_checksum_size_larger_than_input(ctx):
    with pytest.raises(errors.InvalidArgument) as info:
        framework.checksum(ctx, [ro(b"abc")], [], 4)
    assert info.value.code == -6000001


def test_sleep_zero(ctx):
    assert framework.sleep(ctx, [], [], 0.0) == {"slept_ms": 0.0}


def test_count_adds_one_to_its_slot_only(ctx):
    out = np.zeros(16, np.uint8)
    assert framework.count(ctx, [], [out], slot=2, ms=0.0) == {"value": 1}
    assert framework.count(ctx, [], [out], slot=2, ms=0.0) == {"value": 2}
    assert out.view(np.uint32).tolist() == [0, 0, 2, 0]
    with pytest.raises(errors.InvalidArgument):
        framework.count(ctx, [], [out], slot=4, ms=0.0)


def test_declared_work_never_trips_the_watchdog():
    """The schema admits no sleep the default watchdog (30 s) would kill (31,000 ms was legal and
    killed the firmware), and a core with a shorter watchdog refuses what would trip it."""
    reg = Registry()
    framework.register(reg)
    by_name = {e["name"]: e for e in reg.table()}
    for name in ("sleep", "count"):
        assert by_name[name]["params"]["ms"]["max"] < 30000
    with pytest.raises(errors.InvalidArgument):
        schema.validate("sleep", reg.get(4).params, {"ms": 31000.0})
    short = types.SimpleNamespace(core="vdsp0", msg_id=1, watchdog_ms=1000)
    for fn, kw in [(framework.sleep, {}), (framework.count, {"slot": 0})]:
        with pytest.raises(errors.InvalidArgument) as info:
            fn(short, [], [np.zeros(4, np.uint8)], ms=900.0, **kw)
        assert "watchdog (1000 ms)" in str(info.value)
    assert framework.sleep(short, [], [], ms=1.0) == {"slept_ms": 1.0}

"""protocol.wire: the 24-byte header, the msgpack body, raw frames and every decode error.

Expected bytes and codes come from the layout documented in ``protocol/wire.py`` and the
code table of ``protocol/errors.py``; they are written out literally here, not computed by
the codec under test.
"""
from __future__ import annotations

import struct

import msgpack
import pytest

from protocol import errors, wire
from protocol.constants import MAX_BODY, MAX_FRAMES, MAX_RAW_FRAME, Command

# Published numeric codes (errors.py docstring).
PROTOCOL_ERROR = -6000257
BAD_MAGIC = -6000258
MESSAGE_TOO_LARGE = -6000259
UNKNOWN_COMMAND = -6000262
INVALID_ARGUMENT = -6000001


def header_bytes(magic=b"VD", version=2, command=0x10, op=0, priority=0, core=0, msg_id=0, custom_id=0):
    """A header assembled field by field, independently of wire.HEADER."""
    return (magic + bytes([version, command]) + op.to_bytes(2, "little") + bytes([priority, core])
            + msg_id.to_bytes(8, "little") + custom_id.to_bytes(8, "little", signed=True))


def good_body():
    return msgpack.packb({"inputs": [], "outputs": []}, use_bin_type=True)


def expect(exc_cls, code, fn, *args):
    with pytest.raises(exc_cls) as info:
        fn(*args)
    assert type(info.value) is exc_cls
    assert info.value.code == code
    return info.value


# --- header layout ---------------------------------------------------------------------------

def test_header_is_24_bytes():
    assert wire.HEADER_SIZE == 24
    assert len(wire.pack_header(Command.HEARTBEAT, 0)) == 24


def test_header_layout_field_by_field():
    h = wire.pack_header(Command.TASK, msg_id=0x0102030405060708, op=0x1234, priority=200, core=2,
                         custom_id=-2)
    assert h[0:2] == b"VD"
    assert h[2] == 2                                   # version (PROTOCOL.md §3.2, §17)
    assert h[3] == 0x10                                # TASK command byte
    assert h[4:6] == b"\x34\x12"                       # op, little-endian u16
    assert h[6] == 200                                 # priority
    assert h[7] == 2                                   # core (CORE_1)
    assert h[8:16] == bytes([8, 7, 6, 5, 4, 3, 2, 1])  # msg_id, little-endian u64
    assert h[16:24] == b"\xfe" + b"\xff" * 7           # custom_id -2, little-endian i64
    # The same, read back with struct at the documented offsets.
    assert struct.unpack_from("<H", h, 4) == (0x1234,)
    assert struct.unpack_from("<Q", h, 8) == (0x0102030405060708,)
    assert struct.unpack_from("<q", h, 16) == (-2,)


def test_header_matches_independent_assembly():
    h = wire.pack_header(Command.CANCEL, msg_id=99, custom_id=7)
    assert h == header_bytes(command=0x13, msg_id=99, custom_id=7)


def test_command_bytes_are_the_documented_values():
    expected = {"HELLO": 0x01, "READY": 0x02, "TASK": 0x10, "RESULT": 0x11, "ERROR": 0x12,
                "CANCEL": 0x13, "HEARTBEAT": 0x20, "CONTROL": 0x30, "QUERY": 0x31, "EVENT": 0x40,
                "DISCONNECT": 0x50}
    assert {c.name: int(c) for c in Command} == expected
    for name, byte in expected.items():
        assert wire.pack_header(Command[name], 0)[3] == byte


def test_parse_header_of_hand_built_header():
    frame = header_bytes(command=0x10, op=0x1400, priority=255, core=1, msg_id=2**64 - 1,
                         custom_id=-(2**63))
    assert wire.parse_header(frame) == (Command.TASK, 0x1400, 255, 1, 2**64 - 1, -(2**63))
    assert wire.parse_header(frame)[0] is Command.TASK


@pytest.mark.parametrize("field, value", [("priority", 256), ("core", 256), ("op", 0x10000),
                                          ("msg_id", -1), ("msg_id", 2**64), ("custom_id", 2**63)])
def test_pack_header_rejects_out_of_range_fields(field, value):
    expect(errors.InvalidArgument, INVALID_ARGUMENT, lambda: wire.pack_header(Command.TASK, **{
        "msg_id": 1, field: value}))


# --- round trips -----------------------------------------------------------------------------

def test_round_trip_task_with_raw_frames():
    raw = [b"\x00\x01\x02", bytearray(b"xyz"), memoryview(b"abcd"), b""]
    msg = wire.Message(Command.TASK, msg_id=42, body={"inputs": [[4096, 16, 0]], "outputs": [],
                                                      "params": {"k": 3, "s": "x", "b": b"\xff\x00"}},
                       op=0x0001, priority=9, core=1, custom_id=-5, raw=raw)
    frames = wire.encode(msg)
    assert len(frames) == 2 + 4
    assert frames[0] == header_bytes(command=0x10, op=1, priority=9, core=1, msg_id=42, custom_id=-5)
    out = wire.decode(frames)
    assert out.command is Command.TASK
    assert (out.msg_id, out.op, out.priority, out.core, out.custom_id) == (42, 1, 9, 1, -5)
    assert out.body == {"inputs": [[4096, 16, 0]], "outputs": [], "params": {"k": 3, "s": "x", "b": b"\xff\x00"}}
    assert isinstance(out.body["params"]["b"], bytes)  # bin stays bytes, not str
    assert [bytes(f) for f in out.raw] == [b"\x00\x01\x02", b"xyz", b"abcd", b""]


def test_round_trip_empty_body_and_no_raw():
    frames = wire.encode(wire.Message(Command.HEARTBEAT))
    assert len(frames) == 2
    assert frames[1] == b"\x80"  # msgpack fixmap of size 0
    out = wire.decode(frames)
    assert out.command is Command.HEARTBEAT and out.body == {} and out.raw == []


def test_decode_accepts_bytearray_and_memoryview_frames():
    frames = [bytearray(header_bytes(command=0x11, msg_id=5)), memoryview(msgpack.packb({"a": 1}))]
    out = wire.decode(frames)
    assert out.command is Command.RESULT and out.msg_id == 5 and out.body == {"a": 1}


def test_pack_body_rejects_unencodable_body():
    expect(errors.InvalidArgument, INVALID_ARGUMENT, wire.pack_body, {"x": object()})


def test_pack_body_rejects_oversize_body():
    expect(errors.MessageTooLarge, MESSAGE_TOO_LARGE, wire.pack_body, {"blob": b"\x00" * MAX_BODY})


# --- header errors ---------------------------------------------------------------------------

def test_documented_limits():
    assert MAX_BODY == 1 << 20
    assert MAX_FRAMES == 64
    assert MAX_RAW_FRAME == 64 << 20


def test_bad_magic():
    frames = [header_bytes(magic=b"XD"), good_body()]
    expect(errors.BadMagic, BAD_MAGIC, wire.decode, frames)


def test_wrong_version_is_bad_magic():
    for version in (0, 1, 3, 255):         # 1: a client of the protocol before §17
        expect(errors.BadMagic, BAD_MAGIC, wire.decode, [header_bytes(version=version), good_body()])


@pytest.mark.parametrize("byte", [0x00, 0x03, 0x14, 0x21, 0x51, 0xFF])
def test_unknown_command_byte(byte):
    expect(errors.UnknownCommand, UNKNOWN_COMMAND, wire.decode, [header_bytes(command=byte), good_body()])


@pytest.mark.parametrize("size", [0, 1, 23, 25, 48])
def test_header_of_wrong_size(size):
    frame = (header_bytes() * 3)[:size]
    expect(errors.ProtocolError, PROTOCOL_ERROR, wire.decode, [frame, good_body()])


def test_task_id_of_is_the_msg_id_of_a_task_header_of_that_operator_and_none_otherwise():
    """``header.task_id_of``: a firmware's check of a task it has a plan for (operator ``op``);
    what it refuses goes the full decode's way, which answers it."""
    from protocol import header
    good = header_bytes(command=0x10, op=0x0123, priority=7, core=1, msg_id=2 ** 64 - 2, custom_id=-5)
    assert header.task_id_of(good, 0x0123) == 2 ** 64 - 2
    for frame in (bytearray(good), memoryview(good)):       # what a transport hands over
        assert header.task_id_of(frame, 0x0123) == 2 ** 64 - 2
    refused = [header_bytes(command=0x10, op=0x0124, msg_id=9),          # another operator
               header_bytes(command=0x11, op=0x0123, msg_id=9),          # not a TASK
               header_bytes(magic=b"XD", op=0x0123, msg_id=9),
               *(header_bytes(version=v, op=0x0123, msg_id=9) for v in (0, 1, 3, 255)),
               good[:23], good + b"\0", b""]
    assert [header.task_id_of(frame, 0x0123) for frame in refused] == [None] * len(refused)


def test_bad_magic_and_unknown_command_are_protocol_errors():
    assert issubclass(errors.BadMagic, errors.ProtocolError)
    assert issubclass(errors.UnknownCommand, errors.ProtocolError)
    assert issubclass(errors.MessageTooLarge, errors.ProtocolError)


# --- frame-count and size limits -------------------------------------------------------------

@pytest.mark.parametrize("frames", [[], [header_bytes()]])
def test_fewer_than_two_frames(frames):
    expect(errors.ProtocolError, PROTOCOL_ERROR, wire.decode, frames)


def test_frame_count_limit():
    ok = [header_bytes(), good_body()] + [b"r"] * 62
    assert len(ok) == 64
    assert len(wire.decode(ok).raw) == 62
    expect(errors.MessageTooLarge, MESSAGE_TOO_LARGE, wire.decode, ok + [b"r"])


def test_body_size_limit():
    # A body just over 1 MiB: a map whose one bin value carries the excess.
    big = msgpack.packb({"b": b"\x00" * (1 << 20)}, use_bin_type=True)
    assert len(big) > 1 << 20
    expect(errors.MessageTooLarge, MESSAGE_TOO_LARGE, wire.decode, [header_bytes(), big])
    # A body of exactly 1 MiB is accepted: fixmap(1) + fixstr "b" + bin32 header (5 bytes) = 8 bytes.
    exact = msgpack.packb({"b": b"\x00" * ((1 << 20) - 8)}, use_bin_type=True)
    assert len(exact) == 1 << 20
    assert len(wire.decode([header_bytes(), exact]).body["b"]) == (1 << 20) - 8


def test_raw_frame_size_limit():
    buf = bytes((64 << 20) + 1)
    at_limit = memoryview(buf)[: 64 << 20]
    assert len(wire.decode([header_bytes(), good_body(), at_limit]).raw[0]) == 64 << 20
    expect(errors.MessageTooLarge, MESSAGE_TOO_LARGE, wire.decode, [header_bytes(), good_body(), buf])


# --- body errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("body", [msgpack.packb([1, 2]), msgpack.packb("text"), msgpack.packb(7),
                                  msgpack.packb(None), msgpack.packb(b"bin", use_bin_type=True)],
                         ids=["array", "str", "int", "nil", "bin"])
def test_non_map_body(body):
    expect(errors.ProtocolError, PROTOCOL_ERROR, wire.decode, [header_bytes(), body])


@pytest.mark.parametrize("body", [b"", b"\xc1", b"\x81", b"\x81\xa1a", b"\x80\x00", b"\xdf\xff\xff"],
                         ids=["empty", "reserved-0xc1", "truncated-map", "truncated-value", "extra-data",
                              "truncated-map32"])
def test_invalid_msgpack(body):
    expect(errors.ProtocolError, PROTOCOL_ERROR, wire.decode, [header_bytes(), body])


@pytest.mark.parametrize("ext", [msgpack.ExtType(5, b""), msgpack.ExtType(5, b"abc"),
                                 msgpack.Timestamp(1, 0)],
                         ids=["ext-empty", "ext-data", "timestamp"])
def test_msgpack_ext_types_are_refused(ext):
    body = msgpack.packb({"x": ext})
    expect(errors.ProtocolError, PROTOCOL_ERROR, wire.decode, [header_bytes(), body])


def test_nested_ext_type_is_refused():
    body = msgpack.packb({"a": [{"b": msgpack.ExtType(1, b"z")}]})
    expect(errors.ProtocolError, PROTOCOL_ERROR, wire.decode, [header_bytes(), body])


@pytest.mark.parametrize("body", [{1: "x"}, {None: 1}, {"ok": {2: 3}}, {1.5: 0}],
                         ids=["int-key", "nil-key", "nested-int-key", "float-key"])
def test_non_str_map_keys(body):
    expect(errors.ProtocolError, PROTOCOL_ERROR, wire.decode, [header_bytes(), msgpack.packb(body)])


def test_bin_map_keys_are_refused():
    body = msgpack.packb({b"role": "client"}, use_bin_type=True)
    expect(errors.ProtocolError, PROTOCOL_ERROR, wire.decode, [header_bytes(), body])


def test_container_limit():
    ok = msgpack.packb({"a": list(range(4096))})
    assert len(wire.decode([header_bytes(), ok]).body["a"]) == 4096
    over = msgpack.packb({"a": list(range(4097))})
    with pytest.raises(errors.ProtocolError) as info:
        wire.decode([header_bytes(), over])
    assert info.value.code in (PROTOCOL_ERROR, MESSAGE_TOO_LARGE)


# --- peek_msg_id -----------------------------------------------------------------------------

def test_peek_msg_id_of_undecodable_message():
    # Valid header with a bad body: the msg_id is still recoverable for the ERROR reply.
    frames = [header_bytes(msg_id=123456789), b"\xc1"]
    with pytest.raises(errors.ProtocolError):
        wire.decode(frames)
    assert wire.peek_msg_id(frames) == 123456789


def test_peek_msg_id_reads_offset_8_even_with_bad_magic():
    frame = b"ZZ\x09\xee" + b"\x00" * 4 + (77).to_bytes(8, "little") + b"\xff" * 8
    assert wire.peek_msg_id([frame]) == 77


@pytest.mark.parametrize("frames", [[], [b""], [b"short"], [b"x" * 25], [b"x" * 23, b"\x80"]],
                         ids=["no-frames", "empty", "short", "long", "short-with-body"])
def test_peek_msg_id_of_garbage_is_none(frames):
    assert wire.peek_msg_id(frames) is None


# ===============================================================================================
# protocol.messages: constructors and check_body (kept here: a body check is part of decoding)
# ===============================================================================================

from protocol import messages  # noqa: E402
from protocol.messages import check_body  # noqa: E402

H = [0x1000, 64, 0]  # a well-formed handle [phys, size, flags]


def _msg(command, body):
    return wire.Message(command, 1, body)


GOOD_BODIES = {
    Command.HELLO: [{"role": "client"}, {"role": "core", "pid": 12, "owner": 3, "name": "vdsp0"}],
    Command.READY: [{"name": "relay", "role": "server", "protocol": 2},
                    {"name": "vdsp0", "role": "core", "protocol": 2, "state": "running", "firmware_version": "1.0",
                     "operators": [], "fw_endpoint": "ipc:///x", "heartbeat_ms": 500, "cores": ["vdsp0"]}],
    Command.TASK: [{}, {"inputs": [H], "outputs": [[0, 0, 0]], "params": {"k": 1}, "owner": 0}],
    Command.RESULT: [{}, {"values": {"bytes": 3}}],
    Command.ERROR: [{"code": -6000001}, {"code": -22, "name": "EINVAL", "message": "no"}],
    Command.CANCEL: [{"target": 0}, {"target": 2**63}],
    Command.HEARTBEAT: [{}],
    Command.CONTROL: [{"core": "vdsp0", "attr": "state"}, {"core": "vdsp0", "attr": "state", "value": None},
                      {"core": "vdsp1", "attr": "firmware", "value": "fw.bin"}],
    Command.QUERY: [{"what": "cores"}],
    Command.EVENT: [{"core": "vdsp0", "state": "crashed"}, {"core": "vdsp0", "state": "offline", "reason": "x"}],
    Command.DISCONNECT: [{}],
}


def test_good_bodies_cover_every_command():
    assert set(GOOD_BODIES) == set(Command)


@pytest.mark.parametrize("command, body", [(c, b) for c, bodies in GOOD_BODIES.items() for b in bodies],
                         ids=lambda v: v.name if isinstance(v, Command) else None)
def test_check_body_accepts_good_bodies(command, body):
    msg = _msg(command, body)
    assert check_body(msg) is msg
    # and the same body survives the codec
    assert check_body(wire.decode(wire.encode(msg))).body == body


@pytest.mark.parametrize("command, missing", [
    (Command.HELLO, "role"), (Command.READY, "name"), (Command.READY, "role"), (Command.READY, "protocol"),
    (Command.ERROR, "code"),
    (Command.CANCEL, "target"), (Command.CONTROL, "core"), (Command.CONTROL, "attr"),
    (Command.QUERY, "what"), (Command.EVENT, "core"), (Command.EVENT, "state"),
])
def test_check_body_rejects_missing_required_field(command, missing):
    body = dict(GOOD_BODIES[command][-1])
    del body[missing]
    with pytest.raises(errors.ProtocolError) as info:
        check_body(_msg(command, body))
    assert info.value.code == PROTOCOL_ERROR
    assert repr(missing) in info.value.message


@pytest.mark.parametrize("command, field, value", [
    (Command.HELLO, "role", 1), (Command.HELLO, "pid", "12"), (Command.HELLO, "pid", True),
    (Command.HELLO, "owner", False), (Command.HELLO, "pid", 1.0),
    (Command.READY, "heartbeat_ms", True), (Command.READY, "operators", {}), (Command.READY, "cores", "vdsp0"),
    (Command.READY, "protocol", "2"), (Command.READY, "protocol", True),
    (Command.TASK, "inputs", {}), (Command.TASK, "inputs", (H,)), (Command.TASK, "params", []),
    (Command.TASK, "owner", True), (Command.TASK, "owner", None),
    (Command.ERROR, "code", True), (Command.ERROR, "code", "-6000001"), (Command.ERROR, "message", 5),
    (Command.CANCEL, "target", False), (Command.CANCEL, "target", 1.5), (Command.CANCEL, "target", None),
    (Command.CONTROL, "value", 1), (Command.CONTROL, "value", b"start"), (Command.CONTROL, "value", False),
    (Command.CONTROL, "core", 0),
    (Command.QUERY, "what", None), (Command.EVENT, "state", 2), (Command.EVENT, "reason", None),
])
def test_check_body_rejects_wrong_types(command, field, value):
    body = dict(GOOD_BODIES[command][-1])
    body[field] = value
    with pytest.raises(errors.ProtocolError) as info:
        check_body(_msg(command, body))
    assert info.value.code == PROTOCOL_ERROR
    assert repr(field) in info.value.message


@pytest.mark.parametrize("handle", [
    [1, 2], [1, 2, 3, 4], [], [-1, 8, 0], [0, -8, 0], [0, 8, -1], [True, 8, 0], [0, 8, False],
    [0.0, 8, 0], ["0", 8, 0], [0, None, 0], (0, 8, 0), 0x1000, {"phys": 0, "size": 8, "flags": 0}, None,
])
@pytest.mark.parametrize("key", ["inputs", "outputs"])
def test_check_body_rejects_malformed_handles(key, handle):
    body = {"inputs": [H], "outputs": [H], key: [H, handle]}
    with pytest.raises(errors.InvalidArgument) as info:
        check_body(_msg(Command.TASK, body))
    assert info.value.code == INVALID_ARGUMENT
    assert f"{key}[1]" in info.value.message


def test_check_body_handle_count_limit():
    assert check_body(_msg(Command.TASK, {"inputs": [H] * 32, "outputs": [H] * 32}))
    for key in ("inputs", "outputs"):
        with pytest.raises(errors.InvalidArgument) as info:
            check_body(_msg(Command.TASK, {key: [H] * 33}))
        assert info.value.code == INVALID_ARGUMENT


def test_check_body_accepts_large_handle_values():
    assert check_body(_msg(Command.TASK, {"inputs": [[2**63, 2**32, 1]]}))


def test_constructors_produce_bodies_that_pass_check_body():
    built = [
        messages.hello(1, "client", pid=10, owner=10, name="app"),
        messages.ready(2, "relay", "server", heartbeat_ms=500, cores=["vdsp0", "vdsp1"]),
        messages.task(3, 0x0001, inputs=[H], outputs=[[0x2000, 64, 1]], params={"size": 8}, owner=5,
                      priority=255, core=2, custom_id=-1, raw=[b"r"]),
        messages.result(3, {"values": {}}, raw=[b"x"]),
        messages.error(3, errors.UnknownOperator("no 0x1234")),
        messages.cancel(4, 3),
        messages.heartbeat(),
        messages.control(5, "vdsp0", "state", "start"),
        messages.control(6, "vdsp0", "state"),
        messages.query(7, "cores"),
        messages.event("vdsp1", "crashed", reason="watchdog"),
        messages.disconnect(),
    ]
    assert {m.command for m in built} == set(Command)
    for m in built:
        out = check_body(wire.decode(wire.encode(m)))
        assert (out.command, out.msg_id, out.op, out.priority, out.core, out.custom_id) == \
               (m.command, m.msg_id, m.op, m.priority, m.core, m.custom_id)
        assert out.body == m.body


def test_task_constructor_header_fields():
    m = messages.task(3, 0x0001, inputs=[], outputs=[], priority=255, core=2, custom_id=-1)
    h = wire.encode(m)[0]
    assert (h[3], h[4:6], h[6], h[7]) == (0x10, b"\x01\x00", 255, 2)
    assert h[16:24] == b"\xff" * 8


def test_error_constructor_body_decodes_to_the_same_exception():
    m = wire.decode(wire.encode(messages.error(9, errors.CoreCrashed("vdsp1 died"))))
    assert m.command is Command.ERROR and m.msg_id == 9
    exc = errors.from_wire(m.body)
    assert type(exc) is errors.CoreCrashed and exc.message == "vdsp1 died" and exc.code == -6000291


# --- nesting depth and whole-message size (a 1 KB message once killed every peer) ------------

def _nested(depth: int, leaf: bytes = b"\x80") -> bytes:
    """``{"a": [[[ ... {} ... ]]]}`` with ``depth`` arrays, written byte by byte (fixmap, fixarray)."""
    return b"\x81\xa1a" + b"\x91" * depth + leaf


@pytest.mark.parametrize("depth", [999, 1000, 1022, 5000])
def test_deep_nesting_is_a_protocol_error_not_a_crash(depth):
    body = _nested(depth)
    assert len(body) < 6000
    err = expect(errors.ProtocolError, PROTOCOL_ERROR, wire.decode, [header_bytes(), body])
    assert "deep" in err.message


def test_nesting_up_to_the_documented_depth_is_accepted():
    # the body map is level 1, so MAX_DEPTH - 2 arrays hold the innermost map at MAX_DEPTH
    from protocol.constants import MAX_DEPTH
    assert MAX_DEPTH == 32
    assert wire.decode([header_bytes(), _nested(MAX_DEPTH - 2)]).body["a"]
    expect(errors.ProtocolError, PROTOCOL_ERROR, wire.decode, [header_bytes(), _nested(MAX_DEPTH - 1)])


def test_bad_key_deep_inside_is_still_found():
    body = b"\x81\xa1a" + b"\x91" * 20 + msgpack.packb({1: 2})
    expect(errors.ProtocolError, PROTOCOL_ERROR, wire.decode, [header_bytes(), body])


def test_total_message_size_limit():
    from protocol.constants import MAX_MESSAGE
    assert MAX_MESSAGE == 64 << 20
    frame = b"\x00" * (16 << 20)
    assert len(wire.decode([header_bytes(), good_body(), frame, frame, frame]).raw) == 3
    expect(errors.MessageTooLarge, MESSAGE_TOO_LARGE, wire.decode,
           [header_bytes(), good_body(), frame, frame, frame, frame, b"x"])
    assert len(wire.decode([header_bytes(), good_body(), frame, frame, frame, frame]).raw) == 4


@pytest.mark.parametrize("body, error, says", [
    ({"inputs": {}}, errors.ProtocolError, "'inputs'"), ({"inputs": (H,)}, errors.ProtocolError, "'inputs'"),
    ({"params": []}, errors.ProtocolError, "'params'"), ({"owner": True}, errors.ProtocolError, "'owner'"),
    ({"owner": None}, errors.ProtocolError, "'owner'"), ({"outputs": None}, errors.ProtocolError, "'outputs'"),
    ({"inputs": [H, [1, 2]]}, errors.InvalidArgument, "inputs[1]"),
    ({"inputs": [H], "outputs": [H, [0, 8, 2]]}, errors.InvalidArgument, "outputs[1]"),
    ({"outputs": [H] * 33}, errors.InvalidArgument, "33 outputs"),
])
def test_the_relays_task_body_check_refuses_what_check_body_refuses(body, error, says):
    """messages.check_task_body is the relay's per-task path; check_body takes the same one."""
    for check in (messages.check_task_body, lambda b: check_body(_msg(Command.TASK, b))):
        with pytest.raises(error) as info:
            check(body)
        assert says in info.value.message


def test_the_task_body_check_takes_list_and_dict_subclasses_as_check_body_always_did():
    class Handles(list):
        pass

    class Params(dict):
        pass
    body = {"inputs": Handles([H]), "outputs": [], "params": Params(a=1), "owner": 7}
    assert messages.check_task_body(body) is body
    with pytest.raises(errors.InvalidArgument):
        messages.check_task_body({"inputs": Handles([H, [1]])})

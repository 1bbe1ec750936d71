"""The native wire layer of the C library (arm_side/capi/native/vdsp_wire.c, issue 42's first
part) decides what the Python decoder decides: fed the inputs of the Python decoder's own tests
(tests/proto/test_protocol_wire.py, the malformed frames and peer values of tests/tools/test_native.py),
its property tests' strategies (tests/tools/test_fuzz.py), the structure-aware fuzzer of ``vdsp fuzz``
(vdsp_sim/fuzz.py), byte mutations of valid bodies and the limits' edges, the C decoder accepts
exactly what protocol.wire accepts, with the same value (each map's pairs in order, and the
re-encoding byte for byte msgpack-python's packb of the decoded value), and refuses the rest
with the same error code. The C writer's bodies are those protocol.wire.pack_body makes.

The C side is compiled here with the host compiler, -Wall -Wextra -Werror, as a shared library
loaded with ctypes (tests/capi_wire_check.c), and again as a program built with
-fsanitize=address,undefined that runs the whole corpus: AddressSanitizer must be the first
runtime of its process, which a library loaded into Python cannot be."""
from __future__ import annotations

import ctypes
import functools
import json
import os
import random
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from protocol import constants, errors, header, messages, wire
from protocol.constants import MAX_BODY, MAX_CONTAINER, MAX_DEPTH, Command
from tests import privilege
from tests.proto import test_protocol_wire
from tests.tools import test_fuzz, test_native
from vdsp_board.config import settings as config
from vdsp_sim import fuzz, native_build

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "arm_side" / "capi" / "native"
SOURCES = [NATIVE / "vdsp_wire.c", ROOT / "tests" / "capi_wire_check.c"]
WARNINGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-Wpedantic"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g", "-O1"]
MESSAGE_MAX = 200
MASK64 = (1 << 64) - 1


def cc() -> list[str]:
    return shlex.split(os.environ.get("CC") or "cc")


def compile_c(out: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([*cc(), *WARNINGS, f"-I{NATIVE}", *flags, *map(str, SOURCES), "-o", str(out)],
                          capture_output=True, text=True, timeout=300)


# --- the C side, as a library ----------------------------------------------------------------

class Wire:
    """The C calls of tests/capi_wire_check.c, with Python values in and out."""

    def __init__(self, path: Path) -> None:
        lib = self.lib = ctypes.CDLL(str(path))
        u8p, size_p = ctypes.POINTER(ctypes.c_uint8), ctypes.POINTER(ctypes.c_size_t)
        lib.wire_check_body.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(u8p), size_p, ctypes.c_char_p]
        lib.wire_check_lookup.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
                                          ctypes.POINTER(u8p), size_p]
        lib.wire_check_free.argtypes = [ctypes.c_void_p]
        lib.wire_check_header.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint64),
                                          ctypes.POINTER(ctypes.c_int), ctypes.c_char_p]
        lib.wire_check_header_pack.argtypes = [ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint8, ctypes.c_uint8,
                                               ctypes.c_uint64, ctypes.c_int64, ctypes.c_uint8, ctypes.c_char_p]
        lib.wire_check_frames.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t, ctypes.c_char_p]
        lib.wire_check_constant.argtypes = [ctypes.c_char_p]
        lib.wire_check_constant.restype = ctypes.c_longlong
        lib.wire_check_code_name.restype = ctypes.c_char_p
        lib.wire_check_writer_cases.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        self._u8p, self._size = u8p, ctypes.c_size_t

    def _take(self, out, n) -> bytes:
        try:
            return ctypes.string_at(out, n.value) if out else b""
        finally:
            self.lib.wire_check_free(out)

    def body(self, data: bytes) -> tuple[int, bytes | None, str]:
        """(code, the decoded body written again or None, message)."""
        out, n, message = self._u8p(), self._size(), ctypes.create_string_buffer(MESSAGE_MAX)
        code = self.lib.wire_check_body(data, len(data), ctypes.byref(out), ctypes.byref(n), message)
        again = self._take(out, n)
        return code, again if code == 0 else None, message.value.decode()

    def lookup(self, data: bytes, key: str) -> tuple[int, bytes]:
        out, n = self._u8p(), self._size()
        name = key.encode()
        code = self.lib.wire_check_lookup(data, len(data), name, len(name), ctypes.byref(out), ctypes.byref(n))
        return code, self._take(out, n)

    def header(self, frame: bytes) -> tuple[int, int, tuple | None, str]:
        """(code, version to answer in, (command, op, priority, core, msg_id, custom_id, version), message)."""
        fields, version, message = (ctypes.c_uint64 * 7)(), ctypes.c_int(), ctypes.create_string_buffer(MESSAGE_MAX)
        code = self.lib.wire_check_header(frame, len(frame), fields, ctypes.byref(version), message)
        got = None
        if code == 0:
            got = tuple(fields)
            got = (*got[:5], struct.unpack("<q", struct.pack("<Q", got[5]))[0], got[6])
        return code, version.value, got, message.value.decode()

    def pack_header(self, command, msg_id, op=0, priority=0, core=0, custom_id=0, version=2) -> bytes:
        out = ctypes.create_string_buffer(24)
        self.lib.wire_check_header_pack(command, op, priority, core, msg_id, custom_id, version, out)
        return out.raw

    def frames(self, sizes: list[int]) -> tuple[int, str]:
        message = ctypes.create_string_buffer(MESSAGE_MAX)
        return self.lib.wire_check_frames((ctypes.c_size_t * max(1, len(sizes)))(*sizes), len(sizes), message), \
            message.value.decode()

    def constant(self, name: str) -> int:
        return self.lib.wire_check_constant(name.encode())

    def code_name(self, code: int) -> str | None:
        name = self.lib.wire_check_code_name(code)
        return name.decode() if name is not None else None

    def writer_cases(self) -> list[str]:
        buf = ctypes.create_string_buffer(8 << 20)
        assert self.lib.wire_check_writer_cases(buf, len(buf)) == 0
        return buf.value.decode().splitlines()


@pytest.fixture(scope="module")
def c() -> Iterator[Wire]:
    if shutil.which(cc()[0]) is None:
        privilege.require(f"no C compiler ({' '.join(cc())}) to build the native wire layer")
    out = Path(tempfile.mkdtemp(prefix="vwire-"))
    try:
        res = compile_c(out / "libwirecheck.so", "-O2", "-fPIC", "-shared")
        assert res.returncode == 0, res.stderr
        yield Wire(out / "libwirecheck.so")
    finally:
        shutil.rmtree(out, ignore_errors=True)


# --- what Python decides ---------------------------------------------------------------------

def py_body(data: bytes) -> tuple[int, Any]:
    try:
        return 0, wire.unpack_body(data)
    except errors.VdspError as exc:
        return exc.code, None


def py_header(frame: bytes) -> tuple[int, int, tuple | None]:
    try:
        h = header.Header.parse(frame)
    except errors.VdspError as exc:
        return exc.code, getattr(exc, "version", None) or 0, None
    return 0, 0, (int(h.command), h.op, h.priority, h.core, h.msg_id, h.custom_id, constants.VERSION)


def pairs(data: bytes) -> tuple[Any, bool]:
    """The body as its pairs in order (repeated keys kept), every scalar tagged with its type (a
    bool is no int, a float no int; floats by their bits, so NaN equals itself); and whether a
    map repeats a key."""
    repeated = []

    def plain(v: Any) -> Any:
        if isinstance(v, bool):
            return ("bool", v)
        if isinstance(v, float):
            return ("float", struct.pack(">d", v))
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v    # int, str, bytes, None, and maps already made plain

    def as_map(items: list) -> tuple:
        if len({k for k, _ in items}) != len(items):
            repeated.append(True)
        return ("map", [(k, plain(v)) for k, v in items])

    return msgpack.unpackb(data, raw=False, object_pairs_hook=as_map, strict_map_key=False), bool(repeated)


def same_body(c: Wire, data: bytes) -> str | None:
    """None if the C decoder decides about `data` as Python does, else how they differ."""
    code, again, message = c.body(data)
    want, value = py_body(data)
    if code != want:
        return f"{data[:60]!r}: C {code} ({message}), Python {want}"
    if code != 0:
        return None if message else f"{data[:60]!r}: C refused it ({code}) without a message"
    assert again is not None
    canonical = msgpack.packb(value, use_bin_type=True)
    mine, repeated = pairs(again)
    theirs, _ = pairs(data)
    if mine != theirs:
        return f"{data[:60]!r}: C decoded {mine!r:.200}, the input holds {theirs!r:.200}"
    if not repeated and again != canonical:
        return f"{data[:60]!r}: C wrote {again[:60]!r}, msgpack-python {canonical[:60]!r}"
    if repeated and msgpack.packb(wire.unpack_body(again), use_bin_type=True) != canonical:
        return f"{data[:60]!r}: with repeated keys, C's body means {wire.unpack_body(again)!r:.200}"
    return None


def same_header(c: Wire, frame: bytes) -> str | None:
    code, version, fields, message = c.header(frame)
    want = py_header(frame)
    if (code, version, fields) != want:
        return f"{frame!r}: C {(code, version, fields)} ({message}), Python {want}"
    return None if code == 0 or message else f"{frame!r}: refused without a message"


def differences(check, inputs) -> list[str]:
    return [d for d in map(check, inputs) if d is not None]


# --- the corpus ------------------------------------------------------------------------------

def _packed(value: Any) -> Iterator[bytes]:
    """The frames a test's parameter stands for: bytes as they are; a map, array or ext packed
    (an ext inside a map: a body); a parameter set or list, each of its values."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        yield bytes(value)
    elif isinstance(value, (msgpack.ExtType, msgpack.Timestamp)):
        yield msgpack.packb({"x": value})
    elif isinstance(value, dict):
        try:
            yield msgpack.packb(value, use_bin_type=True)
        except (TypeError, ValueError, OverflowError):
            pass
    elif isinstance(value, (list, tuple)):
        try:
            yield msgpack.packb(value, use_bin_type=True)
        except (TypeError, ValueError, OverflowError):
            pass
        for item in value:
            yield from _packed(item)
    elif hasattr(value, "values") and hasattr(value, "marks"):     # pytest.param
        yield from _packed(list(value.values))


def parametrized(module) -> Iterator[bytes]:
    """Every value of every @pytest.mark.parametrize of a test module, as frames."""
    for name in dir(module):
        for mark in getattr(getattr(module, name), "pytestmark", []) if name.startswith("test_") else []:
            if mark.name == "parametrize":
                yield from _packed(list(mark.args[1]))


def peer_bodies() -> Iterator[bytes]:
    """tests/tools/test_native.py's bodies: each field of what clients and cores send, set to each
    value a peer may put there."""
    for fields in [*test_native.CLIENT_BODIES.values(), test_native.READY, test_native.EVENT]:
        for field in [*fields, "unknown"]:
            for value in test_native.PEER_VALUES:
                try:
                    yield msgpack.packb(dict(fields, **{field: value}), use_bin_type=True)
                except OverflowError:       # an int msgpack cannot hold (2**64 + 5): nothing to send
                    pass


def fuzz_frames(count: int, seed: int) -> list[list[bytes]]:
    """Messages of ``vdsp fuzz``'s generator, for the stock firmware's operator table."""
    _, registry = fuzz.stock_registry()
    gen = fuzz.Generator(seed, registry.table(), [fuzz.Buffer(1 << 12, fuzz.BUFFER_SIZE)], owner=7)
    return [[bytes(f) for f in gen.frames()] for _ in range(count)]


def edges() -> Iterator[bytes]:
    """The limits' edges and every type byte, written byte by byte."""
    key = b"\x81\xa1a"
    for depth in (*range(MAX_DEPTH + 3), 999, 1000, 1022, 5000):
        yield test_protocol_wire._nested(depth)
        yield key + b"\x91" * depth + b"\x90"                   # an empty array at the bottom
        yield key + b"\x81\xa1b" * depth + b"\x80"              # maps all the way
    for n in (15, 16, 255, 256, MAX_CONTAINER - 1, MAX_CONTAINER, MAX_CONTAINER + 1, 65535):
        yield key + b"\xdc" + n.to_bytes(2, "big") + b"\xc0" * n               # array16
        yield key + b"\xdd" + n.to_bytes(4, "big") + b"\xc0" * n               # array32
        yield b"\xde" + n.to_bytes(2, "big") + b"".join(b"\xcd" + i.to_bytes(2, "big") + b"\xc0" for i in range(n))
        yield b"\xde" + n.to_bytes(2, "big") + b"".join(b"\xa1a\xc0" for _ in range(n))   # one key n times
    for claim in (1, 2**16 - 1, 2**20, 2**20 + 1, 2**31, 2**32 - 1):           # lengths beyond the bytes
        for head in (b"\xdb", b"\xc6", b"\xdd", b"\xdf"):
            yield key + head + claim.to_bytes(4, "big") + b"xyz"
    for size in (MAX_BODY - 1, MAX_BODY, MAX_BODY + 1):
        yield msgpack.packb({"b": bytes(size - 8)}) if size >= 8 else b""
        yield b"\x81\xa1s\xdb" + (size - 7).to_bytes(4, "big") + b"s" * (size - 7)
    for text in (b"", b"a\x00b", "é€𝄞".encode(), b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\xa0\x80",
                 b"\xed\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xee\x80\x80", b"\xef\xbf\xbf",
                 b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
                 b"\xff", b"\x80", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"a\xe2\x82\xacb\xe2"):
        s = bytes([0xA0 | len(text)]) + text
        yield key + s                       # a value
        yield b"\x82" + s + b"\x01\xa1b\x02"     # a key
    for byte in range(256):
        for tail in (b"", b"\x00", b"\x01\x02", b"\x00" * 8, b"\xff" * 17):
            yield key + bytes([byte]) + tail
            yield bytes([byte]) + tail
            yield b"\x81" + bytes([byte]) + tail + b"\x00"      # the byte as a key
    for value in (0, 1, 127, 128, 255, 256, 2**16 - 1, 2**16, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1,
                  -1, -32, -33, -128, -129, -2**15, -2**15 - 1, -2**31, -2**31 - 1, -2**63):
        yield msgpack.packb({"v": value, "l": [value, -value if value <= 2**63 else value]})
    for width in (1, 2, 4, 8):      # an int in a wider encoding than needed (any is allowed, §3.3)
        yield key + bytes([0xCB + width.bit_length()]) + (5).to_bytes(width, "big")
        yield key + bytes([0xCF + width.bit_length()]) + (-5).to_bytes(width, "big", signed=True)
    for f in (0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan"), 1e-45, 3.4e38):
        yield key + b"\xca" + struct.pack(">f", f)
        yield key + b"\xcb" + struct.pack(">d", f)
    yield key + b"\xca\x7f\x80\x00\x01"     # a signalling NaN
    yield key + b"\xcb\xff\xf0\x00\x00\x00\x00\x00\x01"
    for ext in (b"\xd4\x05\x00", b"\xd5\x05\x00\x00", b"\xd6\xff" + b"\x00" * 4, b"\xd7\xff" + b"\x00" * 8,
                b"\xd8\x05" + b"\x00" * 16, b"\xc7\x00\x05", b"\xc7\x0c\xff" + b"\x00" * 12, b"\xc8\x00\x01\x05x",
                b"\xc9\x00\x00\x00\x00\x05", b"\xc7"):
        yield key + ext
        yield b"\x81" + ext + b"\x01"
        yield key + b"\x91" + ext
    for bad_key in (b"\x01", b"\xc0", b"\xc3", b"\xcb" + bytes(8), b"\xc4\x01a", b"\x90", b"\x80", b"\x91\xa1a"):
        yield b"\x81" + bad_key + b"\x01"
        yield b"\x81\xa1a\x81" + bad_key + b"\x01"              # at level 2
        yield b"\x81\xa1a\x91\x81" + bad_key + b"\x01"          # in a map in an array
    yield b"\x82\xa1a\x01\xa1a\x02"                             # a key twice
    yield b"\x81\xa1a\x83\xa1x\x01\xa1y\x02\xa1x\x03"


def mutations(bodies: list[bytes], seed: int, per_body: int) -> Iterator[bytes]:
    """Each body cut at a few places and with a few bytes changed, added or removed."""
    rng = random.Random(seed)
    for data in bodies:
        for _ in range(per_body):
            b = bytearray(data)
            for _ in range(rng.choice((1, 1, 2, 3))):
                roll = rng.random()
                at = rng.randrange(len(b) + 1)
                if roll < 0.4 and b:
                    b[min(at, len(b) - 1)] = rng.choice((0x00, 0xFF, 0xC1, 0xD4, 0xDB, 0xDD, 0xDF, 0x80, 0x90,
                                                         rng.randrange(256)))
                elif roll < 0.6:
                    b.insert(at, rng.randrange(256))
                elif roll < 0.8 and b:
                    del b[min(at, len(b) - 1)]
                else:
                    del b[at:]
            yield bytes(b)


@functools.lru_cache(maxsize=1)
def corpus() -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """(bodies, headers): every input above, deterministic (seeded)."""
    bodies: list[bytes] = []
    headers: list[bytes] = []
    for source in (parametrized(test_protocol_wire), parametrized(test_native)):
        for frame in source:
            bodies.append(frame)
            headers.append(frame)
    for shape in test_native.malformed_frames().values():
        bodies += shape[1:2]
        headers += shape[:1]
    bodies += [msgpack.packb(b, use_bin_type=True) for v in test_protocol_wire.GOOD_BODIES.values() for b in v]
    bodies += peer_bodies()
    valid = list(bodies)
    for frames in fuzz_frames(10000, seed=20261128):
        headers += frames[:1]
        bodies += frames[1:2]
    bodies += edges()
    bodies += mutations([b for b in valid + bodies[-4000:] if py_body(b)[0] == 0 and len(b) < 4096], seed=42,
                        per_body=6)
    for magic in (b"VD", b"XD", b"VX", b"\x00\x00", b"DV"):
        for version in (0, 1, 2, 3, 255):
            for command in range(256):
                headers.append(test_protocol_wire.header_bytes(magic, version, command, op=0xFFFF, priority=255,
                                                               core=2, msg_id=2**64 - 1, custom_id=-(2**63)))
    good = test_protocol_wire.header_bytes(command=0x11, msg_id=77, custom_id=-5)
    headers += [good[:n] for n in range(24)] + [good + b"\x00", good * 2]
    return tuple(dict.fromkeys(bodies)), tuple(dict.fromkeys(headers))


# --- the same numbers ------------------------------------------------------------------------

def test_the_c_header_has_the_protocols_numbers(c):
    for name in ("VERSION", "MAX_BODY", "MAX_FRAMES", "MAX_RAW_FRAME", "MAX_MESSAGE", "MAX_DEPTH", "MAX_CONTAINER"):
        assert c.constant(name) == getattr(constants, name), name
    assert {c.constant("EARLIER_VERSION")} == constants.EARLIER_VERSIONS
    assert c.constant("HEADER_SIZE") == header.SIZE == 24
    for command in Command:
        assert c.constant(command.name) == int(command), command
    for cls in (errors.InvalidArgument, errors.OutOfMemory, errors.ProtocolError, errors.BadMagic,
                errors.MessageTooLarge, errors.UnknownCommand):
        assert c.constant(cls.__name__) == cls.code, cls
        assert c.code_name(cls.code) == cls.name, cls
    assert c.code_name(0) == "HB_DNN_SUCCESS" and c.code_name(-6000012) is None


# --- the same verdicts on the corpus ---------------------------------------------------------

def test_the_corpus_covers_what_it_must():
    bodies, headers = corpus()
    verdicts = [py_body(b)[0] for b in bodies]
    assert len(bodies) > 10000 and len(headers) > 6000
    assert verdicts.count(0) > 3000, "too few accepted bodies to compare values"
    assert verdicts.count(errors.ProtocolError.code) > 5000
    assert verdicts.count(errors.MessageTooLarge.code) >= 3     # a body over 1 MiB: the limit's edges
    assert {py_header(h)[0] for h in headers} == {0, errors.ProtocolError.code, errors.BadMagic.code,
                                                 errors.UnknownCommand.code}


def test_the_corpus_bodies_decode_as_the_python_decoder_decodes_them(c):
    bodies, _ = corpus()
    differ = differences(functools.partial(same_body, c), bodies)
    assert not differ, f"{len(differ)} of {len(bodies)} bodies differ:\n" + "\n".join(differ[:10])


def test_the_corpus_headers_parse_as_the_python_parser_parses_them(c):
    _, headers = corpus()
    differ = differences(functools.partial(same_header, c), headers)
    assert not differ, f"{len(differ)} of {len(headers)} headers differ:\n" + "\n".join(differ[:10])


def test_errors_say_what_is_wrong(c):
    says = {b"": "empty", b"\xc1": "0xc1", b"\x81": "ends", b"\x81\xa1a": "ends", b"\x80\x00": "1 bytes after",
            b"\x91\x01": "got list", b"\x81\x01\x02": "keys must be str, got int",
            b"\x81\xc4\x01a\x01": "keys must be str, got bytes", b"\x81\xa1a\xd4\x01\x00": "ext",
            b"\x81\xa1a\xa2\xed\xa0": "not UTF-8", b"\x81\xa1a\xdd\x00\x00\x10\x01": "4097 elements",
            b"\x81\xa1a\xdb\xff\xff\xff\xff": "exceeds the limit", b"\x81\xa1a\xdb\x00\x00\x00\x09abc": "9 bytes needed",
            test_protocol_wire._nested(MAX_DEPTH - 1): "deeper than 32 levels"}
    for data, text in says.items():
        code, _, message = c.body(data)
        assert code == errors.ProtocolError.code and text in message, (data, message)
    code, _, message = c.body(bytes(MAX_BODY + 1))
    assert code == errors.MessageTooLarge.code and message == f"body of {MAX_BODY + 1} bytes exceeds {MAX_BODY}"
    # the header's refusals are worded as Python's
    for frame in (b"VD", test_protocol_wire.header_bytes(magic=b"X\x00"), test_protocol_wire.header_bytes(version=1),
                  test_protocol_wire.header_bytes(command=0x7E)):
        with pytest.raises(errors.ProtocolError) as info:
            header.Header.parse(frame)
        assert c.header(frame)[3] == info.value.message


# --- the same verdicts on what hypothesis makes ------------------------------------------------

@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(test_fuzz.BODIES)
def test_the_fuzz_tests_bodies_decode_alike(c, data):
    assert same_body(c, data) is None


VALID = st.dictionaries(test_fuzz.KEYS, test_fuzz.VALUES, max_size=6).map(
    lambda d: msgpack.packb(d, use_bin_type=True))


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALID, st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255), st.sampled_from("set insert delete cut")),
                       max_size=3))
def test_valid_bodies_and_their_mutations_decode_alike(c, data, edits):
    assert same_body(c, data) is None
    b = bytearray(data)
    for at, byte, how in edits:
        at %= len(b) + 1
        if how == "set" and at < len(b):
            b[at] = byte
        elif how == "insert":
            b.insert(at, byte)
        elif how == "delete":
            del b[at:at + 1]
        elif how == "cut":
            del b[at:]
    assert same_body(c, bytes(b)) is None


@settings(max_examples=200, deadline=None)
@given(VALID)
def test_a_key_found_in_c_holds_pythons_value(c, data):
    body = wire.unpack_body(data)
    for key, value in body.items():
        assert c.lookup(data, key) == (0, msgpack.packb(value, use_bin_type=True))
    assert c.lookup(data, "no such key")[0] == 1


@pytest.mark.parametrize("text", [b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xc0\x80", b"\xe0\x80\xaf",
                                  b"\xf4\x90\x80\x80", b"\xff", b"\xe2\x82"],
                         ids=["surrogate-low", "surrogate-high", "overlong-2", "overlong-3", "above-10ffff", "ff",
                              "cut"])
def test_a_str_that_is_not_utf8_is_refused_by_both_as_protocol_md_says(c, text):
    """PROTOCOL.md §3.3: not UTF-8, an encoded surrogate, an overlong form or a code point past
    U+10FFFF, as a value or as a key."""
    for data in (b"\x81\xa1a" + bytes([0xA0 | len(text)]) + text, b"\x81" + bytes([0xA0 | len(text)]) + text + b"\x01"):
        with pytest.raises(errors.ProtocolError) as info:
            wire.unpack_body(data)
        assert type(info.value) is errors.ProtocolError
        code, _, message = c.body(data)
        assert code == errors.ProtocolError.code and "not UTF-8" in message, message


def test_a_repeated_key_holds_its_last_value_as_in_python(c):
    """PROTOCOL.md §3.3: a repeated key is not refused; the last value counts."""
    data = b"\x83\xa1a\x01\xa1b\xc0\xa1a\x92\x02\x03"
    assert wire.unpack_body(data) == {"a": [2, 3], "b": None}
    assert c.lookup(data, "a") == (0, msgpack.packb([2, 3]))
    assert c.body(data)[1] == data       # the tree keeps both pairs, in order


@settings(max_examples=1500, deadline=None)
@given(st.one_of(test_fuzz.HEADER, st.binary(max_size=30)))
def test_headers_parse_alike(c, frame):
    assert same_header(c, frame) is None


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 255), st.integers(0, 2**64 - 1), st.integers(0, 0xFFFF), st.integers(0, 255),
       st.integers(0, 255), st.integers(-(2**63), 2**63 - 1), st.integers(0, 255))
def test_the_c_header_is_the_python_header(c, command, msg_id, op, priority, core, custom_id, version):
    mine = c.pack_header(command, msg_id, op, priority, core, custom_id, version)
    assert mine == header.pack(command, msg_id, op, priority, core, custom_id, version)


def test_a_refused_earlier_version_is_answered_in_its_own_header(c):
    """PROTOCOL.md §3.2 and §17: a request of version 1 is refused, and the refusal carries 1."""
    for version, answer_in in ((1, 1), (0, 0), (3, 0), (255, 0)):
        frame = test_protocol_wire.header_bytes(version=version, command=0x10)
        code, reply_version, _, message = c.header(frame)
        assert (code, reply_version) == (errors.BadMagic.code, answer_in)
        assert f"protocol version {version} not supported" in message
        with pytest.raises(errors.BadMagic) as info:
            header.Header.parse(frame)
        assert (info.value.version or 0) == answer_in
        # the ERROR a server sends (protocol.messages.error): its header's version is the one C says
        assert wire.encode(messages.error(5, info.value))[0][2] == (answer_in or constants.VERSION)


class _Sized:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


@pytest.mark.parametrize("sizes", [[], [24], [24, 1], [24, 1] + [0] * 62, [24, 1] + [0] * 63,
                                   [24, 1, 64 << 20], [24, 1, (64 << 20) + 1], [24, 1] + [16 << 20] * 4,
                                   [24, 1] + [16 << 20] * 4 + [1], [0, MAX_BODY + 9, 3]])
def test_frame_limits_are_pythons(c, sizes):
    try:
        wire.check_frames([_Sized(n) for n in sizes])
        want = 0
    except errors.VdspError as exc:
        want = exc.code
    code, message = c.frames(sizes)
    assert code == want and (code == 0) == (message == ""), message


# --- the writer ------------------------------------------------------------------------------

def test_the_writer_makes_the_bodies_python_makes_and_refuses_what_receivers_refuse(c):
    lines = {line.split(" ", 2)[1]: line.split(" ", 3)[2:] for line in c.writer_cases()}
    task = {"inputs": [[4096, 16, 0]], "outputs": [[1 << 40, 70000, 1]],
            "params": {"k": 3, "s": "été", "b": b"\xff\x00", "f": 1.5, "neg": -200, "min": -(2**63),
                       "big": 2**64 - 1, "none": None, "t": True}, "owner": 7}
    made = {"hello": wire.pack_body(messages.hello(1, "client", pid=77, owner=12345, name="a", lock_fd=3).body),
            "task": wire.pack_body(messages.task(1, 3, inputs=task["inputs"], outputs=task["outputs"],
                                                 params=task["params"], owner=7).body),
            "empty": wire.pack_body({}), "deepest": wire.pack_body({"a": _deep_empty(MAX_DEPTH - 1)}),
            "largest": wire.pack_body({"blob": bytes(MAX_BODY - 12)})}
    for name, body in made.items():
        assert lines[name] == ["0", body.hex()], name
    assert wire.unpack_body(bytes.fromhex(lines["task"][1])) == task
    refused = {"int_key": "map keys must be str, got int", "bin_key": "map keys must be str, got bytes",
               "surrogate": "not UTF-8", "wide": "4097 elements", "deep": "deeper than 32 levels",
               "after_root": "after the body's map", "unfilled": "not filled", "not_a_map": "must be a map, got list",
               "nothing": "nothing was written"}
    for name, says in refused.items():
        code, message = lines[name]
        assert int(code) == errors.InvalidArgument.code and says in message, (name, message)
    assert int(lines["too_large"][0]) == errors.MessageTooLarge.code
    with pytest.raises(errors.MessageTooLarge):     # as Python's writer says of the same body
        wire.pack_body({"blob": bytes(MAX_BODY)})
    # what the writer refuses, a receiver refuses: the deepest it takes is the deepest that passes
    assert c.body(bytes.fromhex(lines["deepest"][1]))[0] == 0
    assert c.body(b"\x81\xa1a" + b"\x91" * (MAX_DEPTH - 1) + b"\x90")[0] == errors.ProtocolError.code


def test_null_pointers_are_refused_not_followed(c):
    assert c.lib.wire_check_null_arguments() == 1


def _deep_empty(levels: int) -> list:
    """``levels`` arrays inside each other, the innermost empty."""
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


# --- memory safety: the corpus under AddressSanitizer and UBSan --------------------------------

def _records(kind: bytes, items) -> bytes:
    return b"".join(kind + len(x).to_bytes(4, "little") + x for x in items)


ASAN = "halt_on_error=1:max_allocation_size_mb=64:allocator_may_return_null=0"
UBSAN = "print_stacktrace=1:halt_on_error=1"


def _sanitizers_here(tmp: Path) -> tuple[str | None, str]:
    """(why this compiler cannot build and run an ASan+UBSan program here, or None; the ASan
    options that work: LeakSanitizer's too where it can run; where it cannot, e.g. a container
    without ptrace, leaks go unchecked and the rest still runs)."""
    if shutil.which(cc()[0]) is None:
        return f"no C compiler ({' '.join(cc())})", ""
    src = tmp / "probe.c"
    src.write_text("#include <stdlib.h>\nint main(void) { char *p = malloc(4); p[0] = 1; int r = p[0] - 1; "
                   "free(p); return r; }\n")
    built = subprocess.run([*cc(), *SANITIZE, str(src), "-o", str(tmp / "probe")], capture_output=True, text=True,
                           timeout=120)
    if built.returncode != 0:
        return f"{' '.join(cc())} cannot build with -fsanitize=address,undefined: {built.stderr.strip()[-300:]}", ""
    why = ""
    for leaks in ("1", "0"):
        options = f"detect_leaks={leaks}:{ASAN}"
        ran = subprocess.run([str(tmp / "probe")], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, ASAN_OPTIONS=options, UBSAN_OPTIONS=UBSAN))
        if ran.returncode == 0 and not ran.stderr:
            return None, options
        why = why or ran.stderr.strip()[-300:]
    return f"an ASan program cannot run here: {why}", ""


def test_the_corpus_runs_clean_under_address_and_undefined_sanitizers(c, tmp_path):
    why, options = _sanitizers_here(tmp_path)
    privilege.require(why)
    program = tmp_path / "wire_check_asan"
    built = compile_c(program, *SANITIZE, "-DWIRE_CHECK_MAIN")
    assert built.returncode == 0, built.stderr
    bodies, headers = corpus()
    hypothesis_like = list(mutations(list(bodies[:3000]), seed=7, per_body=3))
    (tmp_path / "bodies").write_bytes(_records(b"B", [*bodies, *hypothesis_like]))
    (tmp_path / "headers").write_bytes(_records(b"H", headers))
    # any one allocation above 64 MiB aborts: a decoder that trusted a claimed length would ask more
    env = dict(os.environ, ASAN_OPTIONS=options, UBSAN_OPTIONS=UBSAN)
    ran = subprocess.run([str(program), str(tmp_path / "bodies"), str(tmp_path / "headers")], capture_output=True,
                         env=env, timeout=600)
    assert ran.returncode == 0 and not ran.stderr, ran.stderr.decode(errors="replace")[-4000:]
    # the same lines as the library's build says (whose verdicts the tests above hold to Python's)
    lines = ran.stdout.decode().splitlines()
    expect = []
    for data in [*bodies, *hypothesis_like]:
        code, again, _ = c.body(data)
        expect.append(f"B {code}" + (f" {again.hex()}" if again is not None else ""))
    for frame in headers:
        code, version, fields, _ = c.header(frame)
        expect.append(f"H {code} {version}" + "".join(f" {v & MASK64}" for v in fields or ()))
    expect += c.writer_cases()
    assert len(lines) == len(expect)
    differ = [f"{i}: {a[:120]} != {b[:120]}" for i, (a, b) in enumerate(zip(lines, expect)) if a != b]
    assert not differ, "\n".join(differ[:10])


# --- the compiled Python client's codec (arm_side/taskpath.c) ------------------------------------
# The blocking client's per-task path in the compiled build makes a TASK's header and body and reads
# a RESULT's with this codec, and hands every other case to protocol.header / protocol.wire. Where
# it answers, it must answer what those functions answer: the same bytes, the same objects (types,
# values, keys in their order), and it must answer every usual case (else the path is not taken).

_CODEC = r"""
import enum, json, math, struct, sys
from arm_side import _taskpath as C
from protocol import errors, header, wire
from protocol.constants import MAX_CONTAINER, MAX_DEPTH, Command
from tests.sdk.test_capi_wire import corpus

def typed(v):
    # a value with its exact type at every level (a bool is no int; floats by their bits), maps in order
    if type(v) is dict:
        return ["dict", [[typed(k), typed(x)] for k, x in v.items()]]
    if type(v) is list:
        return ["list", [typed(x) for x in v]]
    if type(v) is float:
        return ["float", struct.pack(">d", v).hex()]
    if type(v) is bytes:
        return ["bytes", v.hex()]
    return [type(v).__name__, repr(v)]

def keys_interned(v):
    # msgpack-python interns a map's str keys; so must the codec (its short strings come from a cache)
    if type(v) is dict:
        return all((type(k) is not str or sys.intern(k) is k) and keys_interned(x) for k, x in v.items())
    if type(v) is list:
        return all(keys_interned(x) for x in v)
    return True

def python(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:    # what the Python raises: the codec must have left it to it
        return exc

out = {"unpack": {"taken": 0, "left": [], "differ": []}, "parse": {"taken": 0, "left": [], "differ": []},
       "pack": {"taken": 0, "left": [], "differ": []}, "pack_header": {"taken": 0, "left": [], "differ": []}}
bodies, headers = corpus()
accepted = []
for b in bodies:
    mine, theirs = C.unpack_body(b), python(wire.unpack_body, b)
    r = out["unpack"]
    if mine is None:
        if not isinstance(theirs, Exception):
            r["left"].append(b[:40].hex())
        continue
    r["taken"] += 1
    again = C.unpack_body(b)    # its short strings from the codec's cache now
    if isinstance(theirs, Exception) or typed(mine) != typed(theirs) or again is None or \
            typed(again) != typed(theirs) or not keys_interned(mine) or not keys_interned(again):
        r["differ"].append([b[:60].hex(), repr(mine)[:200], repr(theirs)[:200]])
    else:
        accepted.append(theirs)
for h in headers:
    theirs = python(header.Header.parse, h)
    for command in Command:
        mine, r = C.parse_header(h, header.Header, command), out["parse"]
        usual = not isinstance(theirs, Exception) and theirs.command is command
        if mine is None:
            if usual:
                r["left"].append(h.hex())
            continue
        r["taken"] += 1
        if not usual or type(mine) is not header.Header or typed(list(mine)) != typed(list(theirs)) \
                or mine.command is not command:
            r["differ"].append([h.hex(), repr(mine), repr(theirs)])

class Op(enum.IntEnum):
    PING = 1

class Text(str):
    pass

deep = []
for _ in range(MAX_DEPTH + 2):
    deep = [deep]
odd = [{"tuple": (1, "a", (2.5, None))}, {"enum": Op.PING}, {"sub": Text("x")}, {"surrogate": "\ud800"},
       {"huge": 2**64}, {"tiny": -(2**63) - 1}, {"edge": [2**64 - 1, -(2**63), 2**63, -1, -32, -33, 127, 128]},
       {"deep": deep}, {"wide": list(range(MAX_CONTAINER + 1))}, {"bytearray": bytearray(b"ab")},
       {"nan": math.nan, "inf": -math.inf, "zero": -0.0}, {"blob": bytes(wire.MAX_BODY)}, {1: "int key"},
       {"set": {1, 2}}, {}, {"inputs": [], "outputs": [], "params": {}, "owner": 4242}]
for body in accepted + odd:
    mine, theirs, r = C.pack_body(body), python(wire.pack_body, body), out["pack"]
    if mine is None:
        if body in accepted:
            r["left"].append(repr(body)[:200])
        continue
    r["taken"] += 1
    if mine != theirs:
        r["differ"].append([repr(body)[:200], mine.hex()[:200], repr(theirs)[:200]])
fields = [(16, 1, 0, 0, 0, 0), (17, 2**64 - 1, 0xFFFF, 255, 2, -(2**63)), (16, 0, 0xFFFE, 7, 1, 2**63 - 1),
          (Command.TASK, 5, Op.PING, 0, 0, 0), (16, True, 1, 0, 0, 0), (16, 2**64, 0, 0, 0, 0), (16, -1, 0, 0, 0, 0),
          (256, 1, 0, 0, 0, 0), (16, 1, 0x10000, 0, 0, 0), (16, 1, 0, 256, 0, 0), (16, 1, 0, 0, -1, 0),
          (16, 1, 0, 0, 0, 2**63), (16, 1, 0, 0, 0, -(2**63) - 1), (16, 1.0, 0, 0, 0, 0), (16, "1", 0, 0, 0, 0)]
for f in fields:
    mine, theirs, r = C.pack_header(*f), python(header.pack, *f), out["pack_header"]
    if mine is None:
        if not isinstance(theirs, Exception):
            r["left"].append(repr(f))
        continue
    r["taken"] += 1
    if mine != theirs:
        r["differ"].append([repr(f), mine.hex(), repr(theirs)])
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def codec() -> dict:
    """The compiled client codec's answers on the corpus, against the Python's, in a child with the
    compiled build (``VDSP_NATIVE=1``)."""
    if native_build.missing():
        privilege.require(f"this machine cannot build the compiled modules: {native_build.missing()}")
    res = subprocess.run([sys.executable, "-c", _CODEC], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=config.child_env(VDSP_NATIVE="1"))
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


@pytest.mark.parametrize("what", ["unpack", "parse", "pack", "pack_header"])
def test_the_compiled_clients_codec_answers_what_the_protocols_functions_answer(codec, what):
    r = codec[what]
    assert not r["differ"], f"{len(r['differ'])} differ: {r['differ'][:5]}"
    assert not r["left"], f"{len(r['left'])} usual cases left to the Python: {r['left'][:5]}"
    assert r["taken"] >= {"unpack": 3000, "parse": 300, "pack": 3000, "pack_header": 5}[what], r["taken"]

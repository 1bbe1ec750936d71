"""Encoding and decoding of one message: ``[header][msgpack body][raw frame ...]``.

The 24-byte header (layout, parsing, re-tagging) is :mod:`protocol.header`.

The body is a msgpack map with str keys, unpacked with explicit limits: no
ext types, no bin/str/array/map larger than the limits in ``constants``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import msgpack

from . import errors, header
from .constants import MAX_BODY, MAX_CONTAINER, MAX_DEPTH, MAX_FRAMES, MAX_MESSAGE, MAX_RAW_FRAME, VERSION, Command

HEADER_SIZE = header.SIZE  # 24
_EMPTY_BODY = msgpack.packb({})


@dataclasses.dataclass(slots=True)
class Message:
    """One decoded message. ``raw`` holds inline data frames (bytes-like)."""

    command: Command
    msg_id: int = 0
    body: dict = dataclasses.field(default_factory=dict)
    op: int = 0
    priority: int = 0
    core: int = 0
    custom_id: int = 0
    raw: list = dataclasses.field(default_factory=list)
    version: int = VERSION      # of the header: another only in the refusal of a request of that version


def pack_header(command: int, msg_id: int, op: int = 0, priority: int = 0, core: int = 0,
                custom_id: int = 0, version: int = VERSION) -> bytes:
    """The 24-byte header. Raises InvalidArgument for out-of-range fields."""
    return header.pack(command, msg_id, op, priority, core, custom_id, version)


# Packers reused (msgpack.packb builds one per call: half its cost for a small body). One is
# taken per call, so that threads never share one (list.pop and append are atomic); a Packer
# that raised has reset itself.
_PACKERS: list = []


def pack_body(body: dict | None) -> bytes:
    """msgpack of a str-keyed map (bin for bytes). Raises InvalidArgument if unencodable."""
    if not body:
        return _EMPTY_BODY
    try:
        packer = _PACKERS.pop()
    except IndexError:      # none free (or another thread took the last one after a check)
        packer = msgpack.Packer(use_bin_type=True)
    try:
        data = packer.pack(body)
    except (TypeError, ValueError, OverflowError) as exc:
        raise errors.InvalidArgument(f"message body cannot be encoded: {exc}") from exc
    finally:
        if len(_PACKERS) < 64:
            _PACKERS.append(packer)
    if len(data) > MAX_BODY:
        raise errors.MessageTooLarge(f"body of {len(data)} bytes exceeds {MAX_BODY}")
    return data


def encode(msg: Message) -> list:
    """Frames for ``msg``, ready for a multipart send."""
    frames = [pack_header(msg.command, msg.msg_id, msg.op, msg.priority, msg.core, msg.custom_id, msg.version),
              pack_body(msg.body)]
    frames.extend(msg.raw)
    return frames


def _no_ext(code: int, data: bytes) -> Any:
    raise errors.ProtocolError(f"msgpack ext type {code} is not allowed")


def unpack_body(data: header.Frame) -> dict:
    """Decode a body with explicit limits. Raises ProtocolError / MessageTooLarge."""
    if len(data) > MAX_BODY:
        raise errors.MessageTooLarge(f"body of {len(data)} bytes exceeds {MAX_BODY}")
    try:
        body = msgpack.unpackb(data, raw=False, strict_map_key=True, ext_hook=_no_ext,
                               max_str_len=MAX_BODY, max_bin_len=MAX_BODY,
                               max_array_len=MAX_CONTAINER, max_map_len=MAX_CONTAINER,
                               max_ext_len=0)
    except errors.VdspError:
        raise
    except msgpack.StackError as exc:
        raise errors.ProtocolError(f"body nests maps/arrays deeper than {MAX_DEPTH} levels") from exc
    except (ValueError, TypeError, msgpack.UnpackException, msgpack.ExtraData) as exc:
        raise errors.ProtocolError(f"body is not valid msgpack: {exc}") from exc
    if not isinstance(body, dict):
        raise errors.ProtocolError(f"body must be a msgpack map, got {type(body).__name__}")
    _check_keys(body)
    return body


def _check_keys(body: dict) -> None:
    """Every map has str keys (msgpack's strict_map_key still admits bytes) and nothing nests
    deeper than MAX_DEPTH. Iterative, one nesting level at a time: a hostile body must not
    exhaust Python's stack. (msgpack gives exact dicts and lists: ``type() is`` suffices, and
    keeps this cheap enough for the relay's per-task check.)"""
    level: list = [body]
    depth = 1
    while level:
        if depth > MAX_DEPTH:
            raise errors.ProtocolError(f"body nests maps/arrays deeper than {MAX_DEPTH} levels")
        deeper: list = []
        for value in level:
            if type(value) is dict:
                for key, item in value.items():
                    if type(key) is not str:
                        raise errors.ProtocolError(f"map keys must be str, got {type(key).__name__} {key!r:.40}")
                    kind = type(item)
                    if kind is dict or kind is list:
                        deeper.append(item)
            else:
                for item in value:
                    kind = type(item)
                    if kind is dict or kind is list:
                        deeper.append(item)
        level = deeper
        depth += 1


def parse_header(frame: header.Frame) -> header.Header:
    """Raises ProtocolError / BadMagic / UnknownCommand (see ``header.Header.parse``)."""
    return header.Header.parse(frame)


def check_frames(frames: Sequence) -> None:
    """Frame-count and raw-size limits. Raises ProtocolError / MessageTooLarge."""
    if len(frames) < 2:
        raise errors.ProtocolError(f"a message needs a header and a body frame, got {len(frames)} frame(s)")
    if len(frames) > MAX_FRAMES:
        raise errors.MessageTooLarge(f"{len(frames)} frames exceed the limit of {MAX_FRAMES}")
    total = 0
    for frame in frames[2:]:
        if len(frame) > MAX_RAW_FRAME:
            raise errors.MessageTooLarge(f"raw frame of {len(frame)} bytes exceeds {MAX_RAW_FRAME}")
        total += len(frame)
    if total > MAX_MESSAGE:
        raise errors.MessageTooLarge(f"raw frames of {total} bytes in one message exceed {MAX_MESSAGE}")


def decode(frames: Sequence) -> Message:
    """Decode a whole message (header, body, raw frames). Raises ProtocolError subclasses."""
    check_frames(frames)
    cmd, op, priority, core, msg_id, custom_id = parse_header(bytes(frames[0]))
    body = unpack_body(bytes(frames[1]))
    return Message(cmd, msg_id, body, op, priority, core, custom_id, list(frames[2:]))


def peek_msg_id(frames: Sequence) -> int | None:
    """Best-effort msg_id of a frame list that failed to decode (for the error reply)."""
    return header.msg_id_of(frames[0]) if frames else None

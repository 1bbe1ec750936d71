"""The 24-byte header of every message: the one place that knows its byte layout.

::

    offset size field
    0      2    magic       b"VD"
    2      1    version     1
    3      1    command     Command
    4      2    op          operator command id (TASK), else 0
    6      1    priority    0..255 (TASK)
    7      1    core        requests: Core (0 ANY, 1 CORE_0, 2 CORE_1); relay replies to a
                            TASK: the core that ran it as a bit (1 vdsp0, 2 vdsp1)
    8      8    msg_id      u64, chosen by the requester, echoed by the reply
    16     8    custom_id   i64 requests: smaller runs first among equal priorities;
                            relay replies to a TASK: microseconds the task waited in the queue

Routers (the relay, a firmware's inbox) read, order and re-tag headers without unpacking
the body; they use :class:`Header` and the helpers below, never offsets of their own.
"""
from __future__ import annotations

import struct
from typing import NamedTuple, Protocol

from . import errors
from .constants import EARLIER_VERSIONS, MAGIC, VERSION, Command
from .ordering import order_key

STRUCT = struct.Struct("<2sBBHBBQq")
_MSG_ID = struct.Struct("<Q")
_CUSTOM_ID = struct.Struct("<q")
SIZE: int = STRUCT.size  # 24
_COMMANDS = {int(c): c for c in Command}
# the hot path: magic and version compared as one 3-byte prefix; a header that fails it is
# parsed again field by field for the precise error
_FAST = struct.Struct("<3sBHBBQq")
_PREFIX = MAGIC + bytes([VERSION])
_REPLY_TAIL = struct.Struct("<BQq")      # core, msg_id, custom_id: bytes 7..23
_new_tuple = tuple.__new__
_TASK = int(Command.TASK)


class Frame(Protocol):
    """A frame as a transport hands it over: ``bytes``, or a buffer over bytes (``bytearray``,
    ``memoryview``, ``zmq.Frame``). The functions that read a peer's frames take any of them:
    compiled (mypyc), a parameter typed ``bytes`` refused the others with TypeError where the
    pure module read them (tests/tools/test_native.py feeds both builds the same frames)."""

    def __len__(self) -> int: ...

    def __buffer__(self, flags: int, /) -> memoryview: ...


class Header(NamedTuple):
    command: Command
    op: int = 0
    priority: int = 0
    core: int = 0
    msg_id: int = 0
    custom_id: int = 0

    @classmethod
    def parse(cls, frame: Frame) -> "Header":
        """Raises ProtocolError (size), BadMagic (magic, version), UnknownCommand."""
        if len(frame) == SIZE:
            prefix, command, op, priority, core, msg_id, custom_id = _FAST.unpack(frame)
            cmd = _COMMANDS.get(command)
            if prefix == _PREFIX and cmd is not None:
                return _new_tuple(cls, (cmd, op, priority, core, msg_id, custom_id))
        return cls._parse_checked(frame)

    @classmethod
    def _parse_checked(cls, frame: Frame) -> "Header":
        if len(frame) != SIZE:
            raise errors.ProtocolError(f"header must be {SIZE} bytes, got {len(frame)}")
        magic, version, command, op, priority, core, msg_id, custom_id = STRUCT.unpack(frame)
        if magic != MAGIC:
            raise errors.BadMagic(f"bad magic {magic!r}, expected {MAGIC!r}")
        if version != VERSION:
            exc = errors.BadMagic(f"protocol version {version} not supported: this peer speaks version {VERSION} "
                                  "(PROTOCOL.md §17 says what changed and what a client must do)")
            if version in EARLIER_VERSIONS:     # answered in that version's header, which its sender reads
                exc.version = version
            raise exc
        cmd = _COMMANDS.get(command)
        if cmd is None:
            raise errors.UnknownCommand(f"unknown command byte 0x{command:02x}")
        return cls(cmd, op, priority, core, msg_id, custom_id)

    def pack(self) -> bytes:
        """Raises InvalidArgument for out-of-range fields."""
        return pack(self.command, self.msg_id, self.op, self.priority, self.core, self.custom_id)

    def order_key(self, seq) -> tuple:
        return order_key(self.priority, self.custom_id, seq)


def pack(command: int, msg_id: int, op: int = 0, priority: int = 0, core: int = 0, custom_id: int = 0,
         version: int = VERSION) -> bytes:
    """The 24 bytes (``version``: another than ours only to refuse a request of that version).
    Raises InvalidArgument for out-of-range fields."""
    try:
        return STRUCT.pack(MAGIC, version, command, op, priority, core, msg_id, custom_id)
    except struct.error as exc:
        raise errors.InvalidArgument(f"header field out of range: {exc}") from exc


def retag(frame: Frame, msg_id: int, *, core: int | None = None, custom_id: int | None = None) -> bytes:
    """A copy of a (well-formed) header with a new ``msg_id``, and ``core`` / ``custom_id`` if given."""
    if type(frame) is bytes and len(frame) == SIZE:     # the routers' hot path: slices, no bytearray
        if core is None and custom_id is None:
            return frame[:8] + _MSG_ID.pack(msg_id) + frame[16:]
        if core is not None and custom_id is not None:
            return frame[:7] + _REPLY_TAIL.pack(core, msg_id, custom_id)
    buf = bytearray(frame)
    _MSG_ID.pack_into(buf, 8, msg_id)
    if core is not None:
        buf[7] = core
    if custom_id is not None:
        _CUSTOM_ID.pack_into(buf, 16, custom_id)
    return bytes(buf)


def msg_id_of(frame) -> int | None:
    """The msg_id of a 24-byte frame (not otherwise checked), else None."""
    return _MSG_ID.unpack_from(frame, 8)[0] if len(frame) == SIZE else None


def command_of(frame) -> int | None:
    """The command byte of a 24-byte frame with our magic (not otherwise checked), else None."""
    return frame[3] if len(frame) == SIZE and frame[:2] == MAGIC else None


def task_id_of(frame: Frame, op: int) -> int | None:
    """The msg_id of a TASK header of operator ``op`` that :meth:`Header.parse` would take
    (its size, magic and version), else None: a firmware's check of a task it has a plan for."""
    if len(frame) != SIZE:
        return None
    prefix, command, frame_op, _, _, msg_id, _ = _FAST.unpack(frame)
    return msg_id if prefix == _PREFIX and command == _TASK and frame_op == op else None


def task_key(frame, seq) -> tuple | None:
    """Scheduling key of a TASK header with our magic (version unchecked), else None."""
    if command_of(frame) != Command.TASK:
        return None
    return order_key(frame[6], _CUSTOM_ID.unpack_from(frame, 16)[0], seq)

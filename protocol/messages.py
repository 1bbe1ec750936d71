"""Typed constructors and body checks for every command.

Each command's body is a msgpack map; ``BODY_FIELDS`` lists its fields with
their types and whether they are required. ``check_body`` enforces the table
so that a process only ever sees well-formed bodies past its socket adapter.
"""
from __future__ import annotations

from typing import Any

from . import errors
from .constants import HANDLE_FLAGS, MAX_HANDLES, VERSION, Command
from .wire import Message

_INT, _STR, _MAP, _LIST, _BOOL = (int,), (str,), (dict,), (list,), (bool,)

# command -> {field: (allowed types, required)}
BODY_FIELDS: dict[Command, dict[str, tuple[tuple[type, ...], bool]]] = {
    Command.HELLO: {"role": (_STR, True), "pid": (_INT, False), "owner": (_INT, False),
                    "name": (_STR, False), "lock_fd": (_INT, False)},
    Command.READY: {"name": (_STR, True), "role": (_STR, True), "protocol": (_INT, True), "state": (_STR, False),
                    "firmware_version": (_STR, False), "operators": (_LIST, False),
                    "fw_endpoint": (_STR, False), "fw_server_key": (_STR, False), "heartbeat_ms": (_INT, False),
                    "cores": (_LIST, False)},
    Command.TASK: {"inputs": (_LIST, False), "outputs": (_LIST, False), "params": (_MAP, False),
                   "owner": (_INT, False)},
    Command.RESULT: {},
    Command.ERROR: {"code": (_INT, True), "name": (_STR, False), "message": (_STR, False)},
    Command.CANCEL: {"target": (_INT, True)},
    Command.HEARTBEAT: {},
    Command.CONTROL: {"core": (_STR, True), "attr": (_STR, True), "value": (_STR + (type(None),), False)},
    Command.QUERY: {"what": (_STR, True)},
    Command.EVENT: {"core": (_STR, True), "state": (_STR, True), "reason": (_STR, False)},
    Command.DISCONNECT: {},
}


def check_body(msg: Message) -> Message:
    """Validate ``msg.body`` against ``BODY_FIELDS``. Raises ProtocolError; returns msg."""
    if msg.command is Command.TASK and _task_checked(msg.body):
        return msg
    for field, (types, required) in BODY_FIELDS[msg.command].items():
        if field not in msg.body:
            if required:
                raise errors.ProtocolError(f"{msg.command.name} body lacks required field {field!r}")
            continue
        value = msg.body[field]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise errors.ProtocolError(
                f"{msg.command.name} field {field!r} must be {'/'.join(t.__name__ for t in types)}, "
                f"got {type(value).__name__}")
    if msg.command is Command.TASK:
        for key in ("inputs", "outputs"):
            check_handles(msg.body.get(key, []), key)
    return msg


_ABSENT: Any = object()


def _task_checked(body: dict) -> bool:
    """The per-task fast path of ``check_body`` for a TASK: False if a field is not of its exact
    type (the table's path then gives the verdict); else True once the handles are checked
    (raises as ``check_body`` would: the fields are fine, so the first bad handle decides)."""
    inputs, outputs = body.get("inputs", _ABSENT), body.get("outputs", _ABSENT)
    params, owner = body.get("params", _ABSENT), body.get("owner", _ABSENT)
    # exact types only (decoded msgpack has no subclasses); anything else takes the table's path
    if not ((inputs is _ABSENT or type(inputs) is list) and (outputs is _ABSENT or type(outputs) is list)
            and (params is _ABSENT or type(params) is dict) and (owner is _ABSENT or type(owner) is int)):
        return False
    if inputs is not _ABSENT:
        check_handles(inputs, "inputs")
    if outputs is not _ABSENT:
        check_handles(outputs, "outputs")
    return True


def check_task_body(body: dict) -> dict:
    """``check_body`` of a TASK's body (the relay's per-task check): the same verdicts and
    errors, without a Message. Returns body."""
    if not _task_checked(body):
        check_body(Message(Command.TASK, 0, body))
    return body


def check_handles(handles: list, what: str) -> None:
    """Each handle is ``[phys_addr, size, flags]`` of non-negative ints with no reserved flag bit.

    Raises InvalidArgument.
    """
    if len(handles) > MAX_HANDLES:
        raise errors.InvalidArgument(f"{len(handles)} {what} exceed the limit of {MAX_HANDLES}")
    for i, h in enumerate(handles):
        # exact types (a bool is no int): decoded msgpack has no subclasses, and the relay runs this per task
        if (type(h) is not list or len(h) != 3 or type(h[0]) is not int or type(h[1]) is not int
                or type(h[2]) is not int or h[0] < 0 or h[1] < 0 or h[2] < 0):
            raise errors.InvalidArgument(f"{what}[{i}] must be [phys_addr, size, flags] of ints >= 0, got {h!r:.80}")
        if h[2] & ~HANDLE_FLAGS:
            raise errors.InvalidArgument(
                f"{what}[{i}]: flags 0x{h[2]:x} set reserved bits 0x{h[2] & ~HANDLE_FLAGS:x} "
                f"(only bit 0, REGISTERED, is defined; send the others as 0)")


# --- constructors -------------------------------------------------------------------------

def hello(msg_id: int, role: str, *, pid: int = 0, owner: int = 0, name: str = "",
          lock_fd: int | None = None) -> Message:
    """``lock_fd``: the sender's fd that holds ``owner``'s lock (PROTOCOL.md §5.2), sent if given."""
    body: dict[str, Any] = {"role": role, "pid": pid, "owner": owner, "name": name}
    if lock_fd is not None:
        body["lock_fd"] = lock_fd
    return Message(Command.HELLO, msg_id, body)


def ready(msg_id: int, name: str, role: str, **fields: Any) -> Message:
    """A READY; it says the protocol version its sender speaks (``protocol``, PROTOCOL.md §17)."""
    return Message(Command.READY, msg_id, {"name": name, "role": role, "protocol": VERSION, **fields})


def task(msg_id: int, op: int, *, inputs: list, outputs: list, params: dict | None = None,
         owner: int = 0, priority: int = 0, core: int = 0, custom_id: int = 0,
         raw: list | None = None) -> Message:
    body = {"inputs": inputs, "outputs": outputs, "params": params or {}, "owner": owner}
    return Message(Command.TASK, msg_id, body, op, priority, core, custom_id, raw or [])


def result(msg_id: int, body: dict | None = None, raw: list | None = None) -> Message:
    return Message(Command.RESULT, msg_id, body or {}, raw=raw or [])


def error(msg_id: int, exc: errors.VdspError) -> Message:
    """The ERROR answering request ``msg_id`` with ``exc``. A request refused for its protocol
    version is answered in that version's header (the 24 bytes are laid out alike in every
    version), so a client written for an earlier version reads why (PROTOCOL.md §17)."""
    version = exc.version if isinstance(exc, errors.BadMagic) and exc.version is not None else VERSION
    return Message(Command.ERROR, msg_id, exc.to_wire(), version=version)


def heartbeat() -> Message:
    return Message(Command.HEARTBEAT, 0)


def event(core: str, state: str, **fields: Any) -> Message:
    return Message(Command.EVENT, 0, {"core": core, "state": state, **fields})


def control(msg_id: int, core: str, attr: str, value: str | None = None) -> Message:
    return Message(Command.CONTROL, msg_id, {"core": core, "attr": attr, "value": value})


def query(msg_id: int, what: str) -> Message:
    return Message(Command.QUERY, msg_id, {"what": what})


def cancel(msg_id: int, target: int) -> Message:
    return Message(Command.CANCEL, msg_id, {"target": target})


def disconnect() -> Message:
    return Message(Command.DISCONNECT, 0)

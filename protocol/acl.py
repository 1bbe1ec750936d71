"""Who may use a buffer: an owner's access list and the rule a TASK's handles must follow.

A connection to the relay or to a firmware has at most one *verified owner* (the DDR
owner its HELLO claimed and the server verified, see ``vdsp_board.identity.ownership``). A handle whose
memory belongs to that owner is allowed; a handle of another owner is allowed only
within a *grant* that owner made: a range of its address space, to one owner id or to
any verified owner (``ANY``). Anything else is ForeignHandle, decided from the handle's
address alone, before its memory is looked up: a refused address never tells whether
memory exists there.

An owner publishes its grants in an *access list*: one small msgpack map, kept as the
file ``vdsp-{owner:06x}.acl`` next to its segments (the file I/O is ``vdsp_board.memory.acl``)::

    {"lock": INODE, "grants": [[offset, size, grantee], ...], "key": Z85}

``lock`` is the inode of the owner's lock file (a list written for an earlier owner of
the same id does not apply), ``grants`` at most MAX_GRANTS ranges, ``key`` (optional) the
CURVE public key that speaks for this owner over tcp.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Sequence, TypeGuard

from . import errors, wire

ANY = 0                     # grantee: every verified owner
MAX_GRANTS = 64             # grants of one owner
MAX_ACL_BYTES = 16 << 10    # an access list larger than this is refused as a whole
KEY_LEN = 40                # a CURVE public key in Z85
OFFSET_BITS = 40
MAX_OWNER = 1 << 22
_OFFSET_MASK = (1 << OFFSET_BITS) - 1


@dataclasses.dataclass(frozen=True, slots=True)
class AclEntry:
    """Bytes ``[offset, offset + size)`` of the granting owner, usable by ``grantee`` (ANY: by all)."""

    offset: int
    size: int
    grantee: int = ANY

    def covers(self, reader: int, offset: int, size: int) -> bool:
        return (self.grantee == ANY or self.grantee == reader) and \
            self.offset <= offset and offset + size <= self.offset + self.size


@dataclasses.dataclass(frozen=True, slots=True)
class AccessList:
    lock: int
    grants: tuple[AclEntry, ...] = ()
    key: str | None = None


NONE = AccessList(0)


def _int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def check_grant(offset: object, size: object, grantee: object) -> AclEntry:
    """An AclEntry if the fields are in range. Raises InvalidArgument naming the bad one."""
    if not _int(offset) or not 0 < offset <= _OFFSET_MASK:
        raise errors.InvalidArgument(f"grant offset {offset!r} must be an integer in [1, 2^40)")
    if not _int(size) or not 0 < size <= _OFFSET_MASK + 1 - offset:
        raise errors.InvalidArgument(f"grant size {size!r} must be a positive integer within the owner's 2^40 bytes")
    if not _int(grantee) or not 0 <= grantee < MAX_OWNER:
        raise errors.InvalidArgument(f"grantee {grantee!r} must be an owner id in [1, 2^22) or 0 (any owner)")
    return AclEntry(offset, size, grantee)


def encode(acl: AccessList) -> bytes:
    """The file form of ``acl``. Raises InvalidArgument if it breaks a limit."""
    if len(acl.grants) > MAX_GRANTS:
        raise errors.InvalidArgument(f"{len(acl.grants)} grants exceed the limit of {MAX_GRANTS} per owner")
    body: dict = {"lock": acl.lock, "grants": [[g.offset, g.size, g.grantee] for g in acl.grants]}
    if acl.key is not None:
        body["key"] = acl.key
    data = wire.pack_body(body)
    if len(data) > MAX_ACL_BYTES:    # cannot happen within MAX_GRANTS; checked all the same
        raise errors.InvalidArgument(f"access list of {len(data)} bytes exceeds {MAX_ACL_BYTES}")
    return data


def decode(data: bytes) -> AccessList:
    """Parse an access list. Raises ProtocolError (bad form) or InvalidArgument (bad grant)."""
    if len(data) > MAX_ACL_BYTES:
        raise errors.MessageTooLarge(f"access list of {len(data)} bytes exceeds {MAX_ACL_BYTES}")
    body = wire.unpack_body(data)
    lock, grants, key = body.get("lock"), body.get("grants", []), body.get("key")
    if not _int(lock) or lock < 0:
        raise errors.ProtocolError(f"access list field 'lock' must be an inode number, got {lock!r:.40}")
    if not isinstance(grants, list) or len(grants) > MAX_GRANTS:
        raise errors.ProtocolError(f"access list field 'grants' must be a list of at most {MAX_GRANTS}")
    if key is not None and not (isinstance(key, str) and len(key) == KEY_LEN):
        raise errors.ProtocolError(f"access list field 'key' must be a {KEY_LEN}-character Z85 key")
    parsed = []
    for g in grants:
        if not isinstance(g, list) or len(g) != 3:
            raise errors.ProtocolError(f"a grant must be [offset, size, grantee], got {g!r:.60}")
        parsed.append(check_grant(*g))
    return AccessList(lock, tuple(parsed), key)


def _owner(value: int) -> str:
    return f"0x{value:06x}"


def check_handles(handles: Iterable[Sequence[int]], what: str, owner: int | None,
                  grants_of: Callable[[int], Sequence[AclEntry]]) -> None:
    """Refuse any handle ``owner`` may not use. ``owner`` is the connection's verified owner
    (None: it has none); ``grants_of(o)`` the live grants of owner ``o``. Handles are
    well-formed (``messages.check_handles``). Raises ForeignHandle naming the first refused.
    """
    for i, (phys, size, _flags) in enumerate(handles):
        holder, offset = phys >> OFFSET_BITS, phys & _OFFSET_MASK
        if owner is not None and holder == owner:
            continue
        if owner is None:
            raise errors.ForeignHandle(
                f"{what}[{i}]: handle 0x{phys:x} of owner {_owner(holder)}: this connection has no verified DDR "
                f"owner; send HELLO with your owner id before tasks that use memory (PROTOCOL.md §5.2)", unbound=True)
        if not any(g.covers(owner, offset, size) for g in grants_of(holder)):
            raise errors.ForeignHandle(
                f"{what}[{i}]: handle 0x{phys:x} size {size}: memory of owner {_owner(holder)} is not granted "
                f"to owner {_owner(owner)} (its owner must grant it first, PROTOCOL.md §6.6)")


def check_task(body: dict, owner: int | None, grants_of: Callable[[int], Sequence[AclEntry]]) -> None:
    """The rule for a whole TASK body (inputs, then outputs). Raises ForeignHandle."""
    for what in ("inputs", "outputs"):
        handles = body.get(what)
        if handles:
            check_handles(handles, what, owner, grants_of)


def own_only(body: dict, owner: int | None) -> bool:
    """True if every handle of ``body`` (well-formed) is memory of ``owner`` itself: a verdict
    that rests on the addresses alone, never on a grant (grants change at any moment)."""
    for what in ("inputs", "outputs"):
        handles = body.get(what)
        if handles:
            if owner is None:
                return False
            for h in handles:
                if h[0] >> OFFSET_BITS != owner:
                    return False
    return True

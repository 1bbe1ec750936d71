"""Typed stubs of the stock framework operators (0x0000-0x03ff, in every image).

Generated from the operators' declarations by arm_side.stubgen; do not edit.
Each function submits its operator and returns the task (see arm_side.stubs).
"""
from __future__ import annotations

from typing import Any, Literal, Sequence, TypeVar, Unpack  # noqa: F401

from protocol.task_options import TaskKw, TaskOptions
from arm_side.stubs import Buffer, Submitter  # noqa: F401

T = TypeVar("T")

__all__ = [
    'ping', 'memcpy', 'fill', 'checksum', 'sleep', 'count',
]


def ping(
        soc: Submitter[T],
        *,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """No-op round trip; answers with the core name.

    Operator 0x0000 ``ping``, buffers: 0 in, 0 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.
    """
    params: dict[str, Any] = {}
    return soc.rpc(0x0000, [], [], params, options=options, **task)


def memcpy(
        soc: Submitter[T],
        src: Buffer,
        dst: Buffer,
        *,
        size: int = -1,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Copy ``size`` bytes (default: all of the smaller buffer) from input 0 to output 0.

    Operator 0x0001 ``memcpy``, buffers: 1 in, 1 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - size (int; -1..; default -1): bytes; -1 = whole buffer
    """
    params: dict[str, Any] = {'size': size}
    return soc.rpc(0x0001, [src], [dst], params, options=options, **task)


def fill(
        soc: Submitter[T],
        dst: Buffer,
        *,
        value: int,
        size: int = -1,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Set ``size`` bytes of output 0 (default: all) to ``value``.

    Operator 0x0002 ``fill``, buffers: 0 in, 1 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - value (int; 0..255; required)
    - size (int; -1..; default -1): bytes; -1 = whole buffer
    """
    params: dict[str, Any] = {'value': value, 'size': size}
    return soc.rpc(0x0002, [], [dst], params, options=options, **task)


def checksum(
        soc: Submitter[T],
        src: Buffer,
        *,
        size: int = -1,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """CRC-32 and byte sum of input 0 (read-only).

    Operator 0x0003 ``checksum``, buffers: 1 in, 0 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - size (int; -1..; default -1): bytes; -1 = whole buffer
    """
    params: dict[str, Any] = {'size': size}
    return soc.rpc(0x0003, [src], [], params, options=options, **task)


def sleep(
        soc: Submitter[T],
        *,
        ms: float,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Occupy the core for ``ms`` milliseconds (scheduling tests and load).

    Operator 0x0004 ``sleep``, buffers: 0 in, 0 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - ms (float; 0.0..24000.0; required)
    """
    params: dict[str, Any] = {'ms': ms}
    return soc.rpc(0x0004, [], [], params, options=options, **task)


def count(
        soc: Submitter[T],
        counters: Buffer,
        *,
        slot: int,
        ms: float = 0.0,
        options: TaskOptions | None = None,
        **task: Unpack[TaskKw],
) -> T:
    """Add 1 to the uint32 counter ``slot`` of output 0, after ``ms`` of work; returns its new value.

    Operator 0x0005 ``count``, buffers: 0 in, 1 out. Returns the submitted task (its values come from
    ``wait()``); ``options`` (a TaskOptions) or its fields as keywords (``core``, ``priority``,
    ``custom_id``, ``timeout_ms``) as ``Soc.rpc``.

    Parameters:

    - slot (int; 0..; required)
    - ms (float; 0.0..24000.0; default 0.0)
    """
    params: dict[str, Any] = {'slot': slot, 'ms': ms}
    return soc.rpc(0x0005, [], [counters], params, options=options, **task)

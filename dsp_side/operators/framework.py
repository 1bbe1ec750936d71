"""Framework operators (0x0000-0x03ff): present in every firmware image."""
from __future__ import annotations

import time
import zlib

import numpy as np

from protocol import errors
from protocol.constants import SLEEP_SHARE_OF_WATCHDOG
from protocol.contract import framework_ops as ops
from dsp_side.registry import Registry


def _size(name: str, size: int, *limits: tuple[str, int]) -> int:
    """Bytes to process: ``size`` (-1 = the smallest buffer). Raises InvalidArgument."""
    smallest = min(n for _, n in limits)
    if size < 0:
        return smallest
    for what, n in limits:
        if size > n:
            raise errors.InvalidArgument(f"{name}: size {size} exceeds the {what} buffer of {n} bytes")
    return size


def ping(ctx, inputs, outputs):
    """No-op round trip; answers with the core name."""
    return {"core": ctx.core}


def memcpy(ctx, inputs, outputs, size):
    """Copy ``size`` bytes (default: all of the smaller buffer) from input 0 to output 0."""
    src, dst = inputs[0], outputs[0]
    n = _size("memcpy", size, ("input", src.size), ("output", dst.size))
    dst[:n] = src[:n]
    return {"bytes": n}


def fill(ctx, inputs, outputs, value, size):
    """Set ``size`` bytes of output 0 (default: all) to ``value``."""
    dst = outputs[0]
    n = _size("fill", size, ("output", dst.size))
    dst[:n] = value
    return {"bytes": n}


def checksum(ctx, inputs, outputs, size):
    """CRC-32 and byte sum of input 0 (read-only)."""
    src = inputs[0]
    n = _size("checksum", size, ("input", src.size))
    view = src[:n]
    return {"crc32": zlib.crc32(view), "sum": int(view.sum(dtype=np.uint64)), "bytes": n}


def _declared_work(op: str, ctx, ms: float) -> None:
    """Refuse work that would trip the core's watchdog (InvalidArgument): a legal task never does."""
    limit = ctx.watchdog_ms * SLEEP_SHARE_OF_WATCHDOG
    if ms > limit:
        raise errors.InvalidArgument(f"{op}: ms={ms:g} is over {limit:g}, {SLEEP_SHARE_OF_WATCHDOG:.0%} of this "
                                     f"core's watchdog ({ctx.watchdog_ms} ms)")


def sleep(ctx, inputs, outputs, ms):
    """Occupy the core for ``ms`` milliseconds (scheduling tests and load)."""
    _declared_work("sleep", ctx, ms)
    time.sleep(ms / 1000.0)
    return {"slept_ms": ms}


def count(ctx, inputs, outputs, slot, ms):
    """Add 1 to the uint32 counter ``slot`` of output 0, after ``ms`` of work: a task that
    ran twice leaves 2 there (the load test's exactly-once check)."""
    counters = outputs[0][: outputs[0].size // 4 * 4].view(np.uint32)
    if slot >= counters.size:
        raise errors.InvalidArgument(f"count: slot {slot} is outside the {counters.size} counters of output 0")
    _declared_work("count", ctx, ms)
    if ms:
        time.sleep(ms / 1000.0)
    counters[slot] = (int(counters[slot]) + 1) & 0xFFFFFFFF   # wraps like the uint32 it is
    return {"value": int(counters[slot])}


def register(registry: Registry) -> None:
    """Bind the framework kernels to their entries (``protocol.contract.framework_ops``)."""
    for entry, fn in ((ops.PING, ping), (ops.MEMCPY, memcpy), (ops.FILL, fill), (ops.CHECKSUM, checksum),
                      (ops.SLEEP, sleep), (ops.COUNT, count)):
        registry.bind(entry, fn)

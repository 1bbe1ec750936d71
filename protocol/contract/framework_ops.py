"""The framework operators (0x0000-0x03ff), declared once: the loader adds them to every image."""
from __future__ import annotations

from protocol.constants import MAX_SLEEP_MS
from protocol.contract.operator import OperatorEntry, catalog

_SIZE = {"type": "int", "default": -1, "min": -1, "doc": "bytes; -1 = whole buffer"}

PING = OperatorEntry.declare(0x0000, "ping", doc="No-op round trip; answers with the core name.")
MEMCPY = OperatorEntry.declare(
    0x0001, "memcpy", {"size": _SIZE}, inputs=1, outputs=1, buffers=(("src",), ("dst",)),
    doc="Copy ``size`` bytes (default: all of the smaller buffer) from input 0 to output 0.")
FILL = OperatorEntry.declare(
    0x0002, "fill", {"value": {"type": "int", "min": 0, "max": 255}, "size": _SIZE}, outputs=1,
    buffers=((), ("dst",)), doc="Set ``size`` bytes of output 0 (default: all) to ``value``.")
CHECKSUM = OperatorEntry.declare(0x0003, "checksum", {"size": _SIZE}, inputs=1, buffers=(("src",), ()),
                                 doc="CRC-32 and byte sum of input 0 (read-only).")
SLEEP = OperatorEntry.declare(0x0004, "sleep", {"ms": {"type": "float", "min": 0.0, "max": MAX_SLEEP_MS}},
                              doc="Occupy the core for ``ms`` milliseconds (scheduling tests and load).")
COUNT = OperatorEntry.declare(
    0x0005, "count", {"slot": {"type": "int", "min": 0},
                      "ms": {"type": "float", "default": 0.0, "min": 0.0, "max": MAX_SLEEP_MS}},
    outputs=1, buffers=((), ("counters",)),
    doc="Add 1 to the uint32 counter ``slot`` of output 0, after ``ms`` of work; returns its new value.")

ENTRIES = catalog(PING, MEMCPY, FILL, CHECKSUM, SLEEP, COUNT)

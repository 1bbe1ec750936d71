"""Numbers shared by every peer: commands, core choices, priorities, limits, liveness."""
from __future__ import annotations

import enum

MAGIC = b"VD"
VERSION = 2         # the header's version byte and READY's `protocol` (PROTOCOL.md §17: what changed)
EARLIER_VERSIONS = frozenset({1})   # laid out as ours: a request of one is refused in its own header


class Command(enum.IntEnum):
    """The command byte of the header. Requests carry a msg_id their reply echoes."""

    HELLO = 0x01       # peer → server: who I am (role, pid, owner)
    READY = 0x02       # server → peer: reply to HELLO (name, firmware, operators, endpoints)
    TASK = 0x10        # run operator ``op`` on handles; reply RESULT or ERROR
    RESULT = 0x11      # success reply to any request
    ERROR = 0x12       # failure reply to any request: {code, name, message}
    CANCEL = 0x13      # release a task by msg_id; reply RESULT {state}
    HEARTBEAT = 0x20   # liveness, both ways, no reply
    CONTROL = 0x30     # read/write a remoteproc attribute
    QUERY = 0x31       # cores, operators, versions, stats
    EVENT = 0x40       # server → peers: a core changed state
    DISCONNECT = 0x50  # peer leaves; server drops its state


REQUESTS = frozenset({Command.HELLO, Command.TASK, Command.CANCEL, Command.CONTROL, Command.QUERY})
REPLIES = frozenset({Command.READY, Command.RESULT, Command.ERROR})


class Core(enum.IntEnum):
    """Core choice of a task, with hbBPUCore values (ANY = 0, bit per core)."""

    ANY = 0
    CORE_0 = 1
    CORE_1 = 2

    @property
    def index(self) -> int | None:
        """0 or 1 for a pinned core, None for ANY."""
        return None if self is Core.ANY else self.value.bit_length() - 1


CORE_NAMES = ("vdsp0", "vdsp1")

PRIORITY_LOWEST = 0
PRIORITY_HIGHEST = 255
PRIORITY_PREEMP = 255  # HB_DNN_PRIORITY_PREEMP: goes to the head of its core's queue

# Handle flags (third element of a handle on the wire). REGISTERED marks memory the SDK mapped
# with register(); it grants nothing (PROTOCOL.md §6.2). Every other bit is reserved.
HANDLE_REGISTERED = 1
HANDLE_FLAGS = HANDLE_REGISTERED    # the defined bits; a handle with another bit set is refused

# Size limits enforced by the codec (bytes / counts).
MAX_BODY = 1 << 20          # msgpack body of one message
MAX_FRAMES = 64             # header + body + raw frames
MAX_RAW_FRAME = 64 << 20    # one inline data frame
MAX_MESSAGE = 64 << 20      # all raw frames of one message together
MAX_DEPTH = 32              # nesting of maps and arrays in a body (the body map is depth 1)
MAX_CONTAINER = 4096        # elements of one msgpack array or map
MAX_HANDLES = 32            # inputs or outputs of one task
MAX_TASKS_PER_CLIENT = 32   # in flight per client (HB_DNN_TASK_NUM_EXCEED_LIMIT)

# Liveness (PROTOCOL.md §9, protocol/liveness.py). Peers heartbeat every HEARTBEAT_INTERVAL_MS.
# A process that exits is known at once from the kernel (closed connection, child exit), never
# from silence. Silence makes a peer *hung* only past HUNG_AFTER_MS, a deadline a starved but live
# process on a loaded host does not reach, and then only if its process (where we can see it) makes
# no progress; past HUNG_HARD_FACTOR x HUNG_AFTER_MS it is hung whatever its process does.
HEARTBEAT_INTERVAL_MS = 500
HUNG_AFTER_MS = 20_000
HUNG_HARD_FACTOR = 3
# A core kills a firmware stuck this long in one task (``--watchdog-ms``). Operators whose
# work is declared by a parameter (SLEEP, COUNT's ``ms``) refuse more than
# SLEEP_SHARE_OF_WATCHDOG of the core's watchdog, so a legal task never trips it.
DEFAULT_WATCHDOG_MS = 30_000
SLEEP_SHARE_OF_WATCHDOG = 0.8
MAX_SLEEP_MS = DEFAULT_WATCHDOG_MS * SLEEP_SHARE_OF_WATCHDOG   # the schema's bound, for the default watchdog
# The relay holds a client's READY until every core has answered, at most this many heartbeat
# intervals after it started (PROTOCOL.md §5.2).
LIVENESS = 3

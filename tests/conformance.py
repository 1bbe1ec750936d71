"""The conformance cases of the two clients (issue 42): one table of requests a user makes of
the SoC through the hbSys/hbDSP functions, each with its outcome stated once, from PROTOCOL.md
(§5.3, §6, §7, §8, §12), hb_sys.h/hb_dsp.h and docs/capi.md (never from running a client):
the code's error class of ``protocol.errors``, or success with (some of) the result values.

Two drivers run the same table, each a program of its own against a live SoC, and print
one line per case: ``tests/conformance_py.py`` through the Python SDK (``arm_side.hb``, the
Python spelling of the C API: call for call the same request) and ``tests/conformance_check.c``
through the C library (``hb_sys.h``/``hb_dsp.h``, linked with libvdsp_hb or the native core's
libvdsp_client.so; over ipc and over tcp with CURVE keys, in relay and in direct mode).
``tests/integration/test_conformance.py`` compares them all with the table.

**The line format** (:func:`case_lines`, tab-separated, one case a line)::

    name  op  inputs  outputs  json  core  priority  flow  arg  packed

- ``op``: the operator id (decimal); ``json``: its parameters as a JSON object, ``-``: none
  (the C driver passes them to ``hbDSPRpcV2Json``, the Python one as ``params``);
- ``core``/``priority``: the ``hbDSPRpcCtrlParam`` passed (``dspCoreId``, ``priority``);
- ``inputs``/``outputs``: ``-`` or buffers separated by ``,``: ``mem:N`` (N bytes of
  :func:`pattern` allocated uncached), ``freed:N`` (allocated, freed, then passed), ``past:N``
  (allocated, passed with ``memSize`` N+1), ``sub:N:OFF:LEN`` (the range ``phyAddr`` + OFF,
  LEN bytes, inside N bytes allocated), ``never`` (64 bytes at an address of this process's
  owner that was never allocated: offset 2^39), ``raw:PHYS:N`` (``{PHYS, NULL, N}``: another
  process's memory, PHYS in hex);
- ``flow`` and its ``arg``: ``rpc`` (submit; wait ``arg`` ms, 0 for ever; the values),
  ``release_wait`` (submit, release, wait), ``release_twice`` (submit, wait, release, release),
  ``flood`` (submit ``arg`` tasks; the first refusal, else the last one's wait; release all),
  ``flush`` (``hbSysFlushMem(inputs[0], arg)``), ``packed`` (as ``rpc``, but the C drivers call
  ``hbDSPRpcV2`` with the parameters packed into the input as a J5 program packs them,
  docs/capi.md: ``packed``, the bytes of the operator's struct in hex, at byte 0, the input's
  data ``mem:N`` from byte ``HB_DSP_PACKED_DATA`` on; the Python driver passes ``json`` as
  ``params`` and the data as the input, its spelling of the same request);
- ``packed``: ``-``, or the struct's bytes for the ``packed`` flow.

A driver prints ``name  code  values  text`` per case: the first non-zero code of the flow (0:
success), the values as ``json.dumps(values, sort_keys=True)`` (``-`` without), and the error's
text (``hbDNNGetErrorDesc`` in C; the exception's message in Python).

**Not covered, and why:**

- *Relay gone (no SoC) → HB_DSP_RELAY_UNAVAILABLE*: the same request is not the same today: the
  Python SDK starts ``dsp_relay_server`` when no relay answers (relay autostart), the native
  side does not (docs/capi.md, "Not here"); with the SoC stopped under a connected client the
  code depends on when each client notices (tests/integration/test_capi_native.py kills a relay
  under the native core alone).
- *A HELLO answered HB_DSP_BUSY*: only a flood of claims makes a server answer so
  (tests/integration/test_live_hello_flood.py); both clients say HELLO again and no code reaches
  the user, so there is nothing to compare at the hbSys/hbDSP surface.
- *Strict cache mode (HB_SYS_CACHE_NOT_FLUSHED)*: a setting of the process
  (``VDSP_STRICT_CACHE``) rather than a request; examples/capi/pointcloud.c runs it on both
  libraries (tests/integration/test_capi_hb_native.py).
- *A struct of hb_dsp_ops.h* (``hbDSPRpcV2Param``): it has no Python spelling (``params`` is a
  dict); tests/integration/test_capi_hb_native.py compares the bodies the structs make with the
  embedded SDK's. Cases marked ``c_only`` (a packed input too small for its struct) have no
  Python spelling either: the C clients run them, and agree.
- *HB_DSP_UNKNOWN_HANDLE / FREED_HANDLE / HANDLE_OUT_OF_BOUNDS from the firmware*: neither
  client sends its own process's memory unchecked (a freed, never-allocated or too long
  ``hbSysMem`` is HB_SYS_INVALID_ARGUMENT before any message), and another owner's memory is
  judged by its grant first (§6.6, on the address alone), so no hbSys/hbDSP request reaches
  §6.4's checks.
- *Another owner's memory registered* (``hbSysRegisterMem``): in
  tests/integration/test_capi_hb_native.py and tests/integration/test_hb.py.
"""
from __future__ import annotations

import dataclasses
import json
import struct
import zlib

from protocol import errors

# the operators of every firmware image (PROTOCOL.md §7.2)
PING, MEMCPY, FILL, CHECKSUM, SLEEP = 0x0000, 0x0001, 0x0002, 0x0003, 0x0004
CORE_ANY, CORE_0, CORE_1 = 0, 1, 2                   # hbDSPCore
INVALIDATE, CLEAN = 1, 2                             # hbSysMemFlushFlag
MAX_IN_FLIGHT = 32                                   # tasks per client in the relay (§12)
THEIRS, GRANTED = "{theirs}", "{granted}"            # another process's memory: not granted / its first 4096 bytes


def pattern(n: int) -> bytes:
    """The bytes every driver writes into an allocated buffer: byte i is (7 i + 3) mod 256."""
    return bytes((i * 7 + 3) & 0xFF for i in range(n))


def checksum(data: bytes) -> dict:
    """The checksum operator's values for ``data`` (§7.2: CRC-32/ISO-HDLC, the byte sum, the count)."""
    return {"crc32": zlib.crc32(data), "sum": sum(data), "bytes": len(data)}


@dataclasses.dataclass(frozen=True)
class Case:
    """One request and its outcome. ``expect``: the error class whose code every client returns,
    or a dict of result values the task returns (success); ``source``: where the spec says the
    failure is found in relay mode: ``client`` (the SDK, before any message: its text is the
    library's own), ``relay`` or ``firmware`` (in direct mode the relay's checks are the
    firmware's, and the client's for the tasks in flight, with the same codes: §5.3, §12)."""
    name: str
    op: int
    expect: type[errors.VdspError] | dict
    source: str = "firmware"
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    params: str | None = None       # JSON text
    core: int = CORE_ANY
    priority: int = 0
    flow: str = "rpc"
    arg: int = 0
    packed: bytes = b""             # the struct's bytes (flow "packed")
    c_only: bool = False            # no Python spelling: the C clients alone

    @property
    def code(self) -> int:
        return 0 if isinstance(self.expect, dict) else int(self.expect.code)


CASES = (
    # success: the values of §7.2
    Case("ping_on_core_1", PING, {"core": "vdsp1"}, core=CORE_1),
    Case("checksum", CHECKSUM, checksum(pattern(4096)), inputs=("mem:4096",)),
    Case("memcpy_of_size", MEMCPY, {"bytes": 100}, inputs=("mem:4096",), outputs=("mem:8192",), params='{"size": 100}'),
    Case("checksum_of_a_range_inside_a_buffer", CHECKSUM, checksum(pattern(4096)[64:164]),      # §6.2, docs/capi.md
         inputs=("sub:4096:64:100",)),
    Case("checksum_of_granted_memory", CHECKSUM, checksum(pattern(4096)), inputs=(f"raw:{GRANTED}:4096",)),  # §6.6 rule 3
    # the operator and the submission (§5.3, §7.1, hb_dsp.h)
    Case("unknown_operator", 0x7777, errors.UnknownOperator),
    Case("operator_id_out_of_range", 0xFFFF, errors.InvalidArgument, "client"),
    Case("core_3", PING, errors.InvalidCore, "client", core=3),
    Case("priority_256", PING, errors.InvalidArgument, "client", priority=256),
    # buffer counts and parameters (§7.2, §7.4)
    Case("memcpy_without_its_output", MEMCPY, errors.InvalidArgument, inputs=("mem:64",)),
    Case("parameter_of_the_wrong_type", FILL, errors.InvalidArgument, outputs=("mem:64",), params='{"value": "7"}'),
    Case("parameter_out_of_its_range", FILL, errors.InvalidArgument, outputs=("mem:64",), params='{"value": 256}'),
    Case("required_parameter_missing", FILL, errors.InvalidArgument, outputs=("mem:64",), params="{}"),
    Case("unknown_parameter", PING, errors.InvalidArgument, params='{"bogus": 1}'),
    Case("size_past_the_buffer", CHECKSUM, errors.InvalidArgument, inputs=("mem:64",), params='{"size": 65}'),
    Case("sleep_past_the_watchdog", SLEEP, errors.InvalidArgument, params='{"ms": 30000}'),
    # memory (hb_sys.h, docs/capi.md Conventions, §6.6)
    Case("freed_input", CHECKSUM, errors.SysInvalidArgument, "client", inputs=("freed:4096",)),
    Case("never_allocated_input", CHECKSUM, errors.SysInvalidArgument, "client", inputs=("never",)),
    Case("memsize_past_its_buffer", CHECKSUM, errors.SysInvalidArgument, "client", inputs=("past:4096",)),
    Case("another_owners_memory_not_granted", CHECKSUM, errors.ForeignHandle, "relay", inputs=(f"raw:{THEIRS}:4096",)),
    Case("past_the_grant", CHECKSUM, errors.ForeignHandle, "relay", inputs=(f"raw:{GRANTED}:8192",)),
    Case("flush_with_a_bad_flag", PING, errors.SysInvalidArgument, "client", inputs=("mem:64",), flow="flush", arg=3),
    Case("flush_clean", PING, {}, "client", inputs=("mem:64",), flow="flush", arg=CLEAN),
    # tasks (hb_dsp.h, §12)
    Case("wait_shorter_than_the_task", SLEEP, errors.TaskTimeout, "client", params='{"ms": 500}', arg=1),
    Case("wait_on_a_released_task", SLEEP, errors.InvalidTaskHandle, "client", params='{"ms": 300}',
         flow="release_wait"),
    Case("released_twice", PING, errors.InvalidTaskHandle, "client", flow="release_twice"),
    # parameters packed into the input (hbDSPRpcV2, docs/capi.md): hbDSPChecksumParam / hbDSPMemcpyParam
    # {int64_t size}, hbDSPFillParam {int64_t value; int64_t size}, as a J5 program writes them
    Case("packed_checksum_of_size", CHECKSUM, checksum(pattern(4096)[:100]), inputs=("mem:4096",),
         params='{"size": 100}', flow="packed", packed=struct.pack("<q", 100)),
    Case("packed_memcpy_of_size", MEMCPY, {"bytes": 100}, inputs=("mem:4096",), outputs=("mem:8192",),
         params='{"size": 100}', flow="packed", packed=struct.pack("<q", 100)),
    Case("packed_fill_out_of_its_range", FILL, errors.InvalidArgument, outputs=("mem:64",), params='{"value": 256}',
         flow="packed", packed=struct.pack("<qq", 256, -1)),
    Case("packed_input_without_data", CHECKSUM, errors.InvalidArgument, "client", params='{"size": 100}',
         flow="packed", packed=struct.pack("<q", 100), c_only=True),
    Case("too_many_tasks_in_flight", SLEEP, errors.TaskNumExceedLimit, "relay", params='{"ms": 1000}', flow="flood",
         arg=MAX_IN_FLIGHT + 1),
)


def case_lines(cases: tuple[Case, ...], theirs: int, granted: int) -> str:
    """The cases in the drivers' line format, another process's addresses filled in."""
    def buffers(specs: tuple[str, ...]) -> str:
        text = ",".join(specs).replace(THEIRS, f"{theirs:x}").replace(GRANTED, f"{granted:x}")
        return text or "-"
    rows = [[c.name, str(c.op), buffers(c.inputs), buffers(c.outputs), c.params if c.params is not None else "-",
             str(c.core), str(c.priority), c.flow, str(c.arg), c.packed.hex() or "-"] for c in cases]
    return "".join("\t".join(row) + "\n" for row in rows)


@dataclasses.dataclass(frozen=True)
class Outcome:
    code: int
    values: dict | None
    text: str


def parse_outcomes(stdout: str) -> dict[str, Outcome]:
    """A driver's output: each case's outcome by name."""
    out = {}
    for line in stdout.splitlines():
        name, code, values, text = (line.split("\t", 3) + ["", "", ""])[:4]
        out[name] = Outcome(int(code), None if values == "-" else json.loads(values), text)
    return out

"""The relay engine's CPU per task, in-process: one TASK from a client and its RESULT from a
firmware through ``RelayEngine`` (sans-I/O), its outputs dispatched as the adapter's ``flush``
dispatches them, N cycles, best of R runs of process CPU time (less noisy than wall time on a
shared host). Prints one JSON line: µs per cycle, and whether the compiled build was used.

For an A/B of two checkouts run it with PYTHONPATH naming each (and VDSP_NATIVE=0 for the pure
modules), from a neutral cwd:

    cd /tmp && PYTHONPATH=/path/to/checkout .venv/bin/python /path/to/scripts/relay_engine_cost.py 100000 5
"""
from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace

from protocol import header, messages, wire
from relay_server import engine as engine_module
from relay_server.engine import RelayEngine

try:        # the typed effects (relay_server.effects); a checkout before them tags tuples with strings
    from relay_server import effects
except ImportError:
    effects = None  # type: ignore[assignment]


def relay() -> RelayEngine:
    """Both cores running, one client that said HELLO; every claim and handle taken (the ownership
    checks have their own costs and tests)."""
    trust_all = SimpleNamespace(claim=lambda body, meta=None, peer="": body.get("owner"),
                                check_task=lambda owner, body: None)
    e = RelayEngine({"vdsp0": "ipc:///x/vdsp0.sock", "vdsp1": "ipc:///x/vdsp1.sock"}, 100.0, ownership=trust_all)
    for i, name in enumerate(("vdsp0", "vdsp1")):
        e.on_ctl(i, wire.encode(messages.ready(1, name, "core", state="running", pid=10 + i, fw_pid=20 + i,
                                               fw_endpoint=f"ipc:///x/{name}.fw.sock")), 100.0)
    e.on_client(b"A", wire.encode(messages.hello(5, "client", pid=77, name="a")), 100.0)
    e.out.clear()
    return e


def flush_typed(out: list, sent: list) -> None:
    """``relay_server.server``'s dispatch, with ``sent`` for its sockets."""
    for effect in out:
        match effect:
            case effects.ToClient():
                sent.append(effect.frames)
            case effects.ToFw():
                sent.append((effect.index, effect.frames))
            case effects.ToCtl():
                pass
            case effects.OpenFwLink():
                pass
            case effects.CloseFwLink():
                pass
    out.clear()


def flush_tagged(out: list, sent: list) -> None:
    """The same, on string-tagged tuples (before ``relay_server.effects``)."""
    to_client, to_fw, to_ctl = engine_module.TO_CLIENT, engine_module.TO_FW, engine_module.TO_CTL  # type: ignore[attr-defined]
    open_fw, close_fw = engine_module.OPEN_FW, engine_module.CLOSE_FW  # type: ignore[attr-defined]
    for kind, where, data in out:
        if kind == to_client:
            sent.append(data)
        elif kind == to_fw:
            sent.append((where, data))
        elif kind == to_ctl:
            pass
        elif kind == open_fw:
            pass
        elif kind == close_fw:
            pass
    out.clear()


def run(n: int) -> float:
    """CPU seconds for ``n`` cycles."""
    e = relay()
    flush = flush_typed if effects is not None else flush_tagged
    task = wire.encode(messages.task(9, 0, inputs=[], outputs=[]))
    reply = wire.encode(messages.result(1, {"ok": 1}))
    sent: list = []
    now = 100.0
    t0 = time.process_time()
    for _ in range(n):
        e.on_client(b"A", task, now)
        flush(e.out, sent)
        index, frames = sent.pop()
        e.on_fw(index, [header.retag(reply[0], header.msg_id_of(frames[0])), *reply[1:]], now)
        flush(e.out, sent)
        sent.clear()
    return time.process_time() - t0


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 100_000
    rounds = int(argv[1]) if len(argv) > 1 else 5
    best = min(run(n) for _ in range(rounds))
    compiled = type(engine_module.__loader__).__name__ == "ExtensionFileLoader"
    print(json.dumps({"us_per_cycle": round(best / n * 1e6, 3), "compiled": compiled,
                      "typed_effects": effects is not None, "source": engine_module.__file__}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

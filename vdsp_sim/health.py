"""``vdsp health``: prove that the SoC works, not only that it answers.

For each core it allocates a buffer of random bytes (cached, then cleaned to DDR), has
that core copy it into a second buffer (MEMCPY) and checksum the copy (CHECKSUM), reads
the copy back and compares both with what it wrote. A core that answers PING but cannot
map this process's DDR (another /dev/shm, a lost shared directory, a foreign owner) fails
here, which is what the container healthchecks need to see.

  vdsp health                       every core, through the relay ($VDSP_RELAY_ENDPOINT or the runtime dir)
  VDSP_RPC_MODE=direct VDSP_CORE_ENDPOINTS=vdsp0=tcp://127.0.0.1:6100 vdsp health --core vdsp0

Exit status: 0 every named core returned the same bytes; 1 a core returned wrong bytes or
an error; 3 the SoC (or a named core) is not reachable or not running, or (through the relay)
its firmware refused the relay (each is named, with the reason it gave), or it did not answer
within the check's deadline (``--deadline``, 8 s: a probe's own timeout would end the check
without a word).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import zlib

from protocol import errors
from protocol.constants import Core
from vdsp_board.config import clihelp

NOT_REACHABLE, WRONG = 3, 1
DEADLINE_S = 8.0        # the whole check: under the 10 s timeout of the compose and k8s probes


class _Budget:
    """The per-task timeout, cut to what is left of the whole check's deadline."""

    def __init__(self, timeout_ms: float, deadline_s: float) -> None:
        self.timeout_ms, self.deadline_s = timeout_ms, deadline_s
        self.end = time.monotonic() + deadline_s

    def __call__(self) -> float:
        """Milliseconds the next wait may take. Raises TaskTimeout once the deadline has passed."""
        left = (self.end - time.monotonic()) * 1e3
        if left <= 0:
            raise errors.TaskTimeout(self.over())
        return min(self.timeout_ms, left)

    def over(self) -> str:
        return f"the check did not end within its deadline, {self.deadline_s:g} s (--deadline)"

    def passed(self) -> bool:
        return time.monotonic() >= self.end


def _round_trip(soc, core: Core, name: str, size: int, timeout_ms) -> tuple[bool, str]:
    from arm_side import CLEAN, opids
    pattern = os.urandom(size)
    src, dst = soc.mem.alloc_cached(size), soc.mem.alloc(size)
    try:
        src.write(pattern)
        src.flush(CLEAN)
        dst.write(bytes(size))
        t0 = time.perf_counter()
        task = soc.rpc(opids.MEMCPY, inputs=[src], outputs=[dst], core=core)
        task.wait(timeout_ms())
        crc = soc.rpc(opids.CHECKSUM, inputs=[dst], core=core).wait(timeout_ms())["crc32"]
        ms = (time.perf_counter() - t0) * 1e3
        if task.core != name:
            return False, f"{name}: the task ran on {task.core}"
        if dst.read() != pattern:
            return False, f"{name}: the {size}-byte copy differs from what was written"
        if crc != zlib.crc32(pattern):
            return False, f"{name}: checksum 0x{crc:08x}, expected 0x{zlib.crc32(pattern):08x}"
        return True, f"{name}: {size}-byte buffer round trip ok ({ms:.1f} ms)"
    finally:
        src.free()
        dst.free()


def _down(core: dict) -> str:
    """Why ``core`` cannot serve: not running (and the reason it gave), or its firmware refused the relay."""
    if core.get("fw_link") == "refused":
        return f"{core['name']}'s firmware refused the relay: {core.get('fw_refused') or '?'}"
    reason = core.get("reason")
    return f"{core['name']} is {core.get('state', '?')}" + (f" ({reason})" if reason else "")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vdsp health", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    return ap


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of 'vdsp health' (vdsp_sim/commands/health.py)."""
    ap.add_argument("--core", action="append", default=[], metavar="NAME",
                    help="a core to check (repeatable; default: every core of the SoC)")
    ap.add_argument("--size", type=int, default=64 << 10, help="bytes of the buffer (default 64 KiB)")
    ap.add_argument("--timeout-ms", type=float, default=5000, help="per task (default 5000)")
    ap.add_argument("--connect-timeout", type=float, default=3.0, help="seconds to reach the SoC (default 3)")
    ap.add_argument("--deadline", type=float, default=DEADLINE_S, metavar="SECONDS",
                    help=f"the whole check ends within this many seconds, saying what it waited for (default "
                         f"{DEADLINE_S:g}: within the 10 s a container healthcheck or a Kubernetes probe gives it)")


def main(argv: list[str] | None = None) -> int:
    return run_args(clihelp.finish(parser()).parse_args(argv))


def run_args(args: argparse.Namespace) -> int:
    from arm_side.soc import Soc
    budget = _Budget(args.timeout_ms, args.deadline)
    try:
        with Soc(autostart_relay=False, connect_timeout_s=min(args.connect_timeout, budget() / 1e3)) as soc:
            cores = soc.query("cores", timeout_ms=budget())["cores"]
            names = [c["name"] for c in cores]
            wanted = args.core or names
            missing = [n for n in wanted if n not in names]
            down = [_down(c) for c in cores if c["name"] in wanted and
                    (c.get("state") != "running" or c.get("fw_link") == "refused")]
            if missing or down:
                print(f"vdsp health: {', '.join([f'no core {n}' for n in missing] + down)}", file=sys.stderr)
                return NOT_REACHABLE
            ok = True
            for name in wanted:
                try:
                    good, line = _round_trip(soc, Core(1 << names.index(name)), name, args.size, budget)
                except errors.TaskTimeout as exc:
                    raise errors.TaskTimeout(f"{name}: {exc.message}") from None
                print(line, file=sys.stdout if good else sys.stderr)
                ok &= good
            return 0 if ok else WRONG
    except (errors.RelayUnavailable, errors.TaskTimeout) as exc:
        said = exc.message if budget.over() in exc.message or not budget.passed() else f"{budget.over()}: {exc.message}"
        print(f"vdsp health: {said}", file=sys.stderr)
        return NOT_REACHABLE
    except errors.VdspError as exc:
        print(f"vdsp health: {type(exc).__name__}: {exc}", file=sys.stderr)
        return WRONG


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The floor for the operator benchmarks: the same process topology with nothing of vdsp-sim in it.

A client socket in the benchmark process -> a relay process (the raw ROUTER/DEALER poll loop
of ``bench_rpc.py``) -> a worker process holding a table of plain Python callables. A request
is one frame, the callable's name; the worker calls it and answers the name and the
microseconds the call took (an empty name is the no-op). No msgpack, no validation, no handles,
no shared-memory resolution, no SDK.

The operator benchmarks time their kernels through it in the same run as through the SoC:
``floor rpc - in-process`` against ``floor no-op`` is what *any* implementation of this
topology (ARM process -> relay process -> DSP process over ZeroMQ ipc sockets) gets on the
machine. When the floor misses a target too, the miss belongs to the machine, not to the stack.

The worker builds its table by calling ``module:function`` (a module of ``vdsp_sim.benchmarks``),
which returns ``{name: callable}``: the same in-process callables the benchmark times.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

import zmq

from vdsp_sim.benchmarks.bench_rpc import Baseline


def role_worker(directory: str, kernels: str) -> int:
    """DEALER on the relay's back end: runs the named callable, answers its name and time."""
    parent = os.getppid()
    module, _, function = kernels.partition(":")
    from dsp_side.heap import keep_heap
    keep_heap()                 # as the firmware does: the floor is the best plain implementation
    table = getattr(importlib.import_module(module), function)()
    for fn in table.values():   # warm-up, like the benchmark's own warm-up call
        fn()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(f"ipc://{directory}/back.sock")
    print("ready", flush=True)
    while True:
        if not sock.poll(200):
            if os.getppid() != parent:
                return 0
            continue
        identity, name = sock.recv_multipart()
        us = 0.0
        if name:
            fn = table.get(name.decode())
            if fn is None:
                sock.send_multipart([identity, b"?" + name, b"0"])
                continue
            t0 = time.perf_counter()
            fn()
            us = (time.perf_counter() - t0) * 1e6
        sock.send_multipart([identity, name, b"%.1f" % us])


class Floor(Baseline):
    """Start with ``with Floor("vdsp_sim.benchmarks.bench_cv:floor_kernels") as floor:``; ``floor.call(name)`` returns
    the round trip in µs, and ``floor.last_exec_us`` the worker's time in the callable.
    The relay, the processes' lifecycle and ``stop`` are the raw baseline's (``bench_rpc.Baseline``)."""

    def __init__(self, kernels: str, start_timeout_s: float = 120.0) -> None:
        super().__init__(body_size=0)
        self.kernels, self.timeout = kernels, start_timeout_s
        self.last_exec_us = 0.0

    def start(self) -> None:
        self._spawn("baseline-relay")
        self._spawn("worker", __spec__.name, "--kernels", self.kernels)
        self._connect()
        self.call("", timeout_ms=int(self.timeout * 1000))

    def call(self, name: str = "", timeout_ms: int = 10000) -> float:  # type: ignore[override]  # names a kernel
        """One round trip running ``name`` in the worker ("" = no-op); wall-clock µs."""
        want = name.encode()
        t0 = time.perf_counter()
        self.sock.send(want)
        if not self.sock.poll(timeout_ms):
            raise RuntimeError(f"floor: no answer to {name!r} within {timeout_ms} ms")
        got, exec_us = self.sock.recv_multipart()
        us = (time.perf_counter() - t0) * 1e6
        if got != want:
            raise RuntimeError(f"floor: asked {name!r}, got {got!r}")
        self.last_exec_us = float(exec_us)
        return us


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--role", choices=["worker"], required=True, help="internal: the floor's worker process")
    ap.add_argument("--dir", required=True, help="the directory of the relay's ipc sockets")
    ap.add_argument("--kernels", required=True, help="module:function returning {name: callable}")
    args = ap.parse_args(argv)
    return role_worker(args.dir, args.kernels)


if __name__ == "__main__":
    sys.exit(main())

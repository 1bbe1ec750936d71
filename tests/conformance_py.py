"""The Python driver of the conformance cases (tests/conformance.py): ``python -m
tests.conformance_py CASES_FILE`` runs each case through ``arm_side.hb``, call for call what
tests/conformance_check.c does through the C library, on the SoC of ``$VDSP_RUNTIME_DIR``, and
prints ``name  code  values  text`` per case."""
from __future__ import annotations

import copy
import json
import sys
from typing import Any

import numpy as np

from arm_side import hb
from tests.conformance import pattern

NEVER_OFFSET = 1 << 39        # an offset of this process's owner that is never allocated


class Run:
    """One case's buffers and tasks (freed and released at the end)."""

    def __init__(self) -> None:
        self.allocated: list[hb.hbSysMem] = []
        self.tasks: list[hb.Ref] = []

    def alloc(self, size: int) -> hb.hbSysMem:
        m = hb.hbSysMem()
        rc = hb.hbSysAllocMem(m, size)
        if rc:
            raise SystemExit(f"hbSysAllocMem({size}) failed: {rc} {hb.last_error()}")
        assert m.virAddr is not None
        m.virAddr[:] = np.frombuffer(pattern(size), np.uint8)
        self.allocated.append(m)
        return m

    def buffer(self, spec: str) -> hb.hbSysMem:
        kind, *args = spec.split(":")
        if kind == "mem":
            return self.alloc(int(args[0]))
        if kind == "freed":
            m = self.alloc(int(args[0]))
            hb.hbSysFreeMem(m)
            return m
        if kind == "past":
            m = copy.copy(self.alloc(int(args[0])))
            m.memSize += 1
            return m
        if kind == "sub":
            m = copy.copy(self.alloc(int(args[0])))
            m.phyAddr, m.memSize = m.phyAddr + int(args[1]), int(args[2])
            return m
        if kind == "never":
            owner = self.alloc(64).phyAddr >> 40
            return hb.hbSysMem(phyAddr=(owner << 40) | NEVER_OFFSET, memSize=64)
        if kind == "raw":
            return hb.hbSysMem(phyAddr=int(args[0], 16), memSize=int(args[1]))
        raise SystemExit(f"unknown buffer {spec!r}")

    def buffers(self, field: str) -> list[hb.hbSysMem]:
        return [] if field == "-" else [self.buffer(s) for s in field.split(",")]

    def submit(self, op: int, ins: list, outs: list, params: Any, ctrl: hb.hbDSPRpcCtrlParam) -> tuple[int, hb.Ref]:
        task = hb.hbDSPTask_t()
        rc = hb.hbDSPRpcV2(task, ins, outs, op, ctrl, params=params)
        if rc == 0:
            self.tasks.append(task)
        return rc, task

    def close(self) -> None:
        for task in self.tasks:
            hb.hbDSPReleaseTask(task)
        for m in self.allocated:
            if m.mem is not None and not m.mem.freed:
                hb.hbSysFreeMem(m)


def run_case(fields: list[str]) -> tuple[int, dict | None, str]:
    """The case's code, values and text (the error's message: taken before the clean-up calls)."""
    run = Run()
    try:
        code, values = flow_of(run, fields)
        return code, values, str(hb.last_error()) if code else ""
    finally:
        run.close()


def flow_of(run: Run, fields: list[str]) -> tuple[int, dict | None]:
    _name, op, inputs, outputs, params_text, core, priority, flow, arg, _packed = fields
    ins, outs = run.buffers(inputs), run.buffers(outputs)
    params = None if params_text == "-" else json.loads(params_text)
    ctrl = hb.hbDSPRpcCtrlParam(dspCoreId=int(core), priority=int(priority))
    if flow == "flush":
        return hb.hbSysFlushMem(ins[0], int(arg)), None
    if flow == "flood":
        for _ in range(int(arg)):
            rc, task = run.submit(int(op), ins, outs, params, ctrl)
            if rc:
                return rc, None
        return hb.hbDSPWaitTaskDone(task, 0), None
    rc, task = run.submit(int(op), ins, outs, params, ctrl)
    if rc:
        return rc, None
    if flow == "release_wait":
        hb.hbDSPReleaseTask(task)
        return hb.hbDSPWaitTaskDone(task, 0), None
    if flow == "release_twice":
        hb.hbDSPWaitTaskDone(task, 0)
        hb.hbDSPReleaseTask(task)
        return hb.hbDSPReleaseTask(task), None
    rc = hb.hbDSPWaitTaskDone(task, int(arg))
    return rc, task.value.values if rc == 0 else None


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8") as f:
        lines = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    for fields in lines:
        code, values, text = run_case(fields)
        shown = "-" if values is None else json.dumps(values, sort_keys=True)
        print(f"{fields[0]}\t{code}\t{shown}\t{text}".replace("\n", " "), flush=True)
    hb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

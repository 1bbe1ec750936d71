"""The board-time estimate on a live SoC: a C kernel's counted estimate and a Python operator's
table estimate reach the Python SDK (blocking and asyncio), the C API (hbDSPGetTaskBoardTime,
a C program compiled against libvdsp_hb) and the trace's firmware slice."""
from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from arm_side import CORE_0, CORE_1, AsyncSoc, Soc, opids, tracing
from dsp_side.ckernel import board_model as bm
from vdsp_board.observability import trace, tracefmt
from vdsp_sim import capi_build, ctoolchain
from tests import privilege
from tests.dsp.test_board_time import BOARD_SRC
from tests.integration.test_capi import capi_flags, run
from tests.integration.test_live_ckernel import deploy

pytestmark = [pytest.mark.live, pytest.mark.skipif(bool(ctoolchain.missing()), reason="no C compiler")]
COUNT = 0x1450
PARAMS = {"reps": 1000, "rows": 4}
# the hand count of board_count.cc at PARAMS, without its basic blocks and DMA stalls (µs)
FLOOR_US = bm.us(5000 + 1000 * (1 + 16) + 2 * (8 + 1) + 16 * 100)

C_PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include <hb_dsp.h>
int main(void) {
  hbSysMem in, out;
  hbDSPTask_t task = NULL;
  hbDSPRpcCtrlParam ctrl;
  double us = -1;
  int32_t counted = -1, ret;
  if (hbSysAllocMem(&in, 4096) || hbSysAllocMem(&out, 4096)) return 2;
  memset(in.virAddr, 1, 4096);
  HB_DSP_INITIALIZE_RPC_CTRL_PARAM(&ctrl);
  ctrl.dspCoreId = HB_DSP_CORE_1;
  ret = hbDSPRpcV2Json(&task, &in, 1, &out, 1, 0x1450, "{\"reps\": 1000, \"rows\": 4}", &ctrl);
  if (ret == 0) ret = hbDSPWaitTaskDone(task, 30000);
  if (ret == 0) ret = hbDSPGetTaskBoardTime(task, &us, &counted);
  printf("kernel %d %.3f %d\n", ret, us, counted);
  hbDSPReleaseTask(task);
  ctrl.dspCoreId = HB_DSP_CORE_0;
  ret = hbDSPRpcV2Json(&task, &in, 1, &out, 1, 1, "{\"size\": 4096}", &ctrl);   /* memcpy */
  if (ret == 0) ret = hbDSPWaitTaskDone(task, 30000);
  if (ret == 0) ret = hbDSPGetTaskBoardTime(task, &us, NULL);
  printf("memcpy %d %.3f\n", ret, us);
  hbDSPReleaseTask(task);
  ret = hbDSPRpcV2Json(&task, NULL, 0, NULL, 0, 4, "{\"ms\": 1}", &ctrl);        /* sleep: no estimate */
  if (ret == 0) ret = hbDSPWaitTaskDone(task, 30000);
  if (ret == 0) ret = hbDSPGetTaskBoardTime(task, &us, &counted);
  printf("sleep %d\n", ret);
  hbDSPReleaseTask(task);
  hbSysFreeMem(&in);
  hbSysFreeMem(&out);
  return 0;
}
"""


def test_board_time_reaches_the_python_sdk_the_c_api_and_the_trace(live_soc, tmp_path):
    session = trace.start(trace.trace_dir(live_soc.rt))
    with Soc() as soc:
        deploy(soc, BOARD_SRC, live_soc.rt, "board")
        src, dst = soc.mem.alloc(4096), soc.mem.alloc(4096)
        try:
            src.array()[:] = 1
            kernel = soc.rpc(COUNT, [src], [dst], PARAMS, core=CORE_1)
            kernel.wait(30000)
            assert kernel.board_model == "cycles"
            # the hand count, plus the kernel's basic blocks and its waits for IDMA (a few µs)
            assert FLOOR_US < kernel.board_us < FLOOR_US + 10
            again = soc.rpc(COUNT, [src], [dst], PARAMS, core=CORE_1)
            again.wait(30000)
            assert again.board_us == kernel.board_us          # the same work, the same count
            copy = soc.rpc(opids.MEMCPY, [src], [dst], {"size": 4096}, core=CORE_0)
            copy.wait(30000)
            assert (copy.board_model, copy.board_us) == ("table", bm.table_us("memcpy", [src.array()], [dst.array()]))
            nap = soc.rpc(opids.SLEEP, params={"ms": 1}, core=CORE_0)
            nap.wait(30000)
            assert (nap.board_us, nap.board_model) == (None, None)

            async def aio():
                async with AsyncSoc() as asoc:
                    task = asoc.rpc(COUNT, [src], [dst], PARAMS, core=CORE_1, timeout_ms=30000)
                    await task
                    return task.board_us, task.board_model
            assert asyncio.run(aio()) == (kernel.board_us, "cycles")
        finally:
            src.free()
            dst.free()
        trace.stop(trace.trace_dir(live_soc.rt))
        tracing.sdk_tracer().poll(force=True)      # this process's own file ends now (as Soc(trace=) does)
    trace.wait_ended(session["dir"], 5)
    files = tracefmt.load(session["dir"])
    runs = [e for e in tracefmt.to_chrome(files)["traceEvents"] if e.get("cat") == "firmware"]
    board = sorted(e["args"].get("board_us") for e in runs if e["args"]["op"] == f"0x{COUNT:04x}")
    assert board == [kernel.board_us] * 3, json.dumps(runs)[:2000]
    if capi_build.missing():
        privilege.require(f"no C build here: {capi_build.missing()}")
    (tmp_path / "board.c").write_text(C_PROGRAM)
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", *capi_flags("--cflags"), str(tmp_path / "board.c"),
                    *capi_flags("--libs"), "-o", str(tmp_path / "board")], check=True, timeout=120)
    out = run(tmp_path / "board")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"kernel 0 {kernel.board_us:.3f} 1"
    assert lines[1] == f"memcpy 0 {copy.board_us:.3f}"
    assert lines[2] == "sleep -6000001"          # HB_DNN_INVALID_ARGUMENT: no estimate

"""C kernels on a live SoC: the images built by ``vdsp firmware build``'s code path with the
install's signing key, deployed on vdsp1 through remoteproc, called from Python on real shared
memory; the discipline errors arrive coded over the wire; a kernel's segfault is a firmware
crash the core recovers from (the other core never notices)."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

from arm_side import CLEAN, CORE_0, CORE_1, INVALIDATE, Soc, errors, opids, tracing
from dsp_side import fw_image
from vdsp_board.processes import rundir
from vdsp_board.observability import trace, tracefmt
from vdsp_sim import ctoolchain
from tests.conftest import wait_until
from tests.live import LiveSoc
from tests.dsp.test_ckernel import EXAMPLE, RULES, affine_ref

pytestmark = [pytest.mark.live, pytest.mark.skipif(bool(ctoolchain.missing()), reason="no C compiler")]
AFFINE, PEEK, TCM, SEGV, SPIN, OVERFLOW = 0x1410, 0x1420, 0x1421, 0x1422, 0x1428, 0x1429
PINGPONG, SCRIBBLE, HEAP = 0x142A, 0x142B, 0x142C


@pytest.fixture
def strict_soc(runtime_env):
    """A SoC whose cores run C kernels in strict DMA mode."""
    live = LiveSoc(runtime_env, env={"VDSP_STRICT_DMA": "1"})
    live.start()
    try:
        yield live
    finally:
        live.stop_and_check()


def deploy(soc: Soc, src: Path, rt: Path, name: str, sanitize: bool | str = False) -> None:
    fw_image.build(src, rundir.firmware_dir(rt) / name, sanitize=sanitize)
    assert soc.control("vdsp1", "state", "stop") == "offline"
    soc.control("vdsp1", "firmware", name)
    assert soc.control("vdsp1", "state", "start") == "running"


def test_a_c_kernel_called_from_python_on_shared_memory(live_soc):
    n = 150_001
    data = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8)
    with Soc() as soc:
        deploy(soc, EXAMPLE, live_soc.rt, "ckex")
        src, dst = soc.mem.alloc_cached(n), soc.mem.alloc_cached(n)
        try:
            src.array()[:] = data
            src.flush(CLEAN)
            for gain, bias, tile in ((256, 0, 16384), (77, 40, 4096), (1000, -255, 51_000)):
                mapped = ((data.astype(np.int64) * gain + 128) >> 8) + bias
                clipped = int(((mapped < 0) | (mapped > 255)).sum())      # the kernel's result (vdsp_result)
                assert soc.call(AFFINE, [src], [dst], {"gain": gain, "bias": bias, "tile": tile},
                                core=CORE_1, timeout_ms=30000) == {"clipped": clipped}
                dst.flush(INVALIDATE)
                np.testing.assert_array_equal(dst.array()[:n], affine_ref(data, gain, bias))
            with pytest.raises(errors.TcmOverBudget) as exc:
                soc.call(AFFINE, [src], [dst], {"tile": 60000}, core=CORE_1, timeout_ms=30000)
            assert exc.value.code == -6000272 and "bank 0" in exc.value.message and "60000 bytes" in exc.value.message
            assert soc.rpc(opids.PING, core=CORE_1).wait(5000) == {"core": "vdsp1"}   # an error, not a crash
        finally:
            src.free()
            dst.free()
    log = (live_soc.rt / "log" / "vdsp1.log").read_text()
    stamp = r"\[\[\d\d-\d\d\]\[\d\d:\d\d:\d\d:\d{3}:\d{3}\]\]"
    line = rf"\[I\]\[DSP\]\[affine_u8\.c:\d+\]{stamp} affine_u8: {n} bytes in 10 tiles of 16384$"
    assert re.search(line, log, re.M), log[-3000:]       # the kernel's VDSP_LOGI, in the DSP log format


def test_strict_mode_read_before_wait_and_a_segfaulting_kernel(strict_soc):
    with Soc() as soc:
        deploy(soc, RULES, strict_soc.rt, "rules")
        soc.control("vdsp1", "coredump", "enabled")
        src, dst = soc.mem.alloc_cached(256), soc.mem.alloc_cached(512)
        try:
            src.array()[:] = 7
            src.flush(CLEAN)
            with pytest.raises(errors.DmaNotWaited) as exc:
                soc.call(PEEK, [src], [dst], core=CORE_1, timeout_ms=30000)
            assert exc.value.code == -6000273 and "TCM buffer peek_tile used before the wait" in exc.value.message
            with pytest.raises(errors.CoreCrashed):
                soc.call(SEGV, core=CORE_1, timeout_ms=30000)
            assert soc.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
            assert wait_until(lambda: soc.control("vdsp1", "state") == "running", 30, 0.1)
            soc.call(TCM, params={"sizes": [1000]}, core=CORE_1, timeout_ms=30000)   # the image serves again
        finally:
            src.free()
            dst.free()
    dmesg = (strict_soc.rt / "dmesg").read_text()
    assert "crash detected in vdsp1: type killed by SIGSEGV" in dmesg, dmesg[-2000:]
    dump = json.loads((strict_soc.rt / "coredump" / "vdsp1-crash1.json").read_text())
    assert dump["type"] == "killed by SIGSEGV"


def test_a_sanitized_image_stops_at_undefined_behaviour(live_soc):
    with Soc() as soc:
        deploy(soc, RULES, live_soc.rt, "rules-ubsan", sanitize=True)
        soc.call(OVERFLOW, params={"add": 1}, core=CORE_1, timeout_ms=30000)           # defined: runs
        with pytest.raises(errors.CoreCrashed) as exc:
            soc.call(OVERFLOW, params={"add": 2}, core=CORE_1, timeout_ms=30000)
        assert "exit 1" in exc.value.message, exc.value.message
        assert wait_until(lambda: soc.control("vdsp1", "state") == "running", 30, 0.1)
    log = (live_soc.rt / "log" / "vdsp1.log").read_text()
    assert re.search(r"rules\.c:\d+:\d+: runtime error: signed integer overflow", log), log[-3000:]


@pytest.mark.exclusive     # a 2 s watchdog: a busy neighbour could starve a healthy firmware past it
def test_a_kernel_that_loops_forever_meets_the_watchdog(runtime_env):
    live = LiveSoc(runtime_env, core_args=["--watchdog-ms", "2000"])
    live.start()
    try:
        with Soc() as soc:
            deploy(soc, RULES, live.rt, "rules")
            with pytest.raises(errors.CoreCrashed):
                soc.call(SPIN, core=CORE_1, timeout_ms=60000)
            assert soc.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
            assert wait_until(lambda: soc.control("vdsp1", "state") == "running", 30, 0.1)
            soc.call(TCM, params={"sizes": [64]}, core=CORE_1, timeout_ms=30000)
        assert "crash detected in vdsp1: type watchdog" in (live.rt / "dmesg").read_text()
    finally:
        live.stop_and_check()


def test_a_write_past_a_buffer_fails_its_task_coded_and_bank_conflicts_are_in_the_trace(strict_soc):
    """Guard pages (strict mode: inputs read-only too): the task fails with
    HB_DSP_KERNEL_MEMORY_FAULT naming kernel and buffer, the firmware serves on (no crash). Ping
    and pong in one bank: a bank_conflict event of the task in the trace and a warning in the
    DSP log; in two banks, neither."""
    live_soc = strict_soc
    directory = trace.trace_dir(live_soc.rt)
    with Soc() as soc:
        deploy(soc, RULES, live_soc.rt, "rules")
        session = trace.start(directory)
        trace.wait_started(session["dir"], 6, expect={"relay": 1, "core": 2, "firmware": 2})
        src, dst = soc.mem.alloc_cached(10 * 1024), soc.mem.alloc_cached(10 * 1024)
        try:
            data = np.random.default_rng(3).integers(0, 256, 10 * 1024, dtype=np.uint8)
            src.array()[:] = data
            src.flush(CLEAN)
            with pytest.raises(errors.KernelMemoryFault) as exc:      # the segment is 3 pages: 12288 bytes
                soc.call(SCRIBBLE, [src], [dst], {"where": "output", "offset": 12288}, core=CORE_1, timeout_ms=30000)
            assert exc.value.code == -6000274
            assert exc.value.message == ("kernel scribble_kernel: wrote output 0 at +12288, past its end (a buffer "
                                         "of 10240 bytes)")
            with pytest.raises(errors.KernelMemoryFault, match="wrote input 0 at [+]5 [(]a buffer of 10240 bytes[)]: "
                                                               "inputs are read-only"):
                soc.call(SCRIBBLE, [src], [dst], {"where": "input", "offset": 5}, core=CORE_1, timeout_ms=30000)
            for pong_bank in (1, 0):
                soc.call(PINGPONG, [src], [dst], {"pong_bank": pong_bank}, core=CORE_1, timeout_ms=30000,
                         custom_id=700 + pong_bank)
                dst.flush(INVALIDATE)
                np.testing.assert_array_equal(dst.array()[:data.size], data)
            time.sleep(0.4)     # the firmware writes its events when it next looks at the switch
        finally:
            src.free()
            dst.free()
            trace.stop(directory)
            tracing.sdk_tracer().poll(force=True)      # this process's own file ends now (as Soc(trace=) does)
    trace.wait_ended(session["dir"], 5)
    events = tracefmt.merge(session["dir"], None, session)["traceEvents"]
    conflicts = [e for e in events if e.get("cat") == "bank_conflict"]
    assert len(conflicts) == 1, conflicts
    assert conflicts[0]["args"]["count"] == 10 and conflicts[0]["args"]["kernel"] == "pingpong_kernel"
    assert conflicts[0]["args"]["first"].startswith("TCM bank 0: IDMA transfer 2 moves pong while the kernel "
                                                    "computes on ping")
    runs = {e["args"]["custom_id"]: e for e in events if e.get("cat") == "firmware" and e["args"].get("custom_id")}
    task = runs[700]     # the conflict lies inside the run of its task, on the same thread
    assert task["ts"] <= conflicts[0]["ts"] <= task["ts"] + task["dur"] and task["tid"] == conflicts[0]["tid"]
    log = (live_soc.rt / "log" / "vdsp1.log").read_text()
    assert "kernel pingpong_kernel: 10 TCM bank conflicts (ping-pong buffers in one bank)" in log
    assert "crash detected" not in (live_soc.rt / "dmesg").read_text()     # faults were errors, not crashes


def test_an_asan_image_stops_at_a_heap_overflow_and_the_soc_serves_on(live_soc):
    with Soc() as soc:
        deploy(soc, RULES, live_soc.rt, "rules-asan", sanitize="address")
        soc.call(HEAP, params={"index": 15}, core=CORE_1, timeout_ms=60000)            # inside the block: runs
        with pytest.raises(errors.CoreCrashed) as exc:
            soc.call(HEAP, params={"index": 16}, core=CORE_1, timeout_ms=60000)
        assert ("crash: AddressSanitizer report: AddressSanitizer: heap-buffer-overflow in kernel heap_kernel in "
                "operator heap_overflow") in exc.value.message, exc.value.message
        assert soc.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}        # the other core serves
        assert wait_until(lambda: soc.control("vdsp1", "state") == "running", 60, 0.1)
        soc.call(HEAP, params={"index": 0}, core=CORE_1, timeout_ms=60000)             # recovered, still ASan
    log = (live_soc.rt / "log" / "vdsp1.log").read_text()
    assert "ERROR: AddressSanitizer: heap-buffer-overflow" in log, log[-3000:]
    assert re.search(r"in heap_kernel .*rules\.c:\d+", log), log[-3000:]
    assert "vdsp: kernel heap_kernel: AddressSanitizer stopped it (the report above): the firmware exits" in log
    assert "crash detected in vdsp1: type AddressSanitizer report" in (live_soc.rt / "dmesg").read_text()

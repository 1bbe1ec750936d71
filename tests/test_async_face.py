"""The asyncio face matches the blocking one (live SoC): ``await soc.rpc(...)`` returns what
``task.wait()`` returns, ``timeout_ms`` works there and in ``await soc.wait(task, ms)``, and the
cv / nn helpers given an AsyncSoc return awaitables that never block the event loop (a ticker
coroutine keeps ticking while they run)."""
from __future__ import annotations

import asyncio
import time

import cv2
import numpy as np
import pytest

from arm_side import CORE_0, CORE_1, AsyncSoc, Soc, cv, errors, nn, opids
from arm_side.aio import AsyncTask
from arm_side.nn import reference as ref
from tests.test_nn_yolo import TOL, make_maps, make_params

pytestmark = pytest.mark.live


def run(coro):
    return asyncio.run(coro)


class Ticker:
    """Counts 5 ms ticks of the event loop and the longest gap between two of them."""

    def __init__(self) -> None:
        self.ticks, self.max_gap, self._stop = 0, 0.0, False

    async def run(self) -> None:
        last = time.perf_counter()
        while not self._stop:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            self.max_gap, last = max(self.max_gap, now - last), now
            self.ticks += 1

    def stop(self) -> None:
        self._stop = True


def test_await_rpc_returns_what_wait_returns(shared_soc):
    async def main():
        async with AsyncSoc() as asoc:
            buf = asoc.mem.alloc(4096)
            with Soc() as soc:
                sync_fill = soc.rpc(opids.FILL, outputs=[soc.mem.alloc(4096)], params={"value": 5}).wait(5000)
                sync_ping = soc.rpc(opids.PING, core=CORE_1).wait(5000)
            assert await asoc.rpc(opids.FILL, outputs=[buf], params={"value": 5}) == sync_fill == {"bytes": 4096}
            assert (buf.array() == 5).all()
            assert await asoc.rpc(opids.PING, core=CORE_1, timeout_ms=5000) == sync_ping == {"core": "vdsp1"}
            task = asoc.soc.rpc(opids.PING, core=CORE_0)      # a plain Task, awaited: its values too
            assert await task == task.wait(0) == {"core": "vdsp0"}
            assert await asoc.call(opids.PING, core=CORE_0) == {"core": "vdsp0"}
            assert await asoc.batch(opids.PING, [{}, {}]) == [{"core": "vdsp0"}, {"core": "vdsp1"}]
            with pytest.raises(errors.UnknownOperator):
                await asoc.rpc(0x13FF)
    run(main())


@pytest.mark.exclusive     # it measures time: no other test of a parallel run beside it
def test_timeouts_raise_task_timeout_and_the_task_stays_collectable(shared_soc):
    async def main():
        async with AsyncSoc() as asoc:
            task = asoc.rpc(opids.SLEEP, params={"ms": 400}, core=CORE_0, timeout_ms=50)
            assert isinstance(task, AsyncTask)
            t0 = time.perf_counter()
            with pytest.raises(errors.TaskTimeout):
                await task
            assert time.perf_counter() - t0 < 0.35
            with pytest.raises(errors.TaskTimeout):
                await asoc.wait(task, timeout_ms=20)
            assert await asoc.wait(task, timeout_ms=5000) == {"slept_ms": 400.0}   # collected afterwards
            assert task.done() and task.core == "vdsp0"
            # the same with the blocking call, for comparison: same exception class, same values after
            with Soc() as soc:
                t = soc.rpc(opids.SLEEP, params={"ms": 300}, core=CORE_1)
                with pytest.raises(errors.TaskTimeout):
                    t.wait(20)
                assert t.wait(5000) == {"slept_ms": 300.0}
            # released: awaiting says so, as wait() does
            gone = asoc.rpc(opids.SLEEP, params={"ms": 300}, core=CORE_1)
            await gone.release()
            with pytest.raises(errors.InvalidTaskHandle):
                await gone
    run(main())


@pytest.mark.exclusive     # it measures time: no other test of a parallel run beside it
def test_cv_helpers_are_awaitable_and_never_block_the_loop(shared_soc):
    rng = np.random.default_rng(3)
    big = rng.integers(0, 256, (1080, 1920), dtype=np.uint8)
    small = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)

    async def main():
        async with AsyncSoc() as asoc:
            ticker = Ticker()
            ticking = asyncio.create_task(ticker.run())
            t0 = time.perf_counter()
            blurred, (level, binary), resized, sleep = await asyncio.gather(
                cv.gaussian_blur(asoc, big, ksize=5, sigma_x=1.5, border=cv2.BORDER_REPLICATE),
                cv.threshold(asoc, big, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU),
                cv.resize(asoc, small, (32, 24), interpolation=cv2.INTER_AREA),
                asoc.rpc(opids.SLEEP, params={"ms": 600}, core=CORE_1))
            elapsed = time.perf_counter() - t0
            # buffer-level form, awaited
            src = cv.write_image(asoc.soc, small, "BGR")
            dst = cv.alloc_image(asoc.soc, "BGR", 64, 48)
            assert await cv.flip(asoc, src, dst, flip_code=-1) == {}
            flipped = cv.read_image(dst)
            ticker.stop()
            await ticking
            return ticker, elapsed, blurred, level, binary, resized, sleep, flipped

    ticker, elapsed, blurred, level, binary, resized, sleep, flipped = run(main())
    np.testing.assert_array_equal(blurred, cv2.GaussianBlur(big, (5, 5), 1.5, borderType=cv2.BORDER_REPLICATE))
    want_level, want_binary = cv2.threshold(big, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
    assert level == want_level
    np.testing.assert_array_equal(binary, want_binary)
    np.testing.assert_array_equal(resized, cv2.resize(small, (32, 24), interpolation=cv2.INTER_AREA))
    np.testing.assert_array_equal(flipped, cv2.flip(small, -1))
    assert sleep == {"slept_ms": 600.0}
    assert elapsed >= 0.6
    # the loop kept running: a blocked loop shows one gap as long as the work (>= 600 ms)
    assert ticker.max_gap < 0.25, ticker.max_gap
    assert ticker.ticks >= 0.6 / 0.25


@pytest.mark.exclusive     # it measures time: no other test of a parallel run beside it
def test_cv_timeouts_in_async_form_cancel_or_free(shared_soc):
    big = np.random.default_rng(4).integers(0, 256, (1080, 1920), dtype=np.uint8)

    async def main():
        async with AsyncSoc() as asoc:
            pool = asoc.mem.pool
            # queued behind a sleep on the same core: released before it runs, buffers reused
            blocker = asoc.rpc(opids.SLEEP, params={"ms": 500}, core=CORE_0)
            with pytest.raises(errors.TaskTimeout):
                await cv.median_blur(asoc, big, 5, core=CORE_0, timeout_ms=50)
            assert pool.idle() == pool.allocated == 2
            await blocker
            # running when the wait times out (about 2 s of work, started well within 300 ms):
            # the DSP may still write, so its buffers are freed
            with pytest.raises(errors.TaskTimeout):
                await cv.bilateral_filter(asoc, big, 31, 80, 80, core=CORE_1, timeout_ms=300)
            assert pool.allocated == 2 and pool.idle() == 0     # it took both idle buffers: freed
            out = await cv.median_blur(asoc, big, 5, core=CORE_0)
            np.testing.assert_array_equal(out, cv2.medianBlur(big, 5))
            with pytest.raises(errors.InvalidArgument, match="'ksize'"):
                await cv.median_blur(asoc, big, 4)      # refused by the DSP: the buffers come back
            assert pool.allocated == 4 and pool.idle() == 2
    run(main())


def test_nn_helpers_are_awaitable(shared_soc):
    DT = nn.DataType
    p = make_params()
    batch = 2
    maps = make_maps(p, batch, seed=5)

    async def main():
        async with AsyncSoc() as asoc:
            shape = (1, 8, 4, 6)
            x = (np.random.default_rng(1).standard_normal(shape) * 3).astype(np.float32)
            q = nn.Quantization.scale_(0.05)
            f_props, s_props = nn.dense(shape, DT.F32, nn.Layout.NCHW), nn.dense(shape, DT.S8, nn.Layout.NCHW, q)
            src, dst = asoc.mem.alloc(f_props.aligned_byte_size), asoc.mem.alloc(s_props.aligned_byte_size)
            nn.write(src, f_props, x)
            ticker = Ticker()
            ticking = asyncio.create_task(ticker.run())
            values = await nn.quantize(asoc, nn.Tensor(src, f_props), nn.Tensor(dst, s_props), timeout_ms=10000)
            quantized = nn.read(dst, s_props)
            mems = []
            for m, arr in enumerate(maps):
                mem = asoc.mem.alloc(p.map_bytes(m, batch))
                mem.write(arr.tobytes())
                mems.append(mem)
            out = asoc.mem.alloc(p.output_bytes(batch))
            det = await nn.detection_output(asoc, mems, out, p, batch)
            got = nn.parse_output(out.array(np.float32), batch, p.max_box_num)
            out_chain = asoc.mem.alloc(p.output_bytes(batch))
            with nn.Chain(asoc, p, batch, capacity=1024) as chain:
                chained = await chain.run(mems, out_chain)
            np.testing.assert_array_equal(out_chain.array(np.float32), out.array(np.float32))
            ticker.stop()
            await ticking
            return values, quantized, x, q, det, got, chained

    values, quantized, x, q, det, got, chained = run(main())
    assert chained.counts == det.counts and len(chained.cores) == 4
    assert values["elements"] == x.size
    np.testing.assert_array_equal(quantized, ref.quantize(x, q, np.int8))
    expect = ref.yolov3_detection_output(maps, p, batch)
    assert sorted(det.cores) == ["vdsp0", "vdsp1"]
    assert det.counts == [len(e) for e in expect]
    for g, e in zip(got, expect):
        np.testing.assert_array_equal(g[:, :2], e[:, :2])
        np.testing.assert_allclose(g[:, 2:], e[:, 2:], atol=TOL)


def test_an_unopened_async_soc_says_so():
    with pytest.raises(errors.ApiUseError, match="not open"):
        AsyncSoc().rpc(opids.PING)

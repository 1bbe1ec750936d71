#!/usr/bin/env python3
"""CV operator benchmark: every CV operator on a 1920x1080 image, OpenCV in-process vs the
same operator by RPC on the DSP, with the no-op (PING) task latency from the same run.

Target per operator: RPC time - in-process time <= 1.3 x the no-op latency, i.e. the RPC
adds only the task's round trip: pixels are never copied on their way (handles cross the
sockets; the DSP computes straight into the destination's shared memory).

The measurements are interleaved in rounds (ping, then each operator in-process and by
RPC alternately) so background load hits all alike; each figure is a median in µs.

The same run also times each operator through the *floor* (``floor.py``): the same process
topology, ARM process -> relay process -> worker process over ZeroMQ ipc, with nothing of
vdsp-sim in it; the worker calls the very in-process callable. Its ``rpc - in-process`` over
its own no-op shows what any implementation of this topology gets on the machine.

Usage::

    .venv/bin/vdsp bench cv [--rounds 3] [--n 5] [--only gaussianBlur,resize] [--json FILE]

Exit status 0 when the run completes, 3 with ``--fail-on-miss`` if an operator misses the target.
"""
from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import time

import cv2
import numpy as np

from arm_side import CORE_0, Soc, cv, opids  # noqa: E402
from vdsp_sim.samples import cv_inputs  # noqa: E402
from vdsp_sim.benchmarks.awake import cpus_kept_awake  # noqa: E402
from vdsp_sim.soc.private_soc import fresh_runtime_dir, private_soc  # noqa: E402
from vdsp_sim.benchmarks.floor import Floor  # noqa: E402
from vdsp_sim.benchmarks.report import Report  # noqa: E402
from vdsp_board.config import clihelp, settings  # noqa: E402
from dsp_side.heap import keep_heap  # noqa: E402

W, H = 1920, 1080


def cases(bgr: np.ndarray):
    """name -> (src format, src pixels, dst format, dst (w, h), rpc(soc, src, dst), in-process(pixels))."""
    gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    rgb = bgr[..., ::-1].copy()
    nv12 = cv_inputs.nv12_from_bgr(bgr)
    y, uv = nv12[:H], nv12[H:].reshape(H // 2, W // 2, 2)
    rot = cv2.getRotationMatrix2D((W / 2, H / 2), 20, 0.9)
    persp = cv2.getPerspectiveTransform(np.array([[0, 0], [W, 0], [W, H], [0, H]], np.float32),
                                        np.array([[50, 20], [W - 80, 0], [W, H], [0, H - 60]], np.float32))
    k5 = np.array([[1, 2, 3, 2, 1]] * 5, np.float32) / 45
    emboss = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]], np.float32)
    ell = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5))
    gy, gx = np.mgrid[0:H, 0:W].astype(np.float32)
    mx, my = (gx + 6 * np.sin(gy / 20)).astype(np.float32), (gy + 6 * np.sin(gx / 30)).astype(np.float32)
    both = lambda f: (f(y), f(uv))     # noqa: E731 - NV12 in-process: the same per-plane calls
    gamma = np.array([round(255 * (v / 255) ** 0.5) for v in range(256)], np.uint8)
    return {
        "bilateralFilter": ("Y", gray, "Y", (W, H), lambda s, a, b: cv.bilateral_filter(s, a, b, 5, 30, 5),
                            lambda: cv2.bilateralFilter(gray, 5, 30, 5)),
        "boxFilter": ("Y", gray, "Y", (W, H), lambda s, a, b: cv.box_filter(s, a, b, (5, 5)),
                      lambda: cv2.boxFilter(gray, -1, (5, 5))),
        "canny": ("Y", gray, "Y", (W, H), lambda s, a, b: cv.canny(s, a, b, 60, 160), lambda: cv2.Canny(gray, 60, 160)),
        "cvtColor RGB2GRAY": ("RGB", rgb, "Y", (W, H), lambda s, a, b: cv.cvt_color(s, a, b, "RGB2GRAY"),
                              lambda: cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)),
        "cvtColor RGB2NV12": ("RGB", rgb, "NV12", (W, H), lambda s, a, b: cv.cvt_color(s, a, b, "RGB2NV12"),
                              lambda: _encode(rgb)),
        "dilate": ("Y", gray, "Y", (W, H), lambda s, a, b: cv.dilate(s, a, b, (5, 5), "ellipse"),
                   lambda: cv2.dilate(gray, ell)),
        "equalizeHist": ("Y", gray, "Y", (W, H), cv.equalize_hist, lambda: cv2.equalizeHist(gray)),
        "erode": ("Y", gray, "Y", (W, H), lambda s, a, b: cv.erode(s, a, b, (5, 5), "ellipse"),
                  lambda: cv2.erode(gray, ell)),
        "filter2D": ("Y", gray, "Y", (W, H), lambda s, a, b: cv.filter2d(s, a, b, emboss),
                     lambda: cv2.filter2D(gray, -1, emboss)),
        "flip": ("NV12", nv12, "NV12", (W, H), lambda s, a, b: cv.flip(s, a, b, 1),
                 lambda: both(lambda p: cv2.flip(p, 1))),
        "gaussianBlur": ("Y", gray, "Y", (W, H), lambda s, a, b: cv.gaussian_blur(s, a, b, (5, 5), 1.2),
                         lambda: cv2.GaussianBlur(gray, (5, 5), 1.2)),
        "integral": ("Y", gray, "S32", (W + 1, H + 1), cv.integral, lambda: cv2.integral(gray)),
        "medianBlur": ("Y", gray, "Y", (W, H), lambda s, a, b: cv.median_blur(s, a, b, 5),
                       lambda: cv2.medianBlur(gray, 5)),
        "pyrDown": ("NV12", nv12, "NV12", (W // 2, H // 2), cv.pyr_down, lambda: both(cv2.pyrDown)),
        "pyrUp": ("NV12", nv12, "NV12", (W * 2, H * 2), cv.pyr_up, lambda: both(cv2.pyrUp)),
        "resize": ("NV12", nv12, "NV12", (1280, 720), cv.resize,
                   lambda: (cv2.resize(y, (1280, 720)), cv2.resize(uv, (640, 360)))),
        "roiResize": ("NV12", nv12, "NV12", (640, 640),
                      lambda s, a, b: cv.roi_resize(s, a, b, (400, 200, 1399, 999), keep_aspect=True),
                      lambda: (cv2.resize(y[200:1000, 400:1400], (640, 512)),
                               cv2.resize(uv[100:500, 200:700], (320, 256)))),
        "rotate": ("NV12", nv12, "NV12", (H, W), lambda s, a, b: cv.rotate(s, a, b, "90cw"),
                   lambda: both(lambda p: cv2.rotate(p, cv2.ROTATE_90_CLOCKWISE))),
        "sepFilter2D": ("Y", gray, "S16", (W, H), lambda s, a, b: cv.sep_filter2d(s, a, b, k5[0], [-1, 0, 1]),
                        lambda: cv2.sepFilter2D(gray, cv2.CV_16S, k5[0], np.array([-1, 0, 1], np.float32))),
        "sobel": ("Y", gray, "S16", (W, H), lambda s, a, b: cv.sobel(s, a, b, 1, 0, 3),
                  lambda: cv2.Sobel(gray, cv2.CV_16S, 1, 0)),
        "threshold": ("Y", gray, "Y", (W, H), lambda s, a, b: cv.threshold(s, a, b, 128, 255),
                      lambda: cv2.threshold(gray, 128, 255, cv2.THRESH_BINARY)),
        "transpose": ("NV12", nv12, "NV12", (H, W), cv.transpose, lambda: both(cv2.transpose)),
        "warpAffine": ("Y", gray, "Y", (W, H), lambda s, a, b: cv.warp_affine(s, a, b, rot),
                       lambda: cv2.warpAffine(gray, rot, (W, H))),
        "warpPerspective": ("Y", gray, "Y", (W, H), lambda s, a, b: cv.warp_perspective(s, a, b, persp),
                            lambda: cv2.warpPerspective(gray, persp, (W, H))),
        "cornerHarris": ("Y", gray, "F32", (W, H), lambda s, a, b: cv.corner_harris(s, a, b, 2, 3, 0.04),
                         lambda: cv2.cornerHarris(gray, 2, 3, 0.04)),
        "remap": ("Y", gray, "Y", (W, H), None, lambda: cv2.remap(gray, mx, my, cv2.INTER_LINEAR)),
        "LUT": ("Y", gray, "Y", (W, H), lambda s, a, b: cv.lut(s, a, b, gamma), lambda: cv2.LUT(gray, gamma)),
    }, (mx, my)


def floor_kernels() -> dict:
    """The in-process callables of every operator, for the floor's worker process."""
    table, _ = cases(cv_inputs.scene(W, H, seed=11))
    return {name: case[5] for name, case in table.items()}


def _encode(rgb):
    from dsp_side.operators.cv.color import encode_nv12
    out_y, out_uv = np.empty((H, W), np.uint8), np.empty((H // 2, W // 2, 2), np.uint8)
    encode_nv12(rgb, out_y, out_uv)


class _Pinned:
    """A Soc whose tasks all go to CORE_0 and which remembers the last task (for exec_us)."""

    def __init__(self, soc) -> None:
        self.soc, self.mem, self.last = soc, soc.mem, None

    def rpc(self, *a, **kw):
        kw["core"] = CORE_0
        self.last = self.soc.rpc(*a, **kw)
        return self.last


def _us(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="vdsp bench cv", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    ap.add_argument("--n", type=int, default=5, help="timed calls per operator and round, each way")
    ap.add_argument("--ping-n", type=int, default=200, help="no-op (PING) samples per round, back to back")
    ap.add_argument("--only", default="", help="comma-separated operator names")
    ap.add_argument("--json", default="", metavar="FILE", help="write every figure to FILE (schema vdsp-bench/1)")
    ap.add_argument("--fail-on-miss", action="store_true",
                    help="the CI mode: exit 3 when an operator misses the target (else 0 once the run completes)")
    ap.add_argument("--no-floor", action="store_true", help="skip the raw-pyzmq floor (see floor.py)")
    ap.add_argument("--keep-cpus-awake", action="store_true",
                    help="one SCHED_IDLE spinner per CPU while measuring (see vdsp_sim/benchmarks/awake.py)")
    args = clihelp.finish(ap).parse_args(argv)
    keep_heap()     # the in-process figures at their best, as the firmware's (dsp_side/heap.py)
    rt = fresh_runtime_dir("vb")
    print(f"starting a SoC in {rt} ...", file=sys.stderr)
    try:
        with private_soc(runtime_dir=rt, mode=settings.current().raw("VDSP_RPC_MODE"), strict_cache=None), Soc() as soc, \
                contextlib.ExitStack() as stack:
            floor = None if args.no_floor else stack.enter_context(Floor("vdsp_sim.benchmarks.bench_cv:floor_kernels"))
            stack.enter_context(cpus_kept_awake(args.keep_cpus_awake))
            return _run(_Pinned(soc), floor, args)
    finally:
        shutil.rmtree(rt, ignore_errors=True)


def _run(soc, floor, args) -> int:
    table, (mx, my) = cases(cv_inputs.scene(W, H, seed=11))
    names = [n for n in table if not args.only or n in args.only.split(",")]
    images = {}
    for name in names:
        sfmt, pixels, dfmt, (dw, dh), call, _ = table[name]
        src = cv.write_image(soc, pixels, sfmt)
        dst = cv.alloc_image(soc, dfmt, dw, dh)
        if name == "remap":
            maps = cv.write_image(soc, mx, "F32"), cv.write_image(soc, my, "F32")
            call = lambda s, a, b, m=maps: cv.remap(s, a, m[0], m[1], b)   # noqa: E731
        images[name] = (src, dst, call)
    ping: list[float] = []
    floor_ping: list[float] = []
    inproc: dict[str, list[float]] = {n: [] for n in names}
    rpc: dict[str, list[float]] = {n: [] for n in names}
    dsp: dict[str, list[float]] = {n: [] for n in names}
    floor_rpc: dict[str, list[float]] = {n: [] for n in names}
    floor_exec: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
        for _ in range(10):
            soc.soc.call(opids.PING, core=CORE_0)
        ping += [_us(lambda: soc.soc.call(opids.PING, core=CORE_0)) for _ in range(args.ping_n)]
        if floor:
            floor_ping += [floor.call("") for _ in range(args.ping_n)]
        for name in names:
            src, dst, call = images[name]
            local = table[name][5]
            local()
            call(soc, src, dst)           # warm-up both
            for _ in range(args.n):
                inproc[name].append(_us(local))
                rpc[name].append(_us(lambda: call(soc, src, dst)))
                dsp[name].append(soc.last.exec_us)
                if floor:
                    floor_rpc[name].append(floor.call(name))
                    floor_exec[name].append(floor.last_exec_us)
    med = statistics.median
    noop = med(ping)
    fnoop = med(floor_ping) if floor else 0.0
    rows, table_rows, floor_misses = [], [], 0
    rep = Report("cv", args)
    rep.note(f"CV operators on {W}x{H}, {args.rounds} interleaved round(s), medians in µs; no-op task (PING, relay, "
             f"CORE_0) {noop:.0f} µs; target: rpc - in-process <= 1.3 x no-op = {1.3 * noop:.0f} µs")
    if floor:
        rep.note(f"floor (raw pyzmq, same topology, the in-process callable in a worker process): "
                 f"no-op {fnoop:.0f} µs")
    for name in names:
        a, b, e = med(inproc[name]), med(rpc[name]), med(dsp[name])
        row = {"op": name, "inproc_us": a, "rpc_us": b, "dsp_exec_us": e, "overhead_us": b - a,
               "ratio": (b - a) / noop, "pass": b - a <= 1.3 * noop}
        cells = [name, a, b, e, b - a, (b - a) / noop]
        if floor:
            f = med(floor_rpc[name])
            fe = med(floor_exec[name])
            row.update(floor_rpc_us=f, floor_exec_us=fe, floor_overhead_us=f - a, floor_ratio=(f - a) / fnoop)
            floor_misses += f - a > 1.3 * fnoop
            cells += [fe, f - a, (f - a) / fnoop]
        rows.append(row)
        table_rows.append(cells)
    rep.table("CV operators (medians, µs)", ["operator", "in-process", "rpc", "dsp exec", "rpc - in-process",
                                            "/ no-op"] + (["floor worker exec", "floor rpc - in-process",
                                                           "floor / floor no-op"] if floor else []), table_rows)
    for row in rows:
        rep.target(f"{row['op']}: (rpc - in-process) / no-op", row["ratio"], "<=", 1.3)
    if floor:
        rep.note(f"through the floor, {floor_misses} of {len(names)} operators miss the same target")
    return rep.finish(args.json, args.fail_on_miss, details={"noop_us": noop, "floor_noop_us": fnoop, "rows": rows})


if __name__ == "__main__":
    from vdsp_board.processes import proc
    proc.exit_on_sigterm()      # a SIGTERM (timeout, kill) still stops the SoCs it started
    sys.exit(main())

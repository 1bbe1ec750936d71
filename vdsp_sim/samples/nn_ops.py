"""``vdsp sample nn quantize|dequantize|softmax|layout|yolov3``: one NN operator against the SoC,
checked against the reference like the J5 NN sample ("check result right" or the first mismatch).

Why Rockchip names in a Horizon simulator: NC1HWC2, the blocked layout of ``layout``, is
RKNPU's native layout, and its block width C2 depends on the NPU generation. The J5 BPU has
no such table, so ``--platform`` takes the RKNN platform names that define C2 (int8: 8 on
RK3566/RK3568, 16 on RK3588, ...; docs/nn.md)."""
from __future__ import annotations

import argparse
import logging
import time

import numpy as np

from arm_side import CORE_0, CORE_1, Soc
from arm_side import nn
from arm_side.nn import reference as ref
from vdsp_sim.samples.common import sample_soc, setup_logging
from vdsp_board.config import clihelp
from vdsp_board.processes import proc

log = logging.getLogger("vdsp.sample.nn")
DT = nn.DataType


def _check(got: np.ndarray, expect: np.ndarray, atol: float = 0.0) -> bool:
    """Log ``check result right`` or the first mismatching element."""
    bad = ~np.isclose(got, expect, rtol=0, atol=atol) if atol else got != expect
    if not bad.any():
        log.info("check result right")
        return True
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    log.error("check result WRONG: first mismatch at %s: got %s, expected %s (%d mismatches)", idx, got[idx],
              expect[idx], int(bad.sum()))
    return False


def _rpc(name: str, submit) -> dict:
    """Submit (``submit()`` returns the Task), wait, log the timings."""
    log.info("rpc begin")
    t0 = time.perf_counter()
    task = submit()
    values = task.wait(30000)
    log.info("rpc finish: %s on %s, %.3f ms (dsp %.3f ms)", name, task.core, (time.perf_counter() - t0) * 1e3,
             task.exec_us / 1e3)
    return values


def run_quantize(soc: Soc, args) -> bool:
    """1x64x56x56 float feature map -> int8 NCHW with W padded to 16 bytes (the BPU guide's example)."""
    shape = (1, 64, 56, 56)
    x = (np.random.default_rng(0).standard_normal(shape) * 2).astype(np.float32)
    q = nn.Quantization.scale_(0.0213)
    src_p, dst_p = nn.dense(shape, DT.F32, nn.Layout.NCHW), nn.aligned(shape, DT.S8, nn.Layout.NCHW, quant=q)
    log.info("input %s F32, output S8 aligned %s stride %s", list(shape), list(dst_p.aligned_shape), list(dst_p.stride))
    with soc.mem.alloc_cached(src_p.aligned_byte_size) as src, soc.mem.alloc_cached(dst_p.aligned_byte_size) as dst:
        nn.write(src, src_p, x)
        _rpc("quantize", lambda: nn.quantize(soc, nn.Tensor(src, src_p), nn.Tensor(dst, dst_p)))
        return _check(nn.read(dst, dst_p), ref.quantize(x, q, np.int8))


def run_dequantize(soc: Soc, args) -> bool:
    """per-axis (axis 1) U8 NHWC with C padded to 16 bytes -> float32."""
    shape = (1, 8, 8, 3)
    qv = np.random.default_rng(1).integers(0, 256, shape).astype(np.uint8)
    q = nn.Quantization.scale_([0.5, 0.02, 0.1], [128, 0, 255], axis=3)
    src_p, dst_p = nn.aligned(shape, DT.U8, nn.Layout.NHWC, quant=q), nn.dense(shape, DT.F32, nn.Layout.NHWC)
    with soc.mem.alloc_cached(src_p.aligned_byte_size) as src, soc.mem.alloc_cached(dst_p.aligned_byte_size) as dst:
        nn.write(src, src_p, qv)
        _rpc("dequantize", lambda: nn.dequantize(soc, nn.Tensor(src, src_p), nn.Tensor(dst, dst_p)))
        return _check(nn.read(dst, dst_p), ref.dequantize(qv, q))


#: the softmax sample's classes that stand out, strongest first, and their int8 logits (the rest
#: are noise well below them): the top 5 is known before the DSP runs
SOFTMAX_TOP5 = ((17, 127), (404, 118), (761, 109), (230, 100), (958, 91))   # not the J5 log's ids


def run_softmax(soc: Soc, args) -> bool:
    """1000 int8 logits (scale 1/16, zero point -3), five classes standing out of the noise,
    dequantised then softmax on the DSP; the TOP-5 must be those five, in order, and the
    probabilities equal the float64 reference's."""
    qv = np.random.default_rng(2).integers(-128, 48, (1, 1000)).astype(np.int8)
    for idx, logit in SOFTMAX_TOP5:
        qv[0, idx] = logit
    q = nn.Quantization.scale_(0.0625, -3)
    src_p, dst_p = nn.dense(qv.shape, DT.S8, quant=q), nn.dense(qv.shape, DT.F32)
    with soc.mem.alloc(src_p.aligned_byte_size) as src, soc.mem.alloc(dst_p.aligned_byte_size) as dst:
        nn.write(src, src_p, qv)
        _rpc("softmax", lambda: nn.softmax(soc, nn.Tensor(src, src_p), nn.Tensor(dst, dst_p), axis=-1))
        got = nn.read(dst, dst_p)
        top5 = [int(i) for i in np.argsort(-got[0], kind="stable")[:5]]
        for rank, idx in enumerate(top5):
            log.info("TOP %d result id: %d prob %.5f", rank, idx, got[0, idx])
        if top5 != [idx for idx, _ in SOFTMAX_TOP5]:
            log.error("check result WRONG: TOP-5 ids %s, expected %s", top5, [idx for idx, _ in SOFTMAX_TOP5])
            return False
        return _check(got, ref.softmax(ref.dequantize(qv, q)).astype(np.float32), atol=1e-6)


def run_layout(soc: Soc, args) -> bool:
    """int8 NCHW (1, 13, 4, 4) -> NC1HWC2 on the chosen platform and back to NHWC."""
    x = np.random.default_rng(3).integers(-128, 128, (1, 13, 4, 4)).astype(np.int8)
    nchw, blocked = nn.dense(x.shape, DT.S8, nn.Layout.NCHW), nn.nc1hwc2(1, 13, 4, 4, DT.S8, args.platform)
    nhwc = nn.aligned((1, 4, 4, 13), DT.S8, nn.Layout.NHWC)
    log.info("platform %s (RKNPU's C2 table: NC1HWC2 is Rockchip's layout, the J5 BPU has none): C2 = %d, "
             "NC1HWC2 shape %s", args.platform, blocked.valid_shape[-1], list(blocked.valid_shape))
    with soc.mem.alloc(nchw.aligned_byte_size) as a, soc.mem.alloc(blocked.aligned_byte_size) as b, \
            soc.mem.alloc(nhwc.aligned_byte_size) as c:
        nn.write(a, nchw, x)
        _rpc("layout NCHW->NC1HWC2", lambda: nn.convert_layout(soc, nn.Tensor(a, nchw), nn.Tensor(b, blocked),
                                                                platform=args.platform))
        ok = _check(nn.read(b, blocked), ref.nchw_to_nc1hwc2(x, blocked.valid_shape[-1]))
        _rpc("layout NC1HWC2->NHWC", lambda: nn.convert_layout(soc, nn.Tensor(b, blocked), nn.Tensor(c, nhwc)))
        return _check(nn.read(c, nhwc), x.transpose(0, 2, 3, 1)) and ok


def run_yolo(soc: Soc, args) -> bool:
    """Yolov3DetectionOutput on 416x416, 80 classes, 3 maps; the batch split over both cores."""
    p = nn.YoloParams(class_num=80, anchor_num=3, map_w=(13, 26, 52), map_h=(13, 26, 52), net_w=416, net_h=416,
                      biases=(116, 90, 156, 198, 373, 326, 30, 61, 62, 45, 59, 119, 10, 13, 16, 30, 33, 23),
                      max_box_num=100, confidence_thresh=0.5, nms_thresh=0.45)
    rng = np.random.default_rng(4)
    maps = []
    for w, h in zip(p.map_w, p.map_h):
        x = rng.standard_normal((args.batch, 3, 85, w * h)).astype(np.float32)
        x[:, :, 4] -= 2.5     # most cells hold no object
        maps.append(x)
    mems = [soc.mem.alloc(p.map_bytes(m, args.batch)) for m in range(3)]
    out = soc.mem.alloc(p.output_bytes(args.batch))
    try:
        for mem, x in zip(mems, maps):
            mem.write(x.tobytes())
        log.info("rpc begin: batch %d over vdsp0 + vdsp1", args.batch)
        t0 = time.perf_counter()
        det = nn.detection_output(soc, mems, out, p, args.batch, cores=(CORE_0, CORE_1))
        log.info("rpc finish: %.3f ms, tasks on %s, dsp %s us", (time.perf_counter() - t0) * 1e3, det.cores,
                 det.exec_us)
        got = nn.parse_output(out.array(np.float32), args.batch, p.max_box_num)
        expect = ref.yolov3_detection_output(maps, p, args.batch)
        log.info("boxes per batch: %s (reference %s)", det.counts, [len(e) for e in expect])
        ok = all(g.shape == e.shape and _check(g, e.astype(np.float32), atol=2e-5) for g, e in zip(got, expect))
        if not ok:
            log.error("check result WRONG: box counts %s, expected %s", det.counts, [len(e) for e in expect])
        return ok
    finally:
        for mem in (*mems, out):
            mem.free()


RUNNERS = {"quantize": run_quantize, "dequantize": run_dequantize, "softmax": run_softmax, "layout": run_layout,
           "yolov3": run_yolo}
PLATFORM_HELP = ("the NC1HWC2 block width C2 of which NPU (layout): NC1HWC2 is Rockchip RKNPU's native layout "
                 "and C2 depends on the NPU, so the names are RKNN's platforms (the J5 BPU has no C2 table); "
                 "int8 C2 is 8 on RK3566/RK3568, 16 on RK3588")


def main(argv: list[str] | None = None) -> int:
    argv = list(argv or ["quantize"])
    name = argv[0]
    ap = argparse.ArgumentParser(prog=f"vdsp sample nn {name}", description=RUNNERS.get(name, run_quantize).__doc__,
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--platform", default="RK3568", choices=sorted(nn.C2_TABLE), help=PLATFORM_HELP)
    ap.add_argument("--batch", type=int, default=4, help="batch size (yolov3)")
    args = clihelp.finish(ap).parse_args(argv[1:])
    if name not in RUNNERS:
        print(f"vdsp sample nn: {name!r} is not one of {sorted(RUNNERS)}")
        return 2
    setup_logging()
    proc.exit_on_sigterm()
    log.info("%s begin", name)
    with sample_soc() as soc:
        ok = RUNNERS[name](soc, args)
    log.info("%s %s", name, "finish" if ok else "FAILED")
    return 0 if ok else 1

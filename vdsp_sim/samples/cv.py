"""``vdsp sample cv [OP ...]``: the J5 CV sample. Runs each of its operators (or the ones named)
on the DSP, checks each result against OpenCV in-process and writes it under ``output/``,
plus ``output/cv_contact_sheet.png`` with every input and output side by side.

``vdsp sample cv help`` lists the operators. Inputs (``data/input.jpg``, ``data/500x480.yuv``,
``data/CornersR/G/B.pgm``, ``data/cornerharris_128_128.pgm``) are generated
deterministically by :mod:`vdsp_sim.samples.cv_inputs` when missing.
"""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

from arm_side import Soc, cv
from vdsp_sim.samples import cv_inputs
from vdsp_sim.samples.common import sample_soc, setup_logging
from vdsp_board.config import clihelp
from vdsp_board.processes import proc

log = logging.getLogger("vdsp.sample.cv")
DATA, OUTPUT = Path("data"), Path("output")
ROI = (200, 200, 359, 419)          # the J5 sample's crop, inclusive


class Run:
    """One sample run: the SoC, the images read, the tiles of the contact sheet, the verdicts."""

    def __init__(self, soc: Soc) -> None:
        self.soc = soc
        self.tiles: list[tuple[str, np.ndarray]] = []
        self.failed: list[str] = []
        self._seen: set[str] = set()

    def read(self, name: str) -> np.ndarray:
        """Read a data file (BGR for .jpg, gray for .pgm, NV12 for .yuv) and log it."""
        path = DATA / name
        img: np.ndarray | None
        if path.suffix == ".yuv":
            img = np.fromfile(path, np.uint8).reshape(480 * 3 // 2, 500)
        else:
            img = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE if path.suffix == ".pgm" else cv2.IMREAD_COLOR)
        if img is None:
            raise FileNotFoundError(path)
        log.info("read image %s success", path)
        if name not in self._seen:
            self._seen.add(name)
            self.tiles.append((f"input {name}", display(img, "NV12" if path.suffix == ".yuv" else None)))
        return img

    def rpc(self, fn: Callable[[], dict]) -> dict:
        log.info("rpc begin")
        t0 = time.perf_counter()
        result = fn()
        log.info("rpc finish (%.3f ms)", (time.perf_counter() - t0) * 1e3)
        return result

    def crop(self, img: cv.Image) -> None:
        assert img.roi is not None      # the sample crops an image it gave a roi
        left, top, right, bottom = img.roi
        log.info("crop roi left: %d, top: %d, right: %d, bottom: %d", left, top, right, bottom)
        log.info("crop roi area success")

    def output(self, label: str, dst: cv.Image, expected: np.ndarray, tol: float = 0) -> None:
        """Read dst back, compare with OpenCV in-process, write it under output/ and log."""
        got = cv.read_image(dst, region=True)
        diff = float(np.abs(got.astype(np.float64) - expected.astype(np.float64)).max()) \
            if got.shape == expected.shape else float("inf")
        if diff > tol:
            self.failed.append(label)
            log.error("%s: result differs from OpenCV in-process (max difference %s, allowed %s)", label, diff, tol)
        OUTPUT.mkdir(exist_ok=True)
        stem = OUTPUT / label.replace(" ", "_")
        if dst.format in ("NV12", "NV12_SEPARATE"):
            got.tofile(stem.with_suffix(".yuv"))
        elif got.dtype != np.uint8:
            np.save(stem.with_suffix(".npy"), got)
        shown = display(got, dst.format)
        cv2.imwrite(str(stem.with_suffix(".png")), shown)
        self.tiles.append((label, shown))
        log.info("write output success")


def display(img: np.ndarray, fmt: str | None) -> np.ndarray:
    """An 8-bit BGR picture of any result (NV12 decoded, deep images scaled to 0..255)."""
    if fmt in ("NV12", "NV12_SEPARATE"):
        return cv2.cvtColor(img, cv2.COLOR_YUV2BGR_NV12)
    if img.dtype != np.uint8:
        deep = np.abs(img.astype(np.float32))
        img = cv2.normalize(deep, np.empty_like(deep), 0, 255, cv2.NORM_MINMAX).astype(np.uint8)
    if fmt == "RGB":
        return img[..., ::-1]
    return img if img.ndim == 3 else cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)


def _gray(run: Run) -> tuple[np.ndarray, cv.Image]:
    gray = cv2.cvtColor(run.read("input.jpg"), cv2.COLOR_BGR2GRAY)
    return gray, cv.write_image(run.soc, gray, "Y")


def _same(run: Run, label: str, call, ref, fmt_out: str = "Y", tol: float = 0):
    """The common shape of the gray filters: input.jpg as Y -> dst of the same size."""
    gray, src = _gray(run)
    dst = cv.alloc_image(run.soc, fmt_out, src.width, src.height)
    result = run.rpc(lambda: call(run.soc, src, dst))
    run.output(label, dst, ref(gray), tol)
    return result


def _nv12(run: Run) -> tuple[np.ndarray, cv.Image]:
    yuv = run.read("500x480.yuv")
    return yuv, cv.write_image(run.soc, yuv, "NV12")


def _planes(yuv: np.ndarray, fn_y, fn_uv=None) -> np.ndarray:
    h = yuv.shape[0] * 2 // 3
    y, uv = yuv[:h], yuv[h:].reshape(h // 2, -1, 2)
    oy, ouv = fn_y(y), (fn_uv or fn_y)(uv)
    return np.vstack([oy, ouv.reshape(ouv.shape[0], -1)])


def s_bilateral(run):
    _same(run, "bilateralFilter", lambda s, a, b: cv.bilateral_filter(s, a, b, 9, 40, 6),
          lambda g: cv2.bilateralFilter(g, 9, 40, 6))


def s_box(run):
    _same(run, "boxFilter", lambda s, a, b: cv.box_filter(s, a, b, (7, 7)), lambda g: cv2.boxFilter(g, -1, (7, 7)))


def s_canny(run):
    _same(run, "canny", lambda s, a, b: cv.canny(s, a, b, 60, 160), lambda g: cv2.Canny(g, 60, 160))


def s_cvt_color(run):
    log.info("cvtColor RGB to Gray begin")
    planes = [run.read(f"Corners{c}.pgm") for c in "RGB"]
    log.info("read image data/CornersR.pgm, data/CornersG.pgm, data/CornersB.pgm success")
    rgb = np.dstack(planes)
    src = cv.write_image(run.soc, rgb, "RGB")
    dst = cv.alloc_image(run.soc, "Y", src.width, src.height)
    run.rpc(lambda: cv.cvt_color(run.soc, src, dst, "RGB2GRAY"))
    run.output("cvtColor RGB2GRAY", dst, cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY))
    log.info("cvtColor RGB to Gray finish")
    for code, fmt in (("RGB2NV12", "RGB"), ("BGR2NV12", "BGR")):
        log.info("cvtColor %s_NV12 begin", fmt)
        pixels = rgb if fmt == "RGB" else rgb[..., ::-1].copy()
        src = cv.write_image(run.soc, pixels, fmt)
        dst = cv.alloc_image(run.soc, "NV12", src.width, src.height)
        run.rpc(lambda: cv.cvt_color(run.soc, src, dst, code))
        bgr = pixels[..., ::-1] if fmt == "RGB" else pixels
        # tolerance 1: OpenCV's encoder rounds BT.601's coefficients to 3 decimals (docs/cv.md)
        run.output(f"cvtColor {code}", dst, cv_inputs.nv12_from_bgr(np.ascontiguousarray(bgr)), tol=1)
        log.info("cvtColor %s_NV12 finish", fmt)


def s_dilate(run):
    k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (7, 7))
    _same(run, "dilate", lambda s, a, b: cv.dilate(s, a, b, (7, 7), "ellipse"), lambda g: cv2.dilate(g, k))


def s_equalize(run):
    _same(run, "equalizeHist", cv.equalize_hist, cv2.equalizeHist)


def s_erode(run):
    _same(run, "erode", lambda s, a, b: cv.erode(s, a, b, (5, 5)), lambda g: cv2.erode(g, np.ones((5, 5), np.uint8)))


EMBOSS = [[-2, -1, 0], [-1, 1, 1], [0, 1, 2]]


def s_filter2d(run):
    _same(run, "filter2D", lambda s, a, b: cv.filter2d(s, a, b, EMBOSS),
          lambda g: cv2.filter2D(g, -1, np.float32(EMBOSS)))


def s_flip(run):
    yuv, src = _nv12(run)
    dst = cv.alloc_image(run.soc, "NV12", src.width, src.height)
    run.rpc(lambda: cv.flip(run.soc, src, dst, 1))
    run.output("flip", dst, _planes(yuv, lambda p: cv2.flip(p, 1)))


def s_gaussian(run):
    _same(run, "gaussianBlur", lambda s, a, b: cv.gaussian_blur(s, a, b, (5, 5), 1.2),
          lambda g: cv2.GaussianBlur(g, (5, 5), 1.2))


def s_integral(run):
    gray, src = _gray(run)
    dst = cv.alloc_image(run.soc, "S32", src.width + 1, src.height + 1)
    run.rpc(lambda: cv.integral(run.soc, src, dst))
    run.output("integral", dst, cv2.integral(gray))


def s_median(run):
    _same(run, "medianBlur", lambda s, a, b: cv.median_blur(s, a, b, 5), lambda g: cv2.medianBlur(g, 5))


def s_pyr_down(run):
    yuv, src = _nv12(run)
    dst = cv.alloc_image(run.soc, "NV12", 250, 240)
    run.rpc(lambda: cv.pyr_down(run.soc, src, dst))
    run.output("pyrDown", dst, _planes(yuv, cv2.pyrDown))


def s_pyr_up(run):
    yuv, src = _nv12(run)
    src = src.with_roi((0, 0, 499, 479))
    run.crop(src)
    dst = cv.alloc_image(run.soc, "NV12", 1000, 960)
    run.rpc(lambda: cv.pyr_up(run.soc, src, dst))
    run.output("pyrUp", dst, _planes(yuv, cv2.pyrUp))


def _crop_nv12(yuv: np.ndarray, roi) -> np.ndarray:
    l, t, r, b = roi
    h = yuv.shape[0] * 2 // 3
    return np.vstack([yuv[:h][t:b + 1, l:r + 1], yuv[h:][t // 2:(b + 1) // 2, l:r + 1]])


def s_resize(run):
    yuv, src = _nv12(run)
    src = src.with_roi(ROI)
    run.crop(src)
    dst = cv.alloc_image(run.soc, "NV12", 320, 440)
    run.rpc(lambda: cv.resize(run.soc, src, dst))
    run.output("resize", dst, _planes(_crop_nv12(yuv, ROI), lambda p: cv2.resize(p, (320, 440)),
                                      lambda p: cv2.resize(p, (160, 220))))


def s_roi_resize(run):
    yuv, src = _nv12(run)
    dst = cv.alloc_image(run.soc, "NV12", 320, 320)
    result = run.rpc(lambda: cv.roi_resize(run.soc, src, dst, ROI, keep_aspect=True))
    x, y, w, h = result["rect"]
    crop = _crop_nv12(yuv, ROI)
    canvas = np.vstack([np.zeros((320, 320), np.uint8), np.full((160, 320), 128, np.uint8)])
    inner = _planes(crop, lambda p: cv2.resize(p, (w, h)), lambda p: cv2.resize(p, (w // 2, h // 2)))
    canvas[y:y + h, x:x + w] = inner[:h]
    canvas[320 + y // 2:320 + (y + h) // 2, x:x + w] = inner[h:]
    run.output("roiResize", dst, canvas)


def s_rotate(run):
    yuv, src = _nv12(run)
    src = src.with_roi(ROI)
    run.crop(src)
    dst = cv.alloc_image(run.soc, "NV12", 220, 160)
    run.rpc(lambda: cv.rotate(run.soc, src, dst, "90ccw"))
    run.output("rotate", dst, _planes(_crop_nv12(yuv, ROI), lambda p: cv2.rotate(p, cv2.ROTATE_90_COUNTERCLOCKWISE)))


def s_sep(run):
    kx, ky = [1 / 16, 4 / 16, 6 / 16, 4 / 16, 1 / 16], [-1.0, -2.0, 0.0, 2.0, 1.0]
    _same(run, "sepFilter2D", lambda s, a, b: cv.sep_filter2d(s, a, b, kx, ky),
          lambda g: cv2.sepFilter2D(g, cv2.CV_16S, np.float32(kx), np.float32(ky)), "S16")


def s_sobel(run):
    _same(run, "sobel", lambda s, a, b: cv.sobel(s, a, b, 1, 0, 3),
          lambda g: cv2.Sobel(g, cv2.CV_16S, 1, 0), "S16")


def s_threshold(run):
    result = _same(run, "threshold", lambda s, a, b: cv.threshold(s, a, b, 0, 255, method="otsu"),
                   lambda g: cv2.threshold(g, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)[1])
    log.info("otsu threshold %.0f", result["threshold"])


def s_transpose(run):
    yuv, src = _nv12(run)
    dst = cv.alloc_image(run.soc, "NV12", 480, 500)
    run.rpc(lambda: cv.transpose(run.soc, src, dst))
    run.output("transpose", dst, _planes(yuv, cv2.transpose))


def s_warp_affine(run):
    gray = run.read("500x480.yuv")[:480]
    src = cv.write_image(run.soc, gray, "Y")
    dst = cv.alloc_image(run.soc, "Y", 500, 480)
    m = cv2.getRotationMatrix2D((250, 240), 30, 0.8)
    run.rpc(lambda: cv.warp_affine(run.soc, src, dst, m))
    run.output("warpAffine", dst, cv2.warpAffine(gray, m, (500, 480)))


def s_warp_perspective(run):
    gray = run.read("500x480.yuv")[:480]
    src = cv.write_image(run.soc, gray, "Y")
    dst = cv.alloc_image(run.soc, "Y", 500, 480)
    m = cv2.getPerspectiveTransform(np.float32([[0, 0], [499, 0], [499, 479], [0, 479]]),
                                    np.float32([[60, 30], [440, 0], [499, 479], [0, 420]]))
    run.rpc(lambda: cv.warp_perspective(run.soc, src, dst, m))
    run.output("warpPerspective", dst, cv2.warpPerspective(gray, m, (500, 480)))


def s_harris(run):
    gray = run.read("cornerharris_128_128.pgm")
    src = cv.write_image(run.soc, gray, "Y")
    dst = cv.alloc_image(run.soc, "F32", 128, 128)
    run.rpc(lambda: cv.corner_harris(run.soc, src, dst, 2, 3, 0.04))
    run.output("cornerHarris", dst, cv2.cornerHarris(gray, 2, 3, 0.04))


def s_remap(run):
    gray, src = _gray(run)
    h, w = gray.shape
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    map_x = (xx + 8 * np.sin(yy / 18)).astype(np.float32)      # a wavy glass effect
    map_y = (yy + 8 * np.sin(xx / 24)).astype(np.float32)
    mx, my = cv.write_image(run.soc, map_x, "F32"), cv.write_image(run.soc, map_y, "F32")
    dst = cv.alloc_image(run.soc, "Y", w, h)
    run.rpc(lambda: cv.remap(run.soc, src, mx, my, dst, border="reflect101"))
    run.output("remap", dst, cv2.remap(gray, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT_101))


SAMPLES: dict[str, Callable[[Run], None]] = {
    "bilateralFilter": s_bilateral, "boxFilter": s_box, "canny": s_canny, "cvtColor": s_cvt_color,
    "dilate": s_dilate, "equalizeHist": s_equalize, "erode": s_erode, "filter2D": s_filter2d, "flip": s_flip,
    "gaussianBlur": s_gaussian, "integral": s_integral, "medianBlur": s_median, "pyrDown": s_pyr_down,
    "pyrUp": s_pyr_up, "resize": s_resize, "roiResize": s_roi_resize, "rotate": s_rotate,
    "sepFilter2D": s_sep, "sobel": s_sobel, "threshold": s_threshold, "transpose": s_transpose,
    "warpAffine": s_warp_affine, "warpPerspective": s_warp_perspective, "cornerHarris": s_harris, "remap": s_remap,
}


def contact_sheet(tiles: list[tuple[str, np.ndarray]], path: Path, cell: tuple[int, int] = (240, 200),
                  columns: int = 6) -> None:
    """Every tile scaled into a labelled cell of a grid, written as one PNG."""
    cw, ch = cell
    label_h = 22
    rows = (len(tiles) + columns - 1) // columns
    sheet = np.full((rows * (ch + label_h), columns * cw, 3), 255, np.uint8)
    for i, (label, img) in enumerate(tiles):
        r, c = divmod(i, columns)
        scale = min((cw - 8) / img.shape[1], (ch - 8) / img.shape[0])
        tile = cv2.resize(img, (max(1, int(img.shape[1] * scale)), max(1, int(img.shape[0] * scale))),
                          interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_NEAREST)
        y0, x0 = r * (ch + label_h) + (ch - tile.shape[0]) // 2, c * cw + (cw - tile.shape[1]) // 2
        sheet[y0:y0 + tile.shape[0], x0:x0 + tile.shape[1]] = tile
        cv2.putText(sheet, label[:30], (c * cw + 4, r * (ch + label_h) + ch + 15), cv2.FONT_HERSHEY_SIMPLEX, 0.45,
                    (0, 0, 0), 1, cv2.LINE_AA)
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), sheet)


def run_samples(soc: Soc, names: list[str]) -> Run:
    run = Run(soc)
    for name in names:
        if name != "cvtColor":
            log.info("%s begin", name)
        SAMPLES[name](run)
        if name != "cvtColor":
            log.info("%s finish", name)
    return run


def main(argv: list[str] | None = None) -> int:
    argv = list(argv or [])
    if argv[:1] in (["help"], ["-h"], ["--help"]):
        print("vdsp sample cv [OP ...]: runs every operator of the J5 CV sample, or the ones named:\n  "
              + "\n  ".join(SAMPLES))
        return 0
    ap = argparse.ArgumentParser(prog="vdsp sample cv", description=__doc__)
    ap.add_argument("ops", nargs="*", metavar="OP", help="operators to run (default: all); 'help' lists them")
    args = clihelp.finish(ap).parse_args(argv)
    unknown = [n for n in args.ops if n not in SAMPLES]
    if unknown:
        print(f"vdsp sample cv: unknown operator(s) {', '.join(unknown)}; try 'vdsp sample cv help'")
        return 2
    setup_logging()
    proc.exit_on_sigterm()
    if not all((DATA / n).exists() for n in ("input.jpg", "500x480.yuv", "CornersR.pgm", "cornerharris_128_128.pgm")):
        cv_inputs.write_data(DATA)
        log.info("generated the sample inputs in %s/", DATA)
    with sample_soc() as soc:
        run = run_samples(soc, args.ops or list(SAMPLES))
    contact_sheet(run.tiles, OUTPUT / "cv_contact_sheet.png")
    log.info("write contact sheet %s success", OUTPUT / "cv_contact_sheet.png")
    if run.failed:
        log.error("results differing from OpenCV: %s", ", ".join(run.failed))
        return 1
    return 0

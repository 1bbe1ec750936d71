"""Deterministic, natural-looking test images for the CV sample and tests (no third-party images).

A scene is drawn from a seed: a sky-like vertical gradient, a ground plane with
fine noise texture, soft-edged shapes (sun, hills, a house with windows), hard
edges, a checkerboard patch and a line of text, then a light blur so edges look
photographic. The same seed always gives the same bytes (numpy's PCG64 and
OpenCV's integer drawing routines).
"""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np


def scene(width: int = 500, height: int = 480, seed: int = 2024) -> np.ndarray:
    """A BGR uint8 image of ``height`` x ``width``."""
    rng = np.random.default_rng(seed)
    y = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    img: np.ndarray = np.empty((height, width, 3), np.float32)
    img[..., 0] = 235 - 90 * y + 10 * x          # sky: blue fading to the horizon
    img[..., 1] = 190 - 60 * y
    img[..., 2] = 120 + 40 * y
    horizon = int(height * 0.6)
    ground: np.ndarray = rng.normal(0, 18, (height - horizon, width)).astype(np.float32)
    ground = cv2.GaussianBlur(ground, (0, 0), 1.2)      # grass-like texture
    img[horizon:, :, 0] = 60 + ground
    img[horizon:, :, 1] = 130 + 1.5 * ground + 30 * y[horizon:]
    img[horizon:, :, 2] = 80 + ground
    s = min(width, height) / 480.0
    pt = lambda fx, fy: (int(fx * width), int(fy * height))    # noqa: E731 - a local shorthand
    cv2.circle(img, pt(0.8, 0.18), int(40 * s), (90, 220, 250), -1, cv2.LINE_AA)        # sun
    hills = np.array([pt(0, 0.6), pt(0.15, 0.45), pt(0.35, 0.58), pt(0.55, 0.42), pt(0.75, 0.6)], np.int32)
    cv2.fillPoly(img, [hills], (95, 120, 105), cv2.LINE_AA)
    cv2.rectangle(img, pt(0.12, 0.52), pt(0.42, 0.8), (70, 95, 170), -1)               # house
    cv2.fillPoly(img, [np.array([pt(0.1, 0.52), pt(0.27, 0.4), pt(0.44, 0.52)], np.int32)], (40, 40, 120),
                 cv2.LINE_AA)
    for fx in (0.16, 0.31):
        cv2.rectangle(img, pt(fx, 0.58), pt(fx + 0.07, 0.66), (200, 225, 240), -1)      # windows
        cv2.line(img, pt(fx + 0.035, 0.58), pt(fx + 0.035, 0.66), (40, 50, 60), max(1, int(2 * s)))
    cv2.rectangle(img, pt(0.24, 0.68), pt(0.3, 0.8), (30, 50, 90), -1)                   # door
    cell = max(4, int(12 * s))                                                           # checkerboard sign
    x0, y0 = pt(0.6, 0.66)
    for i in range(6):
        for j in range(6):
            if (i + j) % 2 == 0:
                cv2.rectangle(img, (x0 + i * cell, y0 + j * cell), (x0 + (i + 1) * cell - 1, y0 + (j + 1) * cell - 1),
                              (20, 20, 20), -1)
            else:
                cv2.rectangle(img, (x0 + i * cell, y0 + j * cell), (x0 + (i + 1) * cell - 1, y0 + (j + 1) * cell - 1),
                              (235, 235, 235), -1)
    img = np.clip(np.rint(img), 0, 255).astype(np.uint8)       # text is drawn on 8-bit pixels
    cv2.putText(img, "vdsp-sim CV", pt(0.05, 0.93), cv2.FONT_HERSHEY_SIMPLEX, 1.1 * s, (250, 250, 250),
                max(1, int(2 * s)), cv2.LINE_AA)
    cv2.putText(img, "J5 DSP 0x0800", pt(0.55, 0.97), cv2.FONT_HERSHEY_PLAIN, 1.2 * s, (20, 20, 20), 1, cv2.LINE_AA)
    img = cv2.GaussianBlur(img.astype(np.float32), (3, 3), 0.6)
    img += rng.normal(0, 2.0, img.shape).astype(np.float32)                               # sensor noise
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def corners(size: int = 128, seed: int = 7) -> np.ndarray:
    """A BGR test image for corner detection: tilted squares, a checkerboard and a triangle."""
    rng = np.random.default_rng(seed)
    img = np.full((size, size, 3), 40, np.uint8)
    img += rng.integers(0, 6, img.shape, dtype=np.uint8)
    q = size // 8
    for i in range(3):
        for j in range(3):
            if (i + j) % 2 == 0:
                cv2.rectangle(img, (q + i * q, q + j * q), (q + (i + 1) * q - 1, q + (j + 1) * q - 1),
                              (230, 230, 230), -1)
    box = cv2.boxPoints(((size * 0.72, size * 0.3), (size * 0.28, size * 0.28), 25.0)).astype(np.int32)
    cv2.fillPoly(img, [box], (60, 200, 240))
    tri = np.array([[size * 0.55, size * 0.9], [size * 0.92, size * 0.9], [size * 0.74, size * 0.58]], np.int32)
    cv2.fillPoly(img, [tri], (200, 80, 60))
    cv2.rectangle(img, (q, int(size * 0.62)), (int(size * 0.42), int(size * 0.9)), (120, 160, 90), -1)
    return img


def nv12_from_bgr(bgr: np.ndarray) -> np.ndarray:
    """(H*3/2) x W NV12 of a BGR image (OpenCV's I420 with its U and V rows interleaved)."""
    h, w = bgr.shape[:2]
    i420 = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420)
    flat = i420.ravel()                 # U and V planes are (h/2) x (w/2) each, right after Y
    u = flat[h * w:h * w + h * w // 4].reshape(h // 2, w // 2)
    v = flat[h * w + h * w // 4:].reshape(h // 2, w // 2)
    return np.vstack([i420[:h], np.dstack([u, v]).reshape(h // 2, w)])


def write_data(directory: Path) -> dict[str, Path]:
    """Write the sample's inputs into ``directory``: input.jpg (500x480), 500x480.yuv (NV12),
    CornersR/G/B.pgm (the colour planes of a 128x128 image) and cornerharris_128_128.pgm."""
    directory.mkdir(parents=True, exist_ok=True)
    img = scene()
    crn = corners()
    paths = {"input.jpg": directory / "input.jpg", "500x480.yuv": directory / "500x480.yuv",
             "cornerharris_128_128.pgm": directory / "cornerharris_128_128.pgm"}
    cv2.imwrite(str(paths["input.jpg"]), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
    paths["500x480.yuv"].write_bytes(nv12_from_bgr(img).tobytes())
    for name, plane in zip("BGR", cv2.split(crn)):
        paths[f"Corners{name}.pgm"] = directory / f"Corners{name}.pgm"
        cv2.imwrite(str(paths[f"Corners{name}.pgm"]), plane)
    cv2.imwrite(str(paths["cornerharris_128_128.pgm"]), cv2.cvtColor(crn, cv2.COLOR_BGR2GRAY))
    return paths

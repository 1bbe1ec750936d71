"""arm_side.cv for OpenCV users: numpy in / numpy out, OpenCV's constants and argument order,
and the asyncio form. Each result is compared with cv2 run in this process.

    .venv/bin/vdsp up -d
    .venv/bin/python examples/opencv_style.py
    .venv/bin/vdsp down
"""
import asyncio
import sys

import cv2
import numpy as np

from arm_side import AsyncSoc, Soc, cv


def scene() -> np.ndarray:
    rng = np.random.default_rng(0)
    return cv2.GaussianBlur(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8), (0, 0), 3)


def blocking(img: np.ndarray, gray: np.ndarray) -> bool:
    with Soc() as soc:
        checks = {
            "GaussianBlur": (cv.gaussian_blur(soc, img, 5, borderType=cv2.BORDER_REPLICATE),
                             cv2.GaussianBlur(img, (5, 5), 0, borderType=cv2.BORDER_REPLICATE)),
            "threshold OTSU": (cv.threshold(soc, gray, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU),
                               cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)),
            "resize AREA": (cv.resize(soc, img, (320, 240), interpolation=cv2.INTER_AREA),
                            cv2.resize(img, (320, 240), interpolation=cv2.INTER_AREA)),
            "Sobel CV_16S": (cv.sobel(soc, gray, cv2.CV_16S, 1, 0, ksize=3), cv2.Sobel(gray, cv2.CV_16S, 1, 0, ksize=3)),
            "dilate ELLIPSE": (cv.dilate(soc, gray, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (7, 7))),
                               cv2.dilate(gray, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (7, 7)))),
        }
        pooled = soc.mem.pool.allocated
        ok = True
        for name, (ours, theirs) in checks.items():
            same = all(np.array_equal(a, b) for a, b in zip(ours, theirs)) if isinstance(ours, tuple) \
                else np.array_equal(ours, theirs)
            ok &= same
            print(f"{name:15s} {'same as cv2' if same else 'DIFFERS from cv2'}")
        print(f"{len(checks)} calls used {pooled} pooled shared buffers (freed when the Soc closes)")
    return ok


async def concurrent(img: np.ndarray) -> bool:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    async with AsyncSoc() as soc:
        ticking = asyncio.create_task(ticker())
        outs = await asyncio.gather(*(cv.median_blur(soc, img, 5) for _ in range(4)))
        ticking.cancel()
    same = all(np.array_equal(o, cv2.medianBlur(img, 5)) for o in outs)
    print(f"4 medianBlur awaited together: {'same as cv2' if same else 'DIFFER from cv2'}; "
          f"the event loop ticked {ticks} times meanwhile")
    return same


def main() -> int:
    img = scene()
    gray = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    ok = blocking(img, gray)
    ok &= asyncio.run(concurrent(img))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

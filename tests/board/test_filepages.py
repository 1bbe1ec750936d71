"""The library pages a preloading process lets go of (``vdsp_board.processes.filepages``)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from vdsp_board.processes import filepages

SMAPS = b"""\
55d0c0000000-55d0c0001000 r--p 00000000 fe:00 101 /usr/bin/python3.11
Size:                  4 kB
Anonymous:             0 kB
7f0000000000-7f0000100000 r-xp 00010000 fe:00 202 /venv/lib/libllvmlite.so
Size:               1024 kB
Rss:                 900 kB
Anonymous:             0 kB
7f0000100000-7f0000200000 r--p 00110000 fe:00 202 /venv/lib/libllvmlite.so
Anonymous:            12 kB
7f0000200000-7f0000210000 rw-p 00210000 fe:00 202 /venv/lib/libllvmlite.so
Anonymous:             0 kB
7f0000300000-7f0000400000 r--s 00000000 00:1a 303 /dev/shm/vdsp-ddr-1
Anonymous:             0 kB
7f0000400000-7f0000500000 r--p 00000000 00:00 0
Anonymous:             0 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
Anonymous:             0 kB
7f0000600000-7f0000601000 r--p 00000000 fe:00 404 /tmp/file with spaces (deleted)
Anonymous:             0 kB
"""


def test_only_clean_private_read_only_file_mappings_are_candidates():
    got = filepages.candidates(SMAPS)
    assert got == [
        (0x55d0c0000000, 0x55d0c0001000, "/usr/bin/python3.11"),
        (0x7f0000000000, 0x7f0000100000, "/venv/lib/libllvmlite.so"),
        (0x7f0000600000, 0x7f0000601000, "/tmp/file with spaces (deleted)"),
    ]   # not: relocated read-only data (anonymous pages), writable data, a shared DDR segment,
    #     anonymous memory, the vDSO


_CHILD = r"""
import json, sys
import numpy as np
from dsp_side import preload
from dsp_side.operators import pointcloud
import cv2

def lib_rss_kb(name):
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and ":" in head[3]:
            inside = name in line
        elif inside and line.startswith("Rss:"):
            total += int(head[1])
    return total

preload.preload("test")
rss = {"llvmlite": lib_rss_kb("libllvmlite"), "cv2": lib_rss_kb("cv2.abi3")}
pts, cells, xyzr = (np.frombuffer(bytes.fromhex(x), np.uint8) if i == 0 else np.zeros(int(x), np.uint8)
                    for i, x in enumerate(sys.argv[1:4]))
pts.flags.writeable = False
pointcloud.encode(None, [pts], [cells, xyzr], dim=4, num_points=len(pts) // 16, **json.loads(sys.argv[4]))
img = np.arange(64 * 48, dtype=np.uint8).reshape(48, 64)
blur = cv2.GaussianBlur(img, (5, 5), 0)
print(json.dumps({"rss_kb": rss, "cells": cells.tobytes().hex(), "xyzr": xyzr.tobytes().hex(),
                  "blur": blur.tobytes().hex()}))
"""


def test_preload_keeps_no_import_time_library_pages_and_its_kernels_still_run():
    """After ``preload.preload`` (what ``vdsp up`` does before it makes the SoC's starter) the
    process holds almost none of numba's LLVM and OpenCV's code resident (on Linux 6.18, 111 MB
    and 30 MB before), and what it computes afterwards is what a process that never let go of a
    page computes."""
    import cv2
    from dsp_side.operators import pointcloud
    n = 512
    rng = np.random.default_rng(5)
    pts = rng.uniform(0.0, 8.0, (n, 4)).astype(np.float32).view(np.uint8).ravel()
    pts.flags.writeable = False
    params = {"back": 0.0, "front": 8.0, "right": 0.0, "left": 8.0, "bottom": -1.0, "top": 1.0,
              "lower": 0.0, "upper": 1.0, "x_scale": 1.0, "y_scale": 1.0, "scale": 0.1}
    cells, xyzr = np.zeros(n * 4, np.uint8), np.zeros(n * 4, np.uint8)
    pointcloud.encode(None, [pts], [cells, xyzr], dim=4, num_points=n, **params)
    blur = cv2.GaussianBlur(np.arange(64 * 48, dtype=np.uint8).reshape(48, 64), (5, 5), 0)

    out = subprocess.run([sys.executable, "-c", _CHILD, pts.tobytes().hex(), str(n * 4), str(n * 4),
                          json.dumps(params)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["rss_kb"]["llvmlite"] < 16 * 1024, got["rss_kb"]
    assert got["rss_kb"]["cv2"] < 8 * 1024, got["rss_kb"]
    assert bytes.fromhex(got["cells"]) == cells.tobytes()
    assert bytes.fromhex(got["xyzr"]) == xyzr.tobytes()
    assert bytes.fromhex(got["blur"]) == blur.tobytes()
    assert cells.any() and xyzr.any()       # the kernel wrote something to compare

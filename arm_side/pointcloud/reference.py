"""CPU reference: the per-point loops a user writes first (voxelize, encode & quantise, transpose).

Plain Python over numpy float32 scalars, so every subtraction, division and comparison is
a float32 operation, exactly as the J5 C++ reference computes it. Slow (a few µs a point):
it is the ground truth the DSP path is checked against, not a fast path.
"""
from __future__ import annotations

import numpy as np

from arm_side.pointcloud.params import COORDS_FILL, PillarParams


def quantize(value: np.float32) -> int:
    """Round to nearest, ties to even, clamp to [-128, 127]; NaN gives 0 (what the J5 C++
    cast does on aarch64)."""
    if value != value:
        return 0
    rounded = float(np.rint(value))                            # round to nearest, ties to even
    return int(min(max(rounded, -128.0), 127.0))


def voxelize(points: np.ndarray, p: PillarParams) -> tuple[list, list, list]:
    """Pillar coords, and the points kept in each pillar (file order), as float32 rows.

    Returns (coords rows [0, 0, idy, idx] per pillar, per-pillar lists of points, point counts).
    """
    f = np.float32
    back, front, right, left = f(p.back), f(p.front), f(p.right), f(p.left)
    bottom, top, x_scale, y_scale = f(p.bottom), f(p.top), f(p.x_scale), f(p.y_scale)
    cell_to_pillar: dict[tuple[int, int], int] = {}
    coords: list[list[int]] = []
    pillars: list[list] = []
    for point in points:
        x, y, z = point[0], point[1], point[2]
        if not (back < x < front and right < y < left and bottom < z < top):
            continue                                   # outside, NaN or infinite
        idx = int((x - back) / x_scale)                # float32 division, truncation
        idy = int((y - right) / y_scale)
        pid = cell_to_pillar.get((idy, idx))
        if pid is None:
            if len(coords) < p.max_pillars:
                pid = len(coords)
                coords.append([0, 0, idy, idx])
                pillars.append([])
            else:                                      # overflow: the last pillar takes the new cell
                pid = p.max_pillars - 1
                coords[pid] = [0, 0, idy, idx]
            cell_to_pillar[(idy, idx)] = pid
        if len(pillars[pid]) < p.max_points:
            pillars[pid].append(point)
    return coords, pillars, [len(pts) for pts in pillars]


def encode(point: np.ndarray, p: PillarParams) -> list[int]:
    """Normalise each value of one point to its range, divide by ``scale``, quantise."""
    f = np.float32
    scale = f(p.scale)
    subs = (f(p.back), f(p.right), f(p.bottom), f(p.lower))
    spans = (f(p.front) - f(p.back), f(p.left) - f(p.right), f(p.top) - f(p.bottom), f(p.upper) - f(p.lower))
    values = [quantize((point[c] - subs[c]) / spans[c] / scale) for c in range(4)]
    if p.dim == 5:
        values.append(quantize(point[4] / scale))      # the 5th value is only quantised
    return values


def preprocess(points: np.ndarray, p: PillarParams) -> tuple[np.ndarray, np.ndarray]:
    """(coords int32 1x1xPx4, features int8 in ``p.feature_shape``) of an N x dim float32 cloud."""
    p = p.checked()
    points = np.asarray(points, dtype=np.float32).reshape(-1, p.dim)
    with np.errstate(all="ignore"):                    # NaN/inf inputs are handled by the rules
        coords_rows, pillars, _ = voxelize(points, p)
        coords = np.full(p.coords_shape, COORDS_FILL, dtype=np.int32)
        features = np.zeros(p.feature_shape, dtype=np.int8)
        for pid, row in enumerate(coords_rows):
            coords[0, 0, pid] = row
        for pid, pts in enumerate(pillars):
            for slot, point in enumerate(pts):
                for c, q in enumerate(encode(point, p)):   # transpose: scatter into the model's layout
                    if p.layout == "cmp":
                        features[0, c, slot, pid] = q
                    else:
                        features[0, c, pid, slot] = q
    return coords, features

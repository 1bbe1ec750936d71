"""Deterministic synthetic LiDAR clouds: a spinning multi-beam sensor ray-cast against a
ground plane and boxes (cars, walls, poles). No third-party data.

Points come in firing order (sweep, azimuth step, beam), in the sensor frame (z up, the
ground at ``-height``), as float32 rows:

* KITTI style (``dim=4``): x, y, z, reflectance in [0, 1];
* nuScenes style (``dim=5``): x, y, z, intensity in [0, 255], time lag in seconds; older
  sweeps were taken while the ego vehicle drove forward, so they are shifted back.

The same arguments always give the same cloud (``numpy.random.default_rng(seed)``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

SENSORS: dict[int, dict[str, Any]] = {   # beams, lowest and highest elevation (degrees), mounting height (m)
    4: dict(beams=64, elev=(-24.8, 2.0), height=1.73, sweeps=1),
    5: dict(beams=32, elev=(-30.0, 10.0), height=1.84, sweeps=10),
}
MAX_RANGE = 100.0
SWEEP_DT = 0.05          # seconds between nuScenes sweeps
EGO_SPEED = 8.0          # m/s


def scene(rng: np.random.Generator, n_cars: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Axis-aligned boxes (lo xyz, hi xyz, reflectivity) in the ground frame (z = 0 is the ground)."""
    lo: list = []
    hi: list = []
    refl: list = []
    for _ in range(n_cars):                                  # cars along a few lanes
        cx, cy = rng.uniform(-70, 70), rng.choice([-10.5, -7.0, -3.5, 3.5, 7.0, 10.5]) + rng.normal(0, 0.3)
        if abs(cx) < 5 and abs(cy) < 4:
            continue
        lo.append([cx - 2.25, cy - 0.9, 0.0])
        hi.append([cx + 2.25, cy + 0.9, 1.6])
        refl.append(rng.uniform(0.3, 0.9))
    for side in (-1, 1):                                     # building walls along the street
        for x0 in np.arange(-90, 90, 20.0):
            y0 = side * rng.uniform(16, 22)
            lo.append([x0, min(y0, y0 + side * 2), 0.0])
            hi.append([x0 + 18, max(y0, y0 + side * 2), rng.uniform(4, 12)])
            refl.append(rng.uniform(0.2, 0.6))
    for x0 in np.arange(-60, 60, 12.0):                      # poles
        y0 = float(rng.choice([-13.0, 13.0]))
        lo.append([x0, y0, 0.0])
        hi.append([x0 + 0.3, y0 + 0.3, 6.0])
        refl.append(0.8)
    return np.array(lo), np.array(hi), np.array(refl)


def _visible(dirs: np.ndarray, origin: np.ndarray, lo, hi) -> np.ndarray:
    """Indices of the boxes that may lie in the azimuth sector of ``dirs`` (a narrow fan)."""
    mean = dirs[:, :2].mean(axis=0)
    mean /= np.linalg.norm(mean) or 1.0
    spread = np.arccos(np.clip(dirs[:, :2] @ mean / np.linalg.norm(dirs[:, :2], axis=1), -1, 1)).max()
    centre = (lo[:, :2] + hi[:, :2]) / 2 - origin[:2]
    dist = np.linalg.norm(centre, axis=1)
    radius = np.linalg.norm(hi[:, :2] - lo[:, :2], axis=1) / 2
    angle = np.arccos(np.clip(centre @ mean / np.maximum(dist, 1e-9), -1, 1))
    near = dist <= radius
    return np.flatnonzero(near | (angle <= spread + np.arcsin(np.clip(radius / np.maximum(dist, 1e-9), 0, 1))))


def _cast(dirs: np.ndarray, origin: np.ndarray, lo, hi, refl, height: float):
    """Nearest hit of each ray: (range, reflectivity, cosine of incidence); range inf = no hit."""
    boxes = _visible(dirs, origin, lo, hi)
    lo, hi, refl = lo[boxes], hi[boxes], refl[boxes]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / np.where(dirs == 0, 1e-12, dirs)         # R x 3
        t1 = (lo[None] - origin) * inv[:, None]              # R x B x 3
        t2 = (hi[None] - origin) * inv[:, None]
        tnear = np.minimum(t1, t2).max(axis=2, initial=-np.inf)
        tfar = np.maximum(t1, t2).min(axis=2, initial=np.inf)
        hit = (tnear <= tfar) & (tnear > 0.5)
        tbox = np.where(hit, tnear, np.inf)
        best = np.argmin(tbox, axis=1) if len(boxes) else np.zeros(len(dirs), np.intp)
        rbox = tbox[np.arange(len(dirs)), best] if len(boxes) else np.full(len(dirs), np.inf)
        refl = refl if len(boxes) else np.zeros(1)
        tground = np.where(dirs[:, 2] < 0, -origin[2] / dirs[:, 2], np.inf)
    ground = tground < rbox
    rng_ = np.where(ground, tground, rbox)
    reflect = np.where(ground, 0.15, refl[best])
    cos_inc = np.where(ground, -dirs[:, 2], np.sqrt(1 - dirs[:, 2] ** 2) * 0.8)
    return rng_, reflect, cos_inc


def generate(num_points: int, dim: int, seed: int = 0) -> np.ndarray:
    """``num_points`` x ``dim`` float32 cloud (dim 4: KITTI style, 5: nuScenes style)."""
    if dim not in SENSORS:
        raise ValueError(f"dim must be 4 or 5, got {dim!r}")
    if num_points <= 0:
        return np.zeros((0, dim), np.float32)
    cfg = SENSORS[dim]
    rng = np.random.default_rng(seed)
    lo, hi, refl = scene(rng)
    lowest, highest = cfg["elev"]
    elev = np.radians(np.linspace(lowest, highest, cfg["beams"]))
    n_az = max(64, int(np.ceil(num_points * 1.6 / (cfg["beams"] * cfg["sweeps"]))))
    chunks: list = []
    total = 0
    while total < num_points:                                # denser spins until enough returns
        chunks, total = [], 0
        for sweep in range(cfg["sweeps"]):
            pts = _sweep(rng, elev, n_az, sweep, lo, hi, refl, cfg["height"], dim)
            chunks.append(pts)
            total += len(pts)
        n_az = int(n_az * 1.5)
    return np.concatenate(chunks)[:num_points]


def _sweep(rng, elev, n_az, sweep, lo, hi, refl, height, dim) -> np.ndarray:
    lag = sweep * SWEEP_DT
    origin = np.array([-EGO_SPEED * lag, 0.0, height])       # sensor position (ground frame, current ego at x=0)
    az = np.linspace(-np.pi, np.pi, n_az, endpoint=False) + rng.uniform(0, 2 * np.pi / n_az)
    a, e = np.meshgrid(az, elev, indexing="ij")              # firing order: azimuth, then beam
    dirs = np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], axis=-1).reshape(-1, 3)
    out = []
    for start in range(0, len(dirs), 2048):
        d = dirs[start:start + 2048]
        r, reflect, cos_inc = _cast(d, origin, lo, hi, refl, height)
        keep = r < MAX_RANGE
        r = r[keep] + rng.normal(0, 0.02, keep.sum())
        xyz = origin + d[keep] * r[:, None] - np.array([0.0, 0.0, height])   # current sensor frame
        inten = np.clip(reflect[keep] * cos_inc[keep] * (1 + rng.normal(0, 0.1, keep.sum())), 0, 1)
        cols = [xyz, (inten * 255.0 if dim == 5 else inten)[:, None]]
        if dim == 5:
            cols.append(np.full((keep.sum(), 1), lag))
        out.append(np.hstack(cols).astype(np.float32))
    return np.concatenate(out) if out else np.zeros((0, dim), np.float32)

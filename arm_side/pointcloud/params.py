"""Parameters of the pillar preprocessing: ranges, cell size, quantisation, tensor shapes.

Every boundary, cell size and scale is a float32 (the values are rounded to float32 once,
here), and every derived quantity is computed in float32 as the kernels compute it, so the
CPU reference and the DSP path agree bit for bit.

Presets (every field can be overridden with ``dataclasses.replace`` or ``preset(..., **kw)``):

* ``centerpoint``: nuScenes, 5-dim points (x, y, z, intensity, time lag);
  x, y in (-51.2, 51.2) m, z in (-5, 3) m, intensity in [0, 255], 0.2 m cells (512 x 512),
  40000 pillars x 20 points, features 1 x 5 x 20 x P (channel, point slot, pillar).
* ``pointpillars``: KITTI, 4-dim points (x, y, z, reflectance in [0, 1]);
  x in (0, 69.12) m, y in (-39.68, 39.68) m, z in (-3, 1) m, 0.16 m cells (432 x 496),
  40000 pillars x 20 points, features 1 x 4 x P x 20 (channel, pillar, point slot).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from protocol.errors import InvalidArgument

#: feature layouts: "cmp" = channel, point slot, pillar (CenterPoint, NCHW 1xCxMxP);
#: "cpm" = channel, pillar, point slot (PointPillars, NCHW 1xCxPxM).
LAYOUTS = ("cmp", "cpm")
#: value of every int32 of an unused coords row (pillar ids >= number of pillars)
COORDS_FILL = -1
#: the packed cell index is idy << 16 | idx, so each must fit in 15 bits (-1 marks a skipped point)
MAX_GRID = 32767


def f32(value: float) -> np.float32:
    return np.float32(value)


@dataclasses.dataclass(frozen=True)
class PillarParams:
    """One preprocessing configuration. Construct through :func:`preset` or directly, then
    :meth:`checked`; ranges are open intervals (``back < x < front`` ...)."""
    dim: int                 # values per point: 4 (x, y, z, r) or 5 (x, y, z, r, t)
    back: float              # x range (back, front)
    front: float
    right: float             # y range (right, left)
    left: float
    bottom: float            # z range (bottom, top)
    top: float
    lower: float             # intensity normalisation: (r - lower) / (upper - lower)
    upper: float
    x_scale: float           # cell size along x and y (metres)
    y_scale: float
    scale: float             # input quantisation scale of the model (feature / scale)
    max_pillars: int         # P
    max_points: int          # M, points kept per pillar
    layout: str              # "cmp" or "cpm"
    pillar_stride: int = 0   # allocated pillar axis length (>= P, e.g. an alignedShape); 0 = P

    def checked(self) -> "PillarParams":
        """Validate and normalise (floats rounded to float32). Raises InvalidArgument naming the field."""
        if self.dim not in (4, 5):
            raise InvalidArgument(f"dim must be 4 or 5, got {self.dim!r}")
        if self.layout not in LAYOUTS:
            raise InvalidArgument(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        vals: dict[str, Any] = {}
        for name in ("back", "front", "right", "left", "bottom", "top", "lower", "upper",
                     "x_scale", "y_scale", "scale"):
            v = f32(getattr(self, name))
            if not np.isfinite(v):
                raise InvalidArgument(f"{name} must be a finite float32, got {getattr(self, name)!r}")
            vals[name] = float(v)
        for lo, hi in (("back", "front"), ("right", "left"), ("bottom", "top"), ("lower", "upper")):
            if not f32(vals[hi]) - f32(vals[lo]) > 0:
                raise InvalidArgument(f"{hi} ({vals[hi]}) must be greater than {lo} ({vals[lo]})")
        for name in ("x_scale", "y_scale", "scale"):
            if not vals[name] > 0:
                raise InvalidArgument(f"{name} must be > 0, got {vals[name]}")
        for name in ("max_pillars", "max_points"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise InvalidArgument(f"{name} must be an int >= 1, got {getattr(self, name)!r}")
        stride = self.pillar_stride or self.max_pillars
        if stride < self.max_pillars:
            raise InvalidArgument(f"pillar_stride {stride} is smaller than max_pillars {self.max_pillars}")
        out = dataclasses.replace(self, pillar_stride=stride, **vals)
        gx, gy = out.grid
        if gx > MAX_GRID or gy > MAX_GRID:
            raise InvalidArgument(f"pseudo-image {gx}x{gy} exceeds {MAX_GRID} cells per axis: "
                                  "widen x_scale/y_scale or narrow the range")
        return out

    @property
    def grid(self) -> tuple[int, int]:
        """(width, height) of the pseudo-image: one more than the largest cell index a point
        strictly inside the range can get (float32 arithmetic is monotonic, so the largest
        float32 below ``front`` gives the largest idx)."""
        return (_cells(self.back, self.front, self.x_scale), _cells(self.right, self.left, self.y_scale))

    @property
    def feature_shape(self) -> tuple[int, int, int, int]:
        """NCHW shape of the feature tensor, pillar axis at its allocated stride."""
        if self.layout == "cmp":
            return (1, self.dim, self.max_points, self.pillar_stride or self.max_pillars)
        return (1, self.dim, self.pillar_stride or self.max_pillars, self.max_points)

    @property
    def coords_shape(self) -> tuple[int, int, int, int]:
        return (1, 1, self.max_pillars, 4)

    def encode_params(self) -> dict:
        """Parameters of the stage-1 operator (pointcloud_encode)."""
        keys = ("dim", "back", "front", "right", "left", "bottom", "top", "lower", "upper",
                "x_scale", "y_scale", "scale")
        return {k: getattr(self, k) for k in keys}

    def transpose_params(self, num_pillars: int) -> dict:
        """Parameters of the stage-2 operator (pointcloud_transpose)."""
        return {"dim": self.dim, "layout": self.layout, "max_pillars": self.max_pillars,
                "max_points": self.max_points, "pillar_stride": self.pillar_stride or self.max_pillars,
                "num_pillars": num_pillars}


def _cells(lo: float, hi: float, cell: float) -> int:
    top = np.nextafter(f32(hi), f32(-np.inf), dtype=np.float32)
    return int((top - f32(lo)) / f32(cell)) + 1


PRESETS = {
    "centerpoint": PillarParams(dim=5, back=-51.2, front=51.2, right=-51.2, left=51.2, bottom=-5.0, top=3.0,
                                lower=0.0, upper=255.0, x_scale=0.2, y_scale=0.2, scale=1.0 / 128,
                                max_pillars=40000, max_points=20, layout="cmp"),
    "pointpillars": PillarParams(dim=4, back=0.0, front=69.12, right=-39.68, left=39.68, bottom=-3.0, top=1.0,
                                 lower=0.0, upper=1.0, x_scale=0.16, y_scale=0.16, scale=1.0 / 128,
                                 max_pillars=40000, max_points=20, layout="cpm"),
}
#: typical sample cloud size of each preset
TYPICAL_POINTS = {"centerpoint": 300_000, "pointpillars": 100_000}


def preset(name: str, **overrides) -> PillarParams:
    """A preset by name ("centerpoint", "pointpillars"; "pointpillar" is accepted), with overrides,
    validated. Raises InvalidArgument."""
    key = "pointpillars" if name == "pointpillar" else name
    if key not in PRESETS:
        raise InvalidArgument(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    return dataclasses.replace(PRESETS[key], **overrides).checked()

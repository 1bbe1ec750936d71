"""Point-cloud ``.bin`` files: raw little-endian float32, ``dim`` values per point
(KITTI velodyne: N x 4 x, y, z, reflectance; nuScenes lidar: N x 5 x, y, z, intensity, ring
index or time lag). No header: the size alone tells N."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from protocol.errors import InvalidArgument


def read_bin(path: str | Path, dim: int) -> np.ndarray:
    """N x dim float32 array of the file. Raises FileNotFoundError, InvalidArgument when the
    size is not a whole number of points."""
    data = np.fromfile(path, dtype="<f4")
    if data.size % dim:
        raise InvalidArgument(f"{path}: {data.size * 4} bytes is not a whole number of {dim}-float32 points")
    return data.reshape(-1, dim).astype(np.float32, copy=False)


def write_bin(path: str | Path, points: np.ndarray) -> None:
    """Write an N x dim cloud as raw little-endian float32."""
    np.ascontiguousarray(points, dtype="<f4").tofile(path)

"""numba-compiled stage 1 of the point-cloud preprocessing (blocks of points, vectorised by LLVM).

``AVAILABLE`` is False when numba cannot be imported or the environment sets
``VDSP_NO_NUMBA=1``; :mod:`dsp_side.operators.pointcloud` then uses its numpy code, which
gives the same bytes. The loops repeat the numpy code's float32 operations one by one
(no fastmath: no reassociation, no reciprocal, no FMA; every operand is float32 so
nothing is promoted to float64; error_model="numpy": IEEE division, no Python
checks). Machine code is cached in ``__pycache__`` next to this
file (``cache=True``), so only the first process after an install compiles it.

The kernels trust their caller (:mod:`pointcloud`) for sizes: no bounds checks.
"""
from __future__ import annotations


import numpy as np

from vdsp_board.config.jit import AVAILABLE, njit  # noqa: F401  (AVAILABLE is read by callers)

#: order of the float32 parameter vector of :func:`encode`
PARAMS = ("back", "front", "right", "left", "bottom", "top", "lower", "upper", "x_scale", "y_scale", "scale")


_BLOCK = 256    # points per block: the block's features fit in L1 between the passes


@njit(cache=True, nogil=True, error_model="numpy")
def _columns(dim, head, tail):
    """A float32 vector of _BLOCK * dim values repeating ``head`` (4 values) then, for dim 5, ``tail``."""
    out = np.empty(_BLOCK * dim, np.float32)
    for j in range(_BLOCK):
        for c in range(4):
            out[j * dim + c] = head[c]
        if dim == 5:
            out[j * dim + 4] = tail
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def _quantize_block(src, sub, span, scale, q):
    """q[j] = int8 of ((src[j] - sub[j]) / span[j]) / scale, float32, ties to even, clamped to
    [-128, 127], NaN -> 0. Branch-free so that LLVM vectorises it."""
    zero, lo, hi = np.float32(0), np.float32(-128), np.float32(127)
    for j in range(src.shape[0]):
        v = (src[j] - sub[j]) / span[j] / scale
        v = v if v == v else zero
        r = np.rint(v)                 # rint(clamp(v)) == clamp(rint(v)): the bounds are integers
        r = r if r > lo else lo
        r = r if r < hi else hi
        q[j] = np.int32(r)


@njit(cache=True, nogil=True, error_model="numpy")
def _cells_block(src, dim, f, cells):
    """cells[i] = idy << 16 | idx of point i of ``src`` (float32[k*dim]), -1 outside the ranges."""
    back, front, right, left, bottom, top, x_scale, y_scale = f[0], f[1], f[2], f[3], f[4], f[5], f[8], f[9]
    zero = np.float32(0)
    valid = 0
    for i in range(cells.shape[0]):
        x, y, z = src[i * dim], src[i * dim + 1], src[i * dim + 2]
        inside = (x > back) & (x < front) & (y > right) & (y < left) & (z > bottom) & (z < top)   # NaN: False
        fx = (x - back) / x_scale
        fy = (y - right) / y_scale
        fx = fx if inside else zero            # inside: fx, fy in [0, grid), so truncation is well defined
        fy = fy if inside else zero
        cells[i] = ((np.int32(fy) << 16) | np.int32(fx)) if inside else np.int32(-1)
        valid += inside
    return valid


@njit(cache=True, nogil=True, error_model="numpy")
def encode(pts, n, dim, f, cells, xyzr, t):
    """Stage 1 over ``n`` points: ``pts`` float32[n*dim]; ``f`` float32[11] in :data:`PARAMS`
    order; writes ``cells`` int32[n], ``xyzr`` int8[4n] and (dim 5) ``t`` int8[n].
    Returns the number of valid points."""
    sub = _columns(dim, np.array([f[0], f[2], f[4], f[6]], np.float32), np.float32(0))
    span = _columns(dim, np.array([f[1] - f[0], f[3] - f[2], f[5] - f[4], f[7] - f[6]], np.float32),
                    np.float32(1))                                       # t - 0 and t / 1 are exact
    q = np.empty(_BLOCK * dim, np.int8)
    valid = 0
    for b0 in range(0, n, _BLOCK):
        k = min(_BLOCK, n - b0)
        src = pts[b0 * dim:(b0 + k) * dim]
        _quantize_block(src, sub[:k * dim], span[:k * dim], f[10], q[:k * dim])
        if dim == 4:
            xyzr[4 * b0:4 * (b0 + k)] = q[:4 * k]
        else:
            for i in range(k):
                for c in range(4):
                    xyzr[4 * (b0 + i) + c] = q[5 * i + c]
                t[b0 + i] = q[5 * i + 4]
        if dim == 4:        # a constant stride: LLVM specialises the inlined loop (2.5x faster than a variable one)
            valid += _cells_block(src, 4, f, cells[b0:b0 + k])
        else:
            valid += _cells_block(src, 5, f, cells[b0:b0 + k])
    return valid

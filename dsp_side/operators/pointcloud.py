"""Pillar preprocessing of LiDAR point clouds (CenterPoint / PointPillars), the two DSP stages.

The J5 split: stage 1 (``pointcloud_encode``) runs per point on the DSP, the voxelization
(pillar ids, first come first served) runs on the ARM side, stage 2
(``pointcloud_transpose``) turns the pillar-major voxel buffer into the model's layout.

Stage 1, for N points of ``dim`` float32 values (input 0, N x dim, row-major):

* output 0, int32[N]: ``idy << 16 | idx`` with ``idx = int((x - back) / x_scale)``,
  ``idy = int((y - right) / y_scale)`` (float32, truncation), or -1 when the point is not
  strictly inside the x, y, z ranges (NaN and infinities included);
* output 1, int32[N]: the quantised x, y, z, r features packed as four int8 bytes
  (byte 0 = x, little-endian); output 2 (5-dim only), int8[N]: the quantised 5th value.
  A feature is ``((v - lo) / (hi - lo)) / scale`` in float32 (the 5th value: ``v / scale``),
  rounded to nearest with ties to even, clamped to [-128, 127]; NaN gives 0.

Stage 2: input 0 int32[P*M] (packed x, y, z, r of pillar p, slot m at p*M + m), input 1
int8[P*M] (5th value, 5-dim only) -> output 0 int8 features, ``cmp`` layout
``[dim][M][stride]`` or ``cpm`` layout ``[dim][stride][M]``. Only the first ``num_pillars``
pillars are read; every other byte of the output (unused pillars, stride padding) is 0.
"""
from __future__ import annotations

import functools

import cv2
import numpy as np

from protocol import errors
from protocol.contract import pointcloud_ops

#: order of the kernel's float32 parameter vector (:data:`pointcloud_jit.PARAMS`, which imports numba)
_PARAM_ORDER = ("back", "front", "right", "left", "bottom", "top", "lower", "upper", "x_scale", "y_scale", "scale")
_GRID_MAX = 32767       # idx and idy must fit the 15 low bits of their half of the packed int32


@functools.cache
def _compiled():
    """The numba kernels (:mod:`pointcloud_jit`), or None without numba. Loaded when the
    firmware loads (:func:`warm`, the init hook), else at the first stage-1 call."""
    from dsp_side.operators import pointcloud_jit
    return pointcloud_jit if pointcloud_jit.AVAILABLE else None


def warm(ctx) -> None:
    """Init hook: import numba and load the cached machine code of stage 1 by running it on a
    few points, with the array types of a real task (read-only input), so the first task after
    boot does not pay it (0.5-0.8 s on 2 CPUs; a cold cache, after an install without
    ``python -m vdsp_sim.pointcloud_inprocess``, compiles for ~10 s here instead)."""
    import time
    t0 = time.perf_counter()
    params = {"back": 0.0, "front": 8.0, "right": 0.0, "left": 8.0, "bottom": -1.0, "top": 1.0,
              "lower": 0.0, "upper": 1.0, "x_scale": 1.0, "y_scale": 1.0, "scale": 0.1}
    for dim in (4, 5):
        n = 8
        pts = np.linspace(0.5, 7.5, n * dim, dtype=np.float32).view(np.uint8)
        pts.flags.writeable = False
        outs = [np.zeros(n * 4, np.uint8), np.zeros(n * 4, np.uint8)] + ([np.zeros(n, np.uint8)] if dim == 5 else [])
        encode(ctx, [pts], outs, dim=dim, num_points=n, **params)
    cells = np.zeros((4, 4), np.int8)
    _transpose_into(cells, np.zeros((4, 4), np.int8))
    if ctx is not None and getattr(ctx, "log", None) is not None:
        ctx.log.info("%s: point-cloud kernels %s in %.0f ms", getattr(ctx, "core", "?"),
                     "loaded" if _compiled() is not None else "(numpy, no numba)", (time.perf_counter() - t0) * 1e3)


def _need(what: str, buf: np.ndarray, nbytes: int) -> None:
    """Raises InvalidArgument when ``buf`` is smaller than ``nbytes``."""
    if buf.size < nbytes:
        raise errors.InvalidArgument(f"{what} holds {buf.size} bytes, needs {nbytes}")


def _view(buf: np.ndarray, dtype, count: int) -> np.ndarray:
    """The first ``count`` items of a DDR byte buffer as ``dtype`` (no copy)."""
    return buf[:count * np.dtype(dtype).itemsize].view(dtype)


def _readonly(view: np.ndarray) -> np.ndarray:
    """``view`` as a read-only array: numba compiles one machine-code version per array type,
    and read-only is one. The firmware's inputs are read-only, a caller's own arrays often not:
    passing every input read-only makes them one signature, the one compiled at install."""
    view = view.view()
    view.flags.writeable = False
    return view


def _float32(params: dict) -> dict:
    """float32 copies of the float parameters. Raises InvalidArgument for empty ranges,
    non-positive scales or a pseudo-image too large for the 16-bit packing."""
    f = {k: np.float32(v) for k, v in params.items() if k not in ("dim", "num_points")}
    for name, v in f.items():
        if not np.isfinite(v):
            raise errors.InvalidArgument(f"{name} {params[name]} overflows float32")
    for lo, hi in (("back", "front"), ("right", "left"), ("bottom", "top"), ("lower", "upper")):
        if not f[hi] - f[lo] > 0:
            raise errors.InvalidArgument(f"{hi} ({params[hi]}) must be greater than {lo} ({params[lo]})")
    for name in ("x_scale", "y_scale", "scale"):
        if not f[name] > 0:
            raise errors.InvalidArgument(f"{name} must be > 0, got {params[name]}")
    for lo, hi, cell in (("back", "front", "x_scale"), ("right", "left", "y_scale")):
        top = np.nextafter(f[hi], np.float32(-np.inf), dtype=np.float32)
        if (top - f[lo]) / f[cell] >= _GRID_MAX:
            raise errors.InvalidArgument(f"({lo}, {hi}) / {cell} gives more than {_GRID_MAX} cells")
    return f


def _cells(pts: np.ndarray, shifted: np.ndarray, f: dict) -> np.ndarray:
    """Packed cell index per point, -1 outside the open ranges (NaN compares false).
    ``shifted`` holds x - back and y - right (float32) in its first two columns."""
    x, y, z = pts[:, 0], pts[:, 1], pts[:, 2]
    inside = (x > f["back"]) & (x < f["front"])
    inside &= (y > f["right"]) & (y < f["left"])
    inside &= (z > f["bottom"]) & (z < f["top"])
    idx = (shifted[:, 0] / f["x_scale"]).astype(np.int32)       # truncation toward zero
    idy = (shifted[:, 1] / f["y_scale"]).astype(np.int32)
    np.left_shift(idy, 16, out=idy)
    idy |= idx
    return np.where(inside, idy, np.int32(-1))


_BLOCK = 256     # points per row of the blocked view: long inner loops for numpy


def _per_column(ufunc, src: np.ndarray, vec: np.ndarray, out: np.ndarray) -> None:
    """``out = ufunc(src, vec)`` for an N x dim array and a dim vector, through a
    (N / block) x (block * dim) view so numpy's inner loop is long (same float32 results)."""
    n, dim = src.shape
    head = n - n % _BLOCK
    if head:
        wide = (head // _BLOCK, _BLOCK * dim)
        ufunc(src[:head].reshape(wide), np.tile(vec, _BLOCK), out=out[:head].reshape(wide))
    ufunc(src[head:], vec, out=out[head:])


def _shift(pts: np.ndarray, f: dict, dim: int) -> np.ndarray:
    """v - lo of every value (float32, N x dim); the 5th value minus 0 is itself."""
    sub = np.array([f["back"], f["right"], f["bottom"], f["lower"], 0][:dim], np.float32)
    out = np.empty(pts.shape, np.float32)
    _per_column(np.subtract, pts, sub, out)
    return out


def _features(out: np.ndarray, f: dict, dim: int) -> np.ndarray:
    """Shifted values -> float32 features rounded to integers in [-128, 127] (NaN -> 0), in place."""
    span = np.array([f["front"] - f["back"], f["left"] - f["right"], f["top"] - f["bottom"],
                     f["upper"] - f["lower"], 1][:dim], np.float32)        # t / 1 == t exactly
    _per_column(np.divide, out, span, out)
    out /= f["scale"]
    np.copyto(out, 0, where=np.isnan(out))              # NaN -> 0 (only r, t of a kept point can be NaN)
    np.rint(out, out=out)                               # ties to even
    np.clip(out, -128, 127, out=out)
    return out


_CHECKED: dict = {}      # stage-1 parameters -> (float32 dict, float32 vector): checked once per set


def _checked(floats: dict) -> tuple[dict, np.ndarray]:
    """:func:`_float32` of ``floats`` and the kernel's parameter vector, remembered per parameter
    set (the same from task to task; checking them cost ~25 µs of every task). Raises as it does."""
    key = tuple(sorted(floats.items()))
    hit = _CHECKED.get(key)
    if hit is None:
        f = _float32(floats)
        hit = (f, np.array([f[k] for k in _PARAM_ORDER], np.float32))
        if len(_CHECKED) >= 64:
            _CHECKED.clear()
        _CHECKED[key] = hit
    return hit


def _encode_checks(inputs, outputs, dim: int, n: int, floats: dict) -> tuple[dict, np.ndarray]:
    """Stage 1's checks of parameters and buffer sizes (Python and C kernel alike): the float32
    parameters and the kernel's vector. Raises InvalidArgument."""
    f, vec = _checked(floats)
    _need("input 0 (points)", inputs[0], n * dim * 4)
    _need("output 0 (cells)", outputs[0], n * 4)
    _need("output 1 (packed xyzr)", outputs[1], n * 4)
    if (dim == 5) != (len(outputs) == 3):
        raise errors.InvalidArgument(f"dim {dim} takes {3 if dim == 5 else 2} outputs, got {len(outputs)}")
    if dim == 5:
        _need("output 2 (5th value)", outputs[2], n)
    return f, vec


def encode(ctx, inputs, outputs, dim, num_points, **floats):
    """Stage 1: packed pseudo-image cell and quantised features of every point."""
    n = num_points
    f, vec = _encode_checks(inputs, outputs, dim, n, floats)
    jit = _compiled()
    if jit is not None:
        t = _view(outputs[2 if dim == 5 else 1], np.int8, n if dim == 5 else 0)   # same array type either way
        valid = jit.encode(_readonly(_view(inputs[0], np.float32, n * dim)), n, dim, vec,
                           _view(outputs[0], np.int32, n), _view(outputs[1], np.int8, n * 4), t)
        return {"points": n, "valid": int(valid)}
    pts = _view(inputs[0], np.float32, n * dim).reshape(n, dim)
    with np.errstate(all="ignore"):                     # NaN/inf points: their lanes are discarded
        shifted = _shift(pts, f, dim)
        cells = _cells(pts, shifted, f)
        feats = _features(shifted, f, dim)
        _view(outputs[0], np.int32, n)[:] = cells
        np.copyto(_view(outputs[1], np.int8, n * 4).reshape(n, 4), feats[:, :4], casting="unsafe")
        if dim == 5:
            np.copyto(_view(outputs[2], np.int8, n), feats[:, 4], casting="unsafe")
    return {"points": n, "valid": int(np.count_nonzero(cells >= 0))}


def _transpose_into(src: np.ndarray, dst: np.ndarray) -> None:
    """``dst[:] = src.T`` through OpenCV's blocked transpose (rows of ``dst`` may be strided)."""
    if src.size == 0:
        return
    got = cv2.transpose(src, dst=dst)
    if not np.may_share_memory(got, dst):          # OpenCV reallocated instead of writing in place
        dst[:] = got


def _write_cmp(out: np.ndarray, xyzr: np.ndarray, t: np.ndarray | None, used: int, m: int) -> None:
    """out[c, s, p] = byte c of point slot s of pillar p: one transpose of the (used x 4m)
    byte matrix gives row 4s + c per (c, s)."""
    rows = np.empty((4 * m, used), np.int8)
    _transpose_into(xyzr.reshape(used, 4 * m), rows)
    for c in range(4):
        out[c, :, :used] = rows[c::4]
    if t is not None:
        _transpose_into(t.reshape(used, m), out[4, :, :used])


def _write_cpm(out: np.ndarray, xyzr: np.ndarray, t: np.ndarray | None, used: int, m: int) -> None:
    """out[c, p, s] = byte c of point slot s of pillar p: the (used*m x 4) byte matrix transposed."""
    planes = out.reshape(out.shape[0], -1)
    _transpose_into(xyzr.reshape(used * m, 4), planes[:4, :used * m])
    if t is not None:
        planes[4, :used * m] = t


def _transpose_checks(inputs, outputs, dim, max_pillars, max_points, pillar_stride, num_pillars) -> None:
    """Stage 2's checks of parameters and buffer sizes (Python and C kernel alike). Raises InvalidArgument."""
    if pillar_stride < max_pillars:
        raise errors.InvalidArgument(f"pillar_stride {pillar_stride} is smaller than max_pillars {max_pillars}")
    if num_pillars > max_pillars:
        raise errors.InvalidArgument(f"num_pillars {num_pillars} exceeds max_pillars {max_pillars}")
    if (dim == 5) != (len(inputs) == 2):
        raise errors.InvalidArgument(f"dim {dim} takes {2 if dim == 5 else 1} inputs, got {len(inputs)}")
    cap, m = max_pillars * max_points, max_points
    _need("input 0 (voxel xyzr)", inputs[0], cap * 4)
    if dim == 5:
        _need("input 1 (voxel 5th value)", inputs[1], cap)
    _need("output 0 (features)", outputs[0], dim * m * pillar_stride)


def transpose(ctx, inputs, outputs, dim, layout, max_pillars, max_points, pillar_stride, num_pillars):
    """Stage 2: pillar-major voxel buffer -> features in the model's layout (zeros elsewhere)."""
    _transpose_checks(inputs, outputs, dim, max_pillars, max_points, pillar_stride, num_pillars)
    used, m = num_pillars, max_points
    shape = (dim, m, pillar_stride) if layout == "cmp" else (dim, pillar_stride, m)
    out = outputs[0][:dim * m * pillar_stride].view(np.int8).reshape(shape)
    xyzr = inputs[0][:used * m * 4].view(np.int8)
    t = inputs[1][:used * m].view(np.int8) if dim == 5 else None
    # a task may name one buffer as input and output: read what it held before writing
    # (OpenCV's transpose also refuses a non-square matrix onto itself)
    xyzr = xyzr.copy() if np.may_share_memory(xyzr, out) else xyzr
    t = t.copy() if t is not None and np.may_share_memory(t, out) else t
    if layout == "cmp":
        out[:, :, used:] = 0
    else:
        out[:, used:, :] = 0
    (_write_cmp if layout == "cmp" else _write_cpm)(out, xyzr, t, used, m)
    return {"pillars": used}


def encode_c(kernel, ctx, inputs, outputs, dim, num_points, **floats):
    """Stage 1 by its C kernel (``kernel``: the stock image's ``pointcloud_encode.cc``): the
    checks and the result of :func:`encode`, the same bytes. The kernel counts the valid points
    (its result ``valid``); a library built before it did is counted here."""
    _encode_checks(inputs, outputs, dim, num_points, floats)
    valid = kernel(ctx, inputs, outputs, dim=dim, num_points=num_points, **floats).get("valid")
    if valid is None:
        valid = np.count_nonzero(_view(outputs[0], np.int32, num_points) >= 0)
    return {"points": num_points, "valid": int(valid)}


def transpose_c(kernel, ctx, inputs, outputs, **params):
    """Stage 2 by its C kernel (the stock image's ``pointcloud_transpose.c``): the checks and the
    result of :func:`transpose`, the same bytes. An input that shares memory with the output
    (one buffer named twice) is copied first: the kernel reads what it held before any write."""
    _transpose_checks(inputs, outputs, params["dim"], params["max_pillars"], params["max_points"],
                      params["pillar_stride"], params["num_pillars"])
    slots = params["num_pillars"] * params["max_points"]
    ins = [a[:slots * w].copy() if np.may_share_memory(a, outputs[0]) else a for a, w in zip(inputs, (4, 1))]
    kernel(ctx, ins, outputs, **params)
    return {"pillars": params["num_pillars"]}


def register(registry) -> None:
    """Bind the Python/numba kernels to their entries (``protocol.contract.pointcloud_ops``): the
    reference of the C kernels, and the DSP path of an image without them."""
    registry.bind(pointcloud_ops.ENCODE, encode, init=warm)
    registry.bind(pointcloud_ops.TRANSPOSE, transpose)


def register_c(registry, firmware_file: str) -> None:
    """Bind the C kernels of the image beside ``firmware_file`` (the stock image's
    ``pointcloud_encode.cc`` and ``pointcloud_transpose.c``) to the entries, behind the Python
    checks (:func:`encode_c`, :func:`transpose_c`)."""
    from dsp_side import ckernel
    ckernel.bind(registry, pointcloud_ops.ENCODE, "pointcloud_encode_kernel", firmware_file, around=encode_c)
    ckernel.bind(registry, pointcloud_ops.TRANSPOSE, "pointcloud_transpose_kernel", firmware_file,
                 around=transpose_c)

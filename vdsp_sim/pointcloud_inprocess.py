"""The DSP path's three steps called directly in one process (no SoC): for kernel tests
and for compiling the numba kernels ahead of time (``python -m vdsp_sim.pointcloud_inprocess``).
The DSP stages run as the Python/numba kernels (``impl="python"``) or as the stock image's C
kernels (``impl="c"``, :func:`c_kernels`), the same bytes."""
from __future__ import annotations

import functools
import logging
import sys
import types

import numpy as np

from arm_side.pointcloud.params import preset
from arm_side.pointcloud.voxelize import Voxelizer
from dsp_side.operators import pointcloud as ops


@functools.cache
def c_kernels() -> tuple:
    """(encode, transpose): the stock image's point-cloud operators with their C kernels, as the
    firmware calls them (``fn(ctx, inputs, outputs, **params)``), the kernel library compiled
    once per process. Raises ImageError (no compiler, a source that does not compile)."""
    from dsp_side import fw_image
    from dsp_side.firmware_src.stock import firmware as stock
    from protocol.contract import pointcloud_ops
    _, registry = fw_image.registry_of_source(stock, "stock")
    ctx = types.SimpleNamespace(core="inprocess", state=None, log=logging.getLogger("vdsp.op.inprocess"))
    specs = [registry.get(e.id) for e in (pointcloud_ops.ENCODE, pointcloud_ops.TRANSPOSE)]
    for spec in specs:
        if spec.init is not None:           # (ckernel.bind always sets it: it loads the library)
            spec.init(ctx)
    return tuple(functools.partial(spec.fn, ctx) for spec in specs)


def stages(impl: str) -> tuple:
    """(encode, transpose) as ``fn(inputs, outputs, **params)``: "python" (numba) or "c"."""
    if impl == "c":
        return c_kernels()
    return functools.partial(ops.encode, None), functools.partial(ops.transpose, None)


def run(points: np.ndarray, p, impl: str = "python") -> tuple[np.ndarray, np.ndarray]:
    """(coords, features) of ``points`` with preset/parameters ``p``, the operators (``impl``:
    :func:`stages`) run on byte buffers."""
    encode, transpose = stages(impl)
    n, dim = len(points), p.dim
    src = np.ascontiguousarray(points, np.float32).view(np.uint8).reshape(-1)
    cells, xyzr, t = np.zeros(n * 4, np.uint8), np.zeros(n * 4, np.uint8), np.zeros(n, np.uint8)
    encode([src], [cells, xyzr] + ([t] if dim == 5 else []), num_points=n, **p.encode_params())
    cap = p.max_pillars * p.max_points
    coords = np.zeros((p.max_pillars, 4), np.int32)
    vx, vt = np.full(cap, 0x55555555, np.int32), np.full(cap, 0x55, np.int8)     # garbage must not leak
    used = Voxelizer(p).run(cells.view(np.int32), xyzr.view(np.int32), t.view(np.int8) if dim == 5 else None,
                            coords, vx, vt if dim == 5 else None)
    feats = np.full(int(np.prod(p.feature_shape)), 0x77, np.uint8)
    transpose([vx.view(np.uint8)] + ([vt.view(np.uint8)] if dim == 5 else []), [feats], **p.transpose_params(used))
    return coords.reshape(p.coords_shape), feats.view(np.int8).reshape(p.feature_shape)


def main() -> int:
    """Compile (and cache) the point-cloud kernels: run both presets once on a tiny cloud."""
    from arm_side.pointcloud import synthetic
    for name in ("centerpoint", "pointpillar"):
        p = preset(name)
        run(synthetic.generate(20000, p.dim, seed=0), p)
    print("point-cloud kernels ready", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

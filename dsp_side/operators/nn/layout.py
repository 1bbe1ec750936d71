"""Layout conversion between NCHW, NHWC and RKNPU's NC1HWC2, honouring strides.

NC1HWC2 has the 5-D valid shape [N, C1, H, W, C2] with C1 = ceil(C / C2): channel c
lives in block c // C2, lane c % C2. Converting into NC1HWC2 writes zeros in the
lanes of the last block beyond C; converting out of it never reads them. Same-layout
conversion repacks (pads or unpads) a tensor between two stride sets.
C2 comes from the platform table (``C2_TABLE``) on the ARM side; when ``platform`` is
given the firmware checks it too.
"""
from __future__ import annotations

import numpy as np

from protocol import errors
from dsp_side.operators.nn import tensor
from protocol.contract.tensor_types import C2_TABLE, c2_class

PLANAR = ("NCHW", "NHWC")




def to_nchw(x: np.ndarray, layout: str, channels: int) -> np.ndarray:
    """A (possibly strided) NCHW view or copy of ``x`` holding only the ``channels`` valid channels."""
    if layout == "NCHW":
        return x
    if layout == "NHWC":
        return x.transpose(0, 3, 1, 2)
    n, c1, h, w, c2 = x.shape
    return x.transpose(0, 1, 4, 2, 3).reshape(n, c1 * c2, h, w)[:, :channels]


def store(y: np.ndarray, layout: str, nchw: np.ndarray) -> None:
    """Write NCHW values into ``y`` of ``layout``; zeros in NC1HWC2 padding lanes."""
    if layout == "NCHW":
        y[...] = nchw
    elif layout == "NHWC":
        y[...] = nchw.transpose(0, 2, 3, 1)
    else:
        n, c1, h, w, c2 = y.shape
        c = nchw.shape[1]
        for b in range(c1):  # one block of C2 channels at a time: y[:, b] is [N, H, W, C2]
            lanes = min(c2, c - b * c2)
            y[:, b, :, :, :lanes] = nchw[:, b * c2:b * c2 + lanes].transpose(0, 2, 3, 1)
            if lanes < c2:
                y[:, b, :, :, lanes:] = 0


def _nchw_shape(t: tensor.TensorDesc, channels: int) -> tuple:
    s = t.shape
    if t.layout == "NCHW":
        return s
    if t.layout == "NHWC":
        return (s[0], s[3], s[1], s[2])
    return (s[0], channels, s[2], s[3])


def _channels(src: tensor.TensorDesc, dst: tensor.TensorDesc, channels: int) -> int:
    planar = src if src.layout in PLANAR else dst if dst.layout in PLANAR else None
    if planar is not None:
        c = planar.shape[1] if planar.layout == "NCHW" else planar.shape[3]
        if channels not in (-1, c):
            raise errors.InvalidArgument(f"layout: parameter 'channels' = {channels} differs from the {c} "
                                         f"channels of {planar.name}")
        return c
    if channels < 1:
        raise errors.InvalidArgument("layout: parameter 'channels' is required between two NC1HWC2 tensors")
    return channels


def _check_blocked(t: tensor.TensorDesc, channels: int, platform: str) -> None:
    n, c1, h, w, c2 = t.shape
    if c1 != -(-channels // c2):
        raise errors.InvalidArgument(f"{t.name}.valid_shape: C1 = {c1} but ceil(C / C2) = ceil({channels} / {c2}) "
                                     f"= {-(-channels // c2)}")
    if platform:
        want = C2_TABLE[platform].get(c2_class(t.dtype_name))
        if want is None:
            raise errors.InvalidArgument(f"{t.name}.dtype: {platform} has no NC1HWC2 form for {t.dtype_name}")
        if c2 != want:
            raise errors.InvalidArgument(f"{t.name}.valid_shape: C2 = {c2} but {platform} uses C2 = {want} "
                                         f"for {t.dtype_name}")


def convert(ctx, inputs, outputs, input, output, channels, platform):
    """Convert between NCHW, NHWC and NC1HWC2 (or repack one layout between strides)."""
    src, dst = tensor.parse("input", input), tensor.parse("output", output)
    for t in (src, dst):
        tensor.require(t, layouts=("NCHW", "NHWC", "NC1HWC2"), ndim=5 if t.layout == "NC1HWC2" else 4)
    if src.dtype_name != dst.dtype_name:
        raise errors.InvalidArgument(f"output.dtype: {dst.dtype_name} differs from input.dtype {src.dtype_name}; "
                                     "layout conversion does not convert types")
    c = _channels(src, dst, channels)
    for t in (src, dst):
        if t.layout == "NC1HWC2":
            _check_blocked(t, c, platform)
    if _nchw_shape(src, c) != _nchw_shape(dst, c):
        raise errors.InvalidArgument(f"output.valid_shape: {list(dst.shape)} ({dst.layout}) does not hold the "
                                     f"tensor {list(src.shape)} ({src.layout}) with {c} channels")
    store(dst.view(outputs[0]), dst.layout, to_nchw(src.view(inputs[0]), src.layout, c))
    return {"channels": c}

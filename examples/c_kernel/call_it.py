"""Call the C kernel of examples/c_kernel on vdsp1 (docs/dsp_kernels.md) on shared memory, and
check its output and its result (the bytes it clipped) against numpy."""
import numpy as np

from arm_side import CLEAN, CORE_1, INVALIDATE, Soc

AFFINE_U8 = 0x1410
n, gain, bias = 100_000, 300, -20
data = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
mapped = ((data.astype(np.int64) * gain + 128) >> 8) + bias
reference = np.clip(mapped, 0, 255).astype(np.uint8)
clipped = int(((mapped < 0) | (mapped > 255)).sum())

with Soc() as soc:
    src, dst = soc.mem.alloc_cached(n), soc.mem.alloc_cached(n)
    src.array()[:] = data
    src.flush(CLEAN)                      # make the CPU's writes visible to the DSP
    values = soc.call(AFFINE_U8, [src], [dst], {"gain": gain, "bias": bias}, core=CORE_1)
    dst.flush(INVALIDATE)                 # make the DSP's writes visible to the CPU
    same = bool((dst.array()[:n] == reference).all())
    print(f"affine_u8 on {n} bytes: {'matches' if same else 'DIFFERS FROM'} numpy")
    print(f"clipped: {values['clipped']} bytes (numpy: {clipped})")
    src.free()
    dst.free()

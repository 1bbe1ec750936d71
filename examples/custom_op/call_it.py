"""Call the custom operator of examples/custom_op on vdsp1 (step 3 of the README tutorial),
through its typed stub: ``custom_op_stubs.py`` was written by
``vdsp firmware stubs build/image/vdsp1 -o examples/custom_op/custom_op_stubs.py``."""
import numpy as np

from arm_side import CLEAN, CORE_1, INVALIDATE, Soc
from custom_op_stubs import saturate_add      # typed: saturate_add(soc, src, dst, *, delta: int, ...) -> Task

with Soc() as soc:
    src, dst = soc.mem.alloc_cached(8), soc.mem.alloc_cached(8)
    src.array()[:] = np.array([0, 1, 100, 200, 250, 255, 7, 9], dtype=np.uint8)
    src.flush(CLEAN)                      # make the CPU's writes visible to the DSP
    for delta in (10, 10, -5):            # the same shape twice, then another delta: prepare runs again
        result = saturate_add(soc, src, dst, delta=delta, core=CORE_1).wait(1000)
        dst.flush(INVALIDATE)             # make the DSP's writes visible to the CPU
        print(f"delta {delta}: {result} output: {dst.array().tolist()}")

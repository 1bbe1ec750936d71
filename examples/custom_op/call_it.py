"""Call the custom operator of examples/custom_op on vdsp1 (step 3 of the README tutorial)."""
import numpy as np

from arm_side import CLEAN, CORE_1, INVALIDATE, Soc

SATURATE_ADD = 0x1400   # the command id the operator registered

with Soc() as soc:
    src, dst = soc.mem.alloc_cached(8), soc.mem.alloc_cached(8)
    src.array()[:] = np.array([0, 1, 100, 200, 250, 255, 7, 9], dtype=np.uint8)
    src.flush(CLEAN)                      # make the CPU's writes visible to the DSP
    for delta in (10, 10, -5):            # the same shape twice, then another delta: prepare runs again
        result = soc.rpc(SATURATE_ADD, inputs=[src], outputs=[dst], params={"delta": delta}, core=CORE_1).wait(1000)
        dst.flush(INVALIDATE)             # make the DSP's writes visible to the CPU
        print(f"delta {delta}: {result} output: {dst.array().tolist()}")

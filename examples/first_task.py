import numpy as np
from arm_side import Soc, CLEAN, INVALIDATE, CORE_ANY, CORE_1, opids

with Soc() as soc:                                   # relay mode; Soc(mode="direct") or VDSP_RPC_MODE=direct
    src = soc.mem.alloc_cached(1 << 20)              # hbSysAllocCachedMem
    dst = soc.mem.alloc(1 << 20)                     # hbSysAllocMem (uncached)
    src.array(np.uint8)[:] = 7
    src.flush(CLEAN)                                 # without this the DSP reads stale DDR
    task = soc.rpc(cmd=opids.MEMCPY, inputs=[src], outputs=[dst], core=CORE_ANY, priority=0)
    print(task.wait(timeout_ms=1000), task.core)     # {'bytes': 1048576} vdsp0
    soc.rpc(opids.FILL, outputs=[src], params={"value": 1}, core=CORE_1).wait(1000)
    src.flush(INVALIDATE)                            # DSP writes reach a cached view only now

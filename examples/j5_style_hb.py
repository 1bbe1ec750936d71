"""A J5 DSP sample's ARM side, ported line by line with arm_side.hb (Horizon names, return
codes): allocate cached memory, write an image, flush, run gaussianBlur on vdsp1, wait,
invalidate, read, compare with cv2, free. docs/hb.md shows the Pythonic equivalent.

    .venv/bin/vdsp up -d
    .venv/bin/python examples/j5_style_hb.py
    .venv/bin/vdsp down
"""
import sys

import cv2
import numpy as np

from arm_side import cv, hb

W, H = 640, 480


def check(ret: int, what: str) -> None:
    if ret != 0:
        print(f"{what} failed: {ret} {hb.hbDNNGetErrorDesc(ret)} ({hb.last_error()})")
        sys.exit(1)


def main() -> int:
    gray = cv2.GaussianBlur(np.random.default_rng(1).integers(0, 256, (H, W), dtype=np.uint8), (0, 0), 2)
    src, dst = hb.hbSysMem(), hb.hbSysMem()
    check(hb.hbSysAllocCachedMem(src, W * H), "hbSysAllocCachedMem")
    check(hb.hbSysAllocCachedMem(dst, W * H), "hbSysAllocCachedMem")
    src.virAddr[:] = gray.ravel()
    check(hb.hbSysFlushMem(src, hb.HB_SYS_MEM_CACHE_CLEAN), "hbSysFlushMem")

    task, ctrl = hb.hbDSPTask_t(), hb.hbDSPRpcCtrlParam()
    hb.HB_DSP_INITIALIZE_RPC_CTRL_PARAM(ctrl)
    ctrl.dspCoreId = hb.HB_DSP_CORE_1
    image = {"format": "Y", "width": W, "height": H, "stride": W}
    params = {"src": image, "dst": image, "ksize": [5, 5], "sigma_x": 1.5, "sigma_y": 0.0, "border": "reflect101"}
    check(hb.hbDSPRpcV2(task, src, dst, cv.ids.GAUSSIAN_BLUR, ctrl, params=params), "hbDSPRpcV2")
    check(hb.hbDSPWaitTaskDone(task, 5000), "hbDSPWaitTaskDone")
    print(f"gaussianBlur ran on {task.value.core} in {task.value.exec_us} us")
    check(hb.hbDSPReleaseTask(task), "hbDSPReleaseTask")

    check(hb.hbSysFlushMem(dst, hb.HB_SYS_MEM_CACHE_INVALIDATE), "hbSysFlushMem")
    out = dst.virAddr.reshape(H, W).copy()
    same = np.array_equal(out, cv2.GaussianBlur(gray, (5, 5), 1.5))
    print("same as cv2.GaussianBlur" if same else "DIFFERS from cv2.GaussianBlur")

    ret = hb.hbSysFlushMem(dst, 7)                       # a wrong flag: a code, not an exception
    print(f"hbSysFlushMem(dst, 7) = {ret}: {hb.hbDNNGetErrorDesc(ret)}")
    check(hb.hbSysFreeMem(src), "hbSysFreeMem")
    check(hb.hbSysFreeMem(dst), "hbSysFreeMem")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

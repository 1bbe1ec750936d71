"""The firmware keeps its working memory between tasks (dsp_side/heap.py): an operator's
temporaries are not mapped afresh, page by page, on every task."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arm_side import CORE_0, Soc, cv

pytestmark = pytest.mark.live


def _minor_faults(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7])        # minflt (field 10 of proc(5); fields[0] is field 3)


@pytest.mark.exclusive     # it counts the firmware's page faults: no other test of a parallel run beside it
def test_repeated_canny_does_not_fault_its_temporaries_in_again(shared_soc):
    w, h = 1920, 1080
    pixels = (np.add.outer(np.arange(h) // 7, np.arange(w) // 5) % 256).astype(np.uint8)
    with Soc() as soc:
        src, dst = cv.write_image(soc, pixels, "Y"), cv.alloc_image(soc, "Y", w, h)
        for _ in range(3):       # warm-up: the heap grows to the operator's working set once
            cv.canny(soc, src, dst, 60, 160, core=CORE_0)
        pid = shared_soc.fw_pid("vdsp0")
        rounds = []
        for _ in range(3):       # the quietest of three rounds: the host may reclaim pages under load
            before = _minor_faults(pid)
            tasks = 10
            for _ in range(tasks):
                cv.canny(soc, src, dst, 60, 160, core=CORE_0)
            rounds.append((_minor_faults(pid) - before) / tasks)
        per_task = min(rounds)
    # Canny's temporaries on 1920x1080 span hundreds of 4 KiB pages; mapped per task they
    # fault in every time, in every round. Kept on the heap, a task touches pages already there.
    assert per_task < 50, f"{rounds} page faults per Canny task in the firmware"

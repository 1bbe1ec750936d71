"""A client that truncates its own buffer's file under the firmware gets an error, not a dead core."""
from __future__ import annotations

import os

import pytest

from arm_side import CORE_0, Soc, errors, opids
from vdsp_board.memory import ddr

pytestmark = pytest.mark.live


def vdsp0(soc) -> dict:
    return next(c for c in soc.query("cores")["cores"] if c["name"] == "vdsp0")


def test_truncated_buffer_fails_the_task_and_the_firmware_survives(live_soc):
    fw_pid = live_soc.fw_pid("vdsp0")
    with Soc() as soc:
        crashes = vdsp0(soc)["crash_count"]
        buf = soc.mem.alloc(64 * 1024)
        assert soc.call(opids.FILL, outputs=[buf], params={"value": 7}, core=CORE_0) == {"bytes": 64 * 1024}
        soc.call(opids.CHECKSUM, inputs=[buf], core=CORE_0)   # the firmware has it mapped now
        path = os.path.join(ddr.shm_dir(), ddr.segment_name(*ddr.parse_phys(buf.phys_addr)))
        fd = os.open(path, os.O_RDWR)
        os.ftruncate(fd, 0)                                   # never touch buf's memory again
        os.close(fd)
        for op, kw in [(opids.FILL, dict(outputs=[buf], params={"value": 9})),
                       (opids.CHECKSUM, dict(inputs=[buf]))]:
            with pytest.raises(errors.VdspError) as exc:
                soc.call(op, core=CORE_0, **kw)
            assert exc.value.code == -6000282, exc.value     # HB_DSP_HANDLE_OUT_OF_BOUNDS
            assert "of 0 bytes" in str(exc.value)
        assert soc.rpc(opids.PING, core=CORE_0).wait(5000) == {"core": "vdsp0"}
        assert vdsp0(soc)["crash_count"] == crashes
        assert live_soc.fw_pid("vdsp0") == fw_pid
        buf.free()

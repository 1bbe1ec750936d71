"""Kernel-style log of remoteproc transitions, readable by ``vdsp dmesg``.

Lines go to the process log and are appended to ``$VDSP_RUNTIME_DIR/dmesg`` as
``[    12.345678] remoteproc remoteproc1: remote processor vdsp0 is now up``
(vdsp0 is remoteproc1 and vdsp1 remoteproc2, as on the J5).
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

log = logging.getLogger("vdsp.kmsg")


def device_node(core: str) -> str:
    """remoteprocN of a core: vdsp0 -> remoteproc1."""
    digits = "".join(ch for ch in core if ch.isdigit())
    return f"remoteproc{int(digits) + 1}" if digits else "remoteproc0"


class Kmsg:
    def __init__(self, rt: Path, core: str) -> None:
        self.path = rt / "dmesg"
        self.node = device_node(core)

    def write(self, text: str) -> None:
        log.info("%s", text)
        line = f"[{time.clock_gettime(time.CLOCK_BOOTTIME):12.6f}] remoteproc {self.node}: {text}\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

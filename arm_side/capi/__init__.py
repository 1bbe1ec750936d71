"""The C face of the SDK: hb_sys.h, hb_dsp.h and hb_dnn.h, and libvdsp_hb which implements them.

``include/`` holds the headers (``hb_dsp_ops.h`` is generated from the operator contract by
:mod:`arm_side.capi.opsgen`); ``glue.c`` and ``capi.cdef`` are the library's C half, built with
cffi's embedding mode by ``vdsp capi --build`` (``vdsp_sim.capi_build``, run by
``scripts/venv.sh``); :mod:`arm_side.capi.bridge` is its Python half. docs/capi.md shows how to
build a program against it.
"""
from __future__ import annotations

from pathlib import Path

DIR = Path(__file__).resolve().parent
INCLUDE = DIR / "include"

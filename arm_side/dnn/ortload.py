"""ONNX Runtime (the BPU of hbDNN models), imported with its telemetry off unless the user chose.

onnxruntime 1.29 and later, on Linux, opens a telemetry session at import: a ``.ses`` file in
``$TMPDIR``, a database under ``~/.cache/Microsoft/DeveloperTools``, and usage events uploaded to
Microsoft. A simulator runs in CI, in containers and in labs without internet: it must not call
out, and must leave nothing behind. So ``ORT_DISABLE_TELEMETRY=1`` goes into this process's
environment (and its children's) before onnxruntime's first import, unless the environment
already names it (``ORT_DISABLE_TELEMETRY=0`` keeps onnxruntime's default). Every module of ours
imports onnxruntime from here: ``from arm_side.dnn.ortload import onnxruntime``.
"""
from __future__ import annotations

import os

from vdsp_board.config import settings

TELEMETRY_VAR = "ORT_DISABLE_TELEMETRY"

if TELEMETRY_VAR not in os.environ:
    settings.export({TELEMETRY_VAR: "1"})

import onnxruntime  # noqa: E402  (after the setting: onnxruntime reads it when it loads)

__all__ = ["onnxruntime", "TELEMETRY_VAR"]

"""The runtime's environment variables (BPU SDK manual, "common environment variables").

==========================  ===========================================================
``HB_DNN_LOG_LEVEL``        0 none, 3 warning (default), 4 error, 5 fatal: a line is shown
                            when its level >= the setting; ``A`` lines at every level but 0.
                            1 (debug) and 2 (info) also work here.
``HB_DNN_ENABLE_DSP``       ``1``: Quantize/Dequantize (and the DSP plugin's layers) run on
                            vdsp0/vdsp1 by RPC; ``0`` or unset: on the ARM side.
``HB_DNN_PLUGIN_PATH``      a directory of layer plugins (``*.py``, see ``plugin.py``).
``HB_DNN_PROFILER_LOG_PATH``  a directory: per-layer times are written there as JSON.
==========================  ===========================================================

Bad values are refused with InvalidArgument naming the variable (FileNotFound for a
directory that does not exist).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Mapping

from protocol import errors

LOG_NONE, LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERROR, LOG_FATAL = 0, 1, 2, 3, 4, 5
DEFAULT_LOG_LEVEL = LOG_WARNING
MAX_PATH = 4096


@dataclasses.dataclass(frozen=True)
class Config:
    log_level: int = DEFAULT_LOG_LEVEL
    enable_dsp: bool = False
    plugin_path: Path | None = None
    profiler_path: Path | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> "Config":
        """Read the variables; a keyword that is not None (``enable_dsp=True``) wins over the
        environment. Raises InvalidArgument, FileNotFound."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {
            "log_level": _log_level(env.get("HB_DNN_LOG_LEVEL", "")),
            "enable_dsp": _flag("HB_DNN_ENABLE_DSP", env.get("HB_DNN_ENABLE_DSP", "")),
            "plugin_path": _path("HB_DNN_PLUGIN_PATH", env.get("HB_DNN_PLUGIN_PATH", "")),
            "profiler_path": _directory("HB_DNN_PROFILER_LOG_PATH", env.get("HB_DNN_PROFILER_LOG_PATH", "")),
        }
        for key, value in overrides.items():
            if key not in values:
                raise errors.InvalidArgument(f"unknown runtime setting {key!r}; known: {sorted(values)}")
            if value is None:
                continue
            if key == "log_level":
                value = _log_level(str(value))
            elif key == "enable_dsp":
                value = bool(value)
            elif key == "plugin_path":
                value = _path("plugin_path", str(value))
            else:
                value = _directory("profiler_path", str(value))
            values[key] = value
        return cls(**values)


def _log_level(raw: str) -> int:
    raw = raw.strip()
    if not raw:
        return DEFAULT_LOG_LEVEL
    if raw not in {"0", "1", "2", "3", "4", "5"}:
        raise errors.InvalidArgument(f"HB_DNN_LOG_LEVEL must be 0 (none), 3 (warning), 4 (error) or 5 (fatal) "
                                     f"(1 debug and 2 info also work), got {raw[:40]!r}")
    return int(raw)


def _flag(name: str, raw: str) -> bool:
    raw = raw.strip()
    if raw in ("", "0"):
        return False
    if raw == "1":
        return True
    raise errors.InvalidArgument(f"{name} must be 0 or 1, got {raw[:40]!r}")


def _path(name: str, raw: str) -> Path | None:
    if not raw:
        return None
    if len(raw) > MAX_PATH or "\0" in raw:
        raise errors.InvalidArgument(f"{name}: not a usable path ({len(raw)} characters)")
    return Path(raw)


def _directory(name: str, raw: str) -> Path | None:
    path = _path(name, raw)
    if path is not None and not path.is_dir():
        raise errors.FileNotFound(f"{name}: {path} is not an existing directory")
    return path

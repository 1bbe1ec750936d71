"""The version of vdsp-sim, from one place: the installed distribution's metadata, which
pyproject.toml's ``version`` sets (``vdsp_sim.__version__``, ``arm_side.__version__`` and every
command's ``--version`` read it here)."""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("vdsp-sim")
except PackageNotFoundError:     # a source tree that was never installed (not even editable)
    __version__ = "0+unknown"

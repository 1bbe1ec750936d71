"""numba's ``njit`` when numba is installed and not disabled, else a no-op decorator.

``VDSP_NO_NUMBA=1`` disables it (the plain numpy code paths run instead; the tests
pass both ways). ``AVAILABLE`` says which one is in force.
"""
from __future__ import annotations

from vdsp_board.config import settings

try:
    if settings.current().no_numba:
        raise ImportError("VDSP_NO_NUMBA is set")
    from numba import njit
    AVAILABLE = True
except ImportError:             # numba missing or disabled: the numpy code runs instead
    AVAILABLE = False

    def njit(*_args, **_kwargs):  # type: ignore[no-redef]
        return lambda fn: fn

__all__ = ["AVAILABLE", "njit"]

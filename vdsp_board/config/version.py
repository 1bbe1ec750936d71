"""The version of vdsp-sim, from one place: the installed distribution's metadata, which
pyproject.toml's ``version`` sets (``vdsp_sim.__version__``, ``arm_side.__version__`` and every
command's ``--version`` read it here).

It is read when first asked for, not at import: ``importlib.metadata`` costs a tenth of a second
of CPU to import, and every process of a SoC and every ``vdsp`` command imports this module while
few of them ever print the version."""
from __future__ import annotations

import functools

__all__ = ["__version__", "version"]     # noqa: F822 (__version__: the module __getattr__ below)


@functools.cache
def version() -> str:
    """The installed distribution's version; ``0+unknown`` in a source tree never installed."""
    from importlib.metadata import PackageNotFoundError, version as _version
    try:
        return _version("vdsp-sim")
    except PackageNotFoundError:     # a source tree that was never installed (not even editable)
        return "0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

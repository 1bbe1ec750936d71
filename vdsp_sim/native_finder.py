"""The import hook of the compiled build: the source of ``_vdsp_native``, which
``python -m vdsp_sim.native_build`` installs into the environment's site-packages.

The build step decides: it compiles ``vdsp_sim.native_build.MODULES`` with mypyc and installs
them beside this finder, with a ``_vdsp_native.pth`` file that imports it when the interpreter
starts; ``--remove`` takes both away. Nothing of the project reads a file to decide at import:
the packages import their modules as usual and, while the build is installed, this finder
answers for the compiled ones (each module and its ``__mypyc`` helper library) before the
path-based finder sees the ``.py`` files.

It stands back, and every module of the build loads from source, in two cases: ``VDSP_NATIVE``
is ``0``/``false``/``no``/``off`` (the pure modules on purpose: a test run, a comparison), or a
source compiled into the build is no longer the file it was then (size or modification time:
one ``stat`` per module, once per process), so an edited module runs as written until
``scripts/venv.sh`` compiles it again. The build is used whole or not at all: compiled modules
call each other directly.

This module imports nothing of the project (it runs at interpreter start-up, before any
package is imported) and reads ``VDSP_NATIVE`` itself; ``vdsp_board.config.settings`` declares it.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

ENV = "VDSP_NATIVE"
OFF = ("0", "false", "no", "off")


class NativeFinder:
    """``modules``: module name -> its extension file (a path relative to ``directory``);
    ``sources``: source file (absolute) -> ``(size, mtime_ns)`` when it was compiled."""

    def __init__(self, directory: str, modules: dict[str, str], sources: dict[str, tuple[int, int]]) -> None:
        self.directory, self.modules, self.sources = directory, modules, sources
        self._why: str | None = None

    def why_not(self, env: str | None = None) -> str:
        """"" when the compiled modules load, else why they do not (decided once per process;
        ``env`` given: decided again for that value of VDSP_NATIVE, and not remembered)."""
        if env is None and self._why is not None:
            return self._why
        text = os.environ.get(ENV, "") if env is None else env
        why = ""
        if text.strip().lower() in OFF:
            why = f"{ENV}={text}"
        else:
            for path, (size, mtime_ns) in self.sources.items():
                try:
                    st = os.stat(path)
                except OSError:
                    why = f"{path} is gone"
                    break
                if (st.st_size, st.st_mtime_ns) != (size, mtime_ns):
                    why = f"{path} changed since it was compiled (bash scripts/venv.sh compiles it again)"
                    break
        if env is None:
            self._why = why
        return why

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        rel = self.modules.get(name)
        if rel is None or self.why_not():
            return None
        origin = os.path.join(self.directory, rel)
        loader = importlib.machinery.ExtensionFileLoader(name, origin)
        return importlib.util.spec_from_file_location(name, origin, loader=loader)

    def invalidate_caches(self) -> None:
        pass


def install(directory: str, modules: dict[str, str], sources: dict[str, tuple[int, int]]) -> NativeFinder:
    """Put a finder for this build first on ``sys.meta_path`` (once)."""
    for finder in sys.meta_path:
        if type(finder).__name__ == "NativeFinder" and getattr(finder, "directory", None) == directory:
            return finder       # type: ignore[return-value]
    finder = NativeFinder(directory, modules, sources)
    sys.meta_path.insert(0, finder)
    return finder

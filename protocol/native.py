"""The optional compiled build of the hot modules: whether it is used, and where it is.

``python -m vdsp_sim.native_build`` (run by ``scripts/venv.sh`` where a C compiler is found)
compiles :data:`MODULES` with mypyc into ``.native/`` at the repository root and writes
``.native/manifest.json``: the sha256 of each source it compiled and the interpreter's tag.
Each package holding one of them calls :func:`use` in its ``__init__``: when that build is
current the package's compiled directory goes first on its ``__path__``, so that
``import protocol.header`` loads the compiled module; otherwise nothing changes and the pure
Python modules run, as they do wherever nothing was built.

The build is used only as a whole, and only if every source is byte for byte the one compiled
(an edited module makes the whole build stale: compiled modules call each other directly),
the interpreter is the one it was built for, ``VDSP_NATIVE`` is not ``0``, and ``.native`` is a
real directory owned by this user and writable by no one else (its files are code we run).
Reading the manifest and hashing the sources happens once per process (about a millisecond).
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIR = ROOT / ".native"
MANIFEST = "manifest.json"
#: the compiled modules, as paths from the repository root (mypy-clean, no monkeypatched names)
MODULES = ("protocol/header.py", "protocol/wire.py", "protocol/ordering.py",
           "relay_server/scheduler.py", "relay_server/engine.py",
           "dsp_side/inbox.py", "vdsp_board/zsock.py")
# Not the SDK's (arm_side): its session parses what peers send through annotated signatures,
# where compiled code raises TypeError for a malformed value the pure module tolerates; compiled,
# it saved under 1 µs of the client's ~17 µs per task.
ENV = "VDSP_NATIVE"     # declared in vdsp_board.settings (as a flag: these values turn it off)
OFF = ("0", "false", "no", "off")

_state: dict[str, str] = {}     # "why": the verdict, computed once


def digests(root: Path = ROOT) -> dict[str, str]:
    """sha256 of each module's source under ``root``; '' for one that cannot be read."""
    out = {}
    for rel in MODULES:
        try:
            out[rel] = hashlib.sha256((root / rel).read_bytes()).hexdigest()
        except OSError:
            out[rel] = ""
    return out


def _private_dir(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def verdict(root: Path = ROOT, directory: Path | None = None, env: str | None = None) -> str:
    """"" when the build in ``directory`` (default ``root/.native``) is to be used, else why not."""
    directory = directory if directory is not None else root / ".native"
    text = env if env is not None else os.environ.get(ENV, "")
    if text and text.strip().lower() in OFF:
        return f"{ENV}={text}"
    if not _private_dir(directory):
        return f"no build in {directory}" if not os.path.lexists(directory) else \
            f"{directory} is not a directory of this user writable only by it"
    try:
        with open(directory / MANIFEST, "rb") as fh:
            manifest = json.loads(fh.read(1 << 20))
    except (OSError, ValueError) as exc:
        return f"no readable manifest in {directory} ({exc})"
    if not isinstance(manifest, dict) or manifest.get("python") != sys.implementation.cache_tag:
        return f"built for another interpreter than {sys.implementation.cache_tag}"
    if manifest.get("sources") != digests(root):
        return "sources changed since the build (stale)"
    return ""


def why_not() -> str:
    """This process's verdict ("" = the compiled build is used), computed once."""
    if "why" not in _state:
        _state["why"] = verdict()
    return _state["why"]


def use(path: list[str], package: str) -> None:
    """Called by ``package``'s ``__init__`` with its ``__path__``: the compiled modules first, if used."""
    if not why_not() and _private_dir(DIR / package):
        compiled = str(DIR / package)
        if compiled not in path:
            path.insert(0, compiled)


def active(module: object) -> bool:
    """Whether ``module`` was loaded from the compiled build."""
    return str(getattr(module, "__file__", "") or "").startswith(str(DIR) + os.sep)

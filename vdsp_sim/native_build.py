"""Build, install or remove the compiled build of the hot modules: ``python -m vdsp_sim.native_build``.

mypyc compiles :data:`MODULES` (one extension per module), the C compiler :data:`C_MODULES`, and
the build is installed into this environment's site-packages as the package ``_vdsp_native``
(the extensions and the import hook ``vdsp_sim/native_finder.py``) with ``_vdsp_native.pth``,
which imports the hook when the interpreter starts: from then on ``import relay_server.engine``
loads the compiled module. The decision is made here, at build time; importing the project
reads nothing to make it.
``scripts/venv.sh`` runs this with ``--if-stale`` in each venv it makes (one per Python
version), so each interpreter has a build of its own.

Everything works without it: where no C compiler, Python headers or mypyc are found, or the
build fails, this says why and exits 0 with the pure Python modules in use (``--strict``: exit
1 instead). ``--if-stale`` returns at once when the installed build was compiled from these
very sources for this interpreter. ``--status`` says whether it is used, ``--remove`` uninstalls it.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from types import ModuleType

from vdsp_sim import ctoolchain

ROOT = Path(__file__).resolve().parent.parent      # where the packages' sources are
#: the compiled modules, as paths from ROOT (mypy-clean, no monkeypatched names; the functions
#: facing peers take what the pure ones take: tests/tools/test_native.py feeds both the same values)
MODULES = ("protocol/header.py", "protocol/wire.py", "protocol/ordering.py",
           "relay_server/scheduler.py", "relay_server/effects.py", "relay_server/engine.py",
           "relay_server/observe.py",
           "dsp_side/inbox.py", "vdsp_board/sockets/zsock.py",
           "dsp_side/fwio.py", "dsp_side/intake.py", "dsp_side/replybatch.py", "dsp_side/handoff.py",
           "dsp_side/firmware.py", "dsp_side/watchdog.py", "vdsp_board/identity/bindings.py",
           "vdsp_board/identity/hellogate.py")
# The firmware's per-task path (its I/O thread's loop, intake, quick path and reply batch, and
# Firmware.run/execute): compiled, each firmware's CPU per no-op task took about 4 µs less (of
# 30: 12 %; alternated SoCs, direct and relay mode; vdsp_sim/benchmarks/README.md). mypyc names
# a C struct member after each attribute: fwio's thread is `_io_thread` (`_thread` gives
# `__thread`, a keyword of GCC's C).
# What those call on every task compiled too (the watchdog word, the connection's binding, the HELLO
# gate's `passes`): as Python they were the I/O thread's only bytecode besides the operator, 17 % of a
# firmware's samples in a pipelined direct run (vdsp_sim/benchmarks/README.md, "Python frames").
# Not the SDK's (arm_side): compiled, its session saved under 1 µs of the client's ~17 µs per task.
#: the C extensions of the build: module -> its source (vdsp_board/sockets/zio.c: the frame calls of
#: zsock that keep the GIL when they cannot wait; zsock uses it whenever the build is used;
#: arm_side/taskpath.c: the blocking client's per-task path, arm_side.reading's whenever the build is used,
#: with the C client's codec of PROTOCOL.md §3, arm_side/capi/native/vdsp_wire.c, for a task's frames)
C_MODULES = {"vdsp_board.sockets._zio": ("vdsp_board/sockets/zio.c",),
             "arm_side._taskpath": ("arm_side/taskpath.c", "arm_side/capi/native/vdsp_wire.c")}
C_HEADERS = ("arm_side/capi/native/vdsp_wire.h",)     # what the C modules include of ours
SOURCES = MODULES + tuple(rel for sources in C_MODULES.values() for rel in sources) + C_HEADERS    # a build's inputs
C_FLAGS = ["-Wall", "-Wextra", "-Werror"]
PACKAGE = "_vdsp_native"        # the installed build (a directory of site-packages) and its .pth
FINDER = Path(__file__).with_name("native_finder.py")

# mypyc's setuptools glue, run in a child interpreter (it writes C sources and build files); the
# extensions are compiled in parallel, a C compiler per CPU this process may run on (on the 2-CPU
# VM the build took 36 s instead of 52)
_SETUP = """
import json, os, sys
from setuptools import Extension, setup
from mypyc.build import mypycify
target, out, tmp, c_modules, c_flags, *modules = sys.argv[1:]
extensions = mypycify(modules, opt_level="3", separate=True, target_dir=target)
extensions += [Extension(name, sources, extra_compile_args=json.loads(c_flags), libraries=["dl"])
               for name, sources in json.loads(c_modules).items()]
jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
setup(name="vdsp-native", ext_modules=extensions,
      script_args=["build_ext", "--parallel", str(jobs), "--build-lib", out, "--build-temp", tmp])
"""


def site_dir() -> Path:
    """This environment's site-packages (the venv's, for ``.venv/bin/python``)."""
    return Path(sysconfig.get_paths()["purelib"])


def missing() -> str:
    """What a build needs and this machine lacks ("" if nothing)."""
    toolchain = ctoolchain.missing()
    if toolchain:
        return toolchain
    for module, package in (("mypyc", "mypy"), ("setuptools", "setuptools")):
        try:
            importlib.import_module(module)     # installed with the test extra
        except ImportError:
            return f"{module} is not installed (pip install {package})"
    return ""


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def fingerprint(root: Path = ROOT) -> dict:
    """What a build is compiled from: the interpreter, each module's source, the import hook."""
    return {"python": sys.implementation.cache_tag, "sources": {rel: _sha256(root / rel) for rel in SOURCES},
            "finder": _sha256(FINDER)}


def _stats(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for rel in SOURCES:
        st = os.stat(root / rel)
        out[str(root / rel)] = (st.st_size, st.st_mtime_ns)
    return out


def installed(site: Path | None = None) -> ModuleType | None:
    """The installed build's ``_vdsp_native`` module (imported by its .pth at start-up), or None."""
    if site is None:
        mod = sys.modules.get(PACKAGE)
        if mod is not None:
            return mod
    directory = (site or site_dir()) / PACKAGE
    if not (directory / "__init__.py").is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"{PACKAGE}_probe", directory / "__init__.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)        # a finder of its own, installed only if that build was not
    return mod


def status() -> str:
    """"" when this process loads the compiled modules, else why not."""
    mod = installed()
    if mod is None:
        return "not built for this interpreter (python -m vdsp_sim.native_build builds it)"
    return mod.FINDER.why_not()


def active(module: ModuleType) -> bool:
    """Whether ``module`` was loaded from the compiled build."""
    return isinstance(getattr(module, "__loader__", None), importlib.machinery.ExtensionFileLoader)


def _init_source(fp: dict, modules: dict[str, str], stats: dict[str, tuple[int, int]]) -> str:
    return (FINDER.read_text() + "\n\n# --- written by python -m vdsp_sim.native_build (--remove takes it away) ---\n"
            f"BUILD = {fp!r}\n"
            f"FINDER = install(os.path.dirname(os.path.abspath(__file__)), {modules!r}, {stats!r})\n")


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def build(root: Path = ROOT, site: Path | None = None, log=print) -> str:
    """Compile the modules and install the build into ``site`` (replaced whole). Returns "" or why it failed."""
    why = missing()
    if why:
        return why
    site = site or site_dir()
    fp = fingerprint(root)
    unread = [rel for rel, digest in fp["sources"].items() if not digest]
    if unread:
        return "a module to compile cannot be read: " + ", ".join(unread)
    stats = _stats(root)        # before compiling: a module edited meanwhile then counts as changed
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vdsp-native-") as tmp:
        out, work = Path(tmp) / "out", Path(tmp) / "work"
        proc = subprocess.run([sys.executable, "-c", _SETUP, str(Path(tmp) / "c"), str(out), str(work),
                               json.dumps(C_MODULES), json.dumps(C_FLAGS), *MODULES],
                              cwd=root, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            return f"mypyc failed (exit {proc.returncode}):\n{tail}"
        if fingerprint(root) != fp:
            return "a module changed while it was compiled: run the build again"
        stage = site / f"{PACKAGE}.new"
        shutil.rmtree(stage, ignore_errors=True)
        shutil.copytree(out, stage)
        suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
        modules = {}
        for path in sorted(stage.rglob("*")):
            if path.is_file() and path.name.endswith(suffixes):
                rel = path.relative_to(stage)
                modules[".".join(rel.parent.parts + (rel.name.split(".")[0],))] = str(rel)
        _write(stage / "__init__.py", _init_source(fp, modules, stats))
    dest, old = site / PACKAGE, site / f"{PACKAGE}.old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.lexists(dest):
        os.rename(dest, old)
    os.rename(stage, dest)
    shutil.rmtree(old, ignore_errors=True)
    _write(site / f"{PACKAGE}.pth", f"import {PACKAGE}\n")
    log(f"[setup] compiled {len(MODULES)} modules with mypyc and {len(C_MODULES)} in C into {dest} "
        f"({time.monotonic() - t0:.0f} s)")
    return ""


def refresh(root: Path = ROOT, site: Path | None = None) -> str:
    """What ``--if-stale`` does short of compiling: "" when the installed build is current
    (its hook rewritten if only the modules' stat changed, e.g. a checkout touched them without
    changing a byte), else why it must be compiled again."""
    site = site or site_dir()
    mod = installed(site)
    if mod is None or not (site / f"{PACKAGE}.pth").is_file():
        return "not installed"
    fp = fingerprint(root)
    built = getattr(mod, "BUILD", {})
    if built.get("python") != fp["python"] or built.get("sources") != fp["sources"]:
        return "compiled from other sources or for another interpreter"
    finder = mod.FINDER
    if built.get("finder") != fp["finder"] or finder.sources != _stats(root):
        _write(site / PACKAGE / "__init__.py", _init_source(fp, finder.modules, _stats(root)))
    return ""


def remove(site: Path | None = None) -> bool:
    site = site or site_dir()
    pth, dest = site / f"{PACKAGE}.pth", site / PACKAGE
    found = pth.exists() or dest.exists()
    if pth.exists():
        pth.unlink()        # first: an interpreter starting meanwhile must not import a half-removed build
    shutil.rmtree(dest, ignore_errors=True)
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vdsp_sim.native_build", description=(__doc__ or "").split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--if-stale", action="store_true", help="do nothing when the installed build is current")
    what.add_argument("--status", action="store_true", help="only say whether the compiled build is used")
    what.add_argument("--remove", action="store_true", help="uninstall the build (the pure modules run)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when nothing could be built")
    args = ap.parse_args(argv)
    if args.status:
        why = status()      # in this environment (VDSP_NATIVE included)
        print("compiled build: " + (f"used ({', '.join(SOURCES)})" if not why else f"not used: {why}"))
        return 0
    if args.remove:
        print(f"[setup] compiled build removed from {site_dir()}" if remove() else "[setup] no compiled build installed")
        return 0
    if args.if_stale and not refresh():
        return 0
    failed = build()
    if failed:
        print(f"[setup] the pure Python modules run (no compiled build: {failed})", file=sys.stderr)
        return 1 if args.strict else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

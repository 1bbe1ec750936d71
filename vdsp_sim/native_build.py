"""Build (or check) the optional compiled modules: ``python -m vdsp_sim.native_build``.

mypyc compiles ``protocol.native.MODULES`` (one extension per module) into ``.native/`` at the
repository root, with a manifest of the sources it compiled; ``protocol.native`` decides at
import whether the build is used. Everything works without it: where no C compiler, Python
headers or mypyc are found, or the build fails, this says why and exits 0 with the pure
Python modules in use (``--strict``: exit 1 instead). ``scripts/venv.sh`` runs it with
``--if-stale``, which returns at once when the build matches the sources.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from protocol import native

# mypyc's setuptools glue, run in a child interpreter (it writes C sources and build files)
_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
target, out, tmp, *modules = sys.argv[1:]
setup(name="vdsp-native", ext_modules=mypycify(modules, opt_level="3", separate=True, target_dir=target),
      script_args=["build_ext", "--build-lib", out, "--build-temp", tmp])
"""


def missing() -> str:
    """What a build needs and this machine lacks ("" if nothing)."""
    cc = os.environ.get("CC") or "cc"
    if shutil.which(cc.split()[0]) is None:
        return f"no C compiler ({cc})"
    include = sysconfig.get_paths().get("include", "")
    if not os.path.isfile(os.path.join(include, "Python.h")):
        return f"no Python headers (Python.h in {include or '?'}; on Debian: apt-get install python3-dev)"
    try:
        import mypyc  # noqa: F401  (installed with mypy, a test dependency)
    except ImportError:
        return "mypyc is not installed (pip install mypy)"
    return ""


def build(root: Path = native.ROOT, log=print) -> str:
    """Compile the modules into ``root/.native`` (replaced whole). Returns "" or why it failed."""
    why = missing()
    if why:
        return why
    sources = native.digests(root)
    if "" in sources.values():
        return "a module to compile cannot be read: " + ", ".join(m for m, d in sources.items() if not d)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vdsp-native-") as tmp:
        out, work = Path(tmp) / "out", Path(tmp) / "work"
        proc = subprocess.run([sys.executable, "-c", _SETUP, str(Path(tmp) / "c"), str(out), str(work),
                               *native.MODULES], cwd=root, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            return f"mypyc failed (exit {proc.returncode}):\n{tail}"
        (out / native.MANIFEST).write_text(json.dumps({"python": sys.implementation.cache_tag,
                                                       "sources": sources}, indent=1) + "\n")
        for folder, _, files in os.walk(out):     # code we will run: writable by this user only
            os.chmod(folder, 0o755)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o644 if name.endswith(".json") else 0o755)
        dest, old = root / ".native", root / ".native.old"
        shutil.rmtree(old, ignore_errors=True)
        if os.path.lexists(dest):
            os.rename(dest, old)
        os.rename(out, dest)
        shutil.rmtree(old, ignore_errors=True)
    log(f"[setup] compiled {len(native.MODULES)} modules with mypyc into {dest} ({time.monotonic() - t0:.0f} s)")
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vdsp_sim.native_build", description=__doc__.split("\n\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--if-stale", action="store_true", help="do nothing when the build is current")
    ap.add_argument("--status", action="store_true", help="only say whether the compiled build is used")
    ap.add_argument("--strict", action="store_true", help="exit 1 when nothing could be built")
    args = ap.parse_args(argv)
    if args.status:
        why = native.why_not()      # in this environment (VDSP_NATIVE included)
        print("compiled build: " + ("used (" + ", ".join(native.MODULES) + ")" if not why else f"not used: {why}"))
        return 0
    why = native.verdict(env="")    # VDSP_NATIVE=0 chooses what runs, not what is built
    if args.if_stale and not why:
        return 0
    failed = build()
    if failed:
        print(f"[setup] the pure Python modules run (no compiled build: {failed})", file=sys.stderr)
        return 1 if args.strict else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Build (or check) libvdsp_hb, the C face of the SDK: ``python -m vdsp_sim.capi_build``.

Two libraries (docs/capi.md, *How it is built*):

- ``libvdsp_hb.so``, what programs link: ``arm_side/capi/front.c`` with the native client core
  and its hbSys/hbDSP functions (``arm_side/capi/native``, as ``vdsp_sim.capi_native`` builds
  them), linked with libzmq (pyzmq's copy, put beside it) and no libpython, RUNPATH ``$ORIGIN``;
- ``libvdsp_hb_python.so``, the embedded SDK the front loads at the first call that needs it:
  cffi's embedding mode compiles ``arm_side/capi/glue.c`` with the declarations of
  ``arm_side/capi/capi.cdef`` and of the operators (``arm_side.capi.opsgen.cdef()``); it links
  this interpreter's ``libpython`` (its RUNPATH) and runs the SDK (``arm_side.capi.bridge``) in
  the calling process, with the Python executable of this environment built in.

What it writes, under this environment's prefix (``sys.prefix``: the virtual environment's
directory):

- ``lib/libvdsp_hb.so``, ``lib/libvdsp_hb_python.so`` and libzmq with its libsodium;
- ``lib/pkgconfig/vdsp-hb.pc``: ``pkg-config --cflags --libs vdsp-hb`` (with ``-Wl,-rpath``;
  the library directory found from the .pc file's own place, ``${pcfiledir}``);
- ``lib/cmake/vdsp-hb/vdsp-hbConfig.cmake`` (+ ``...ConfigVersion.cmake``): ``find_package(vdsp-hb)``,
  target ``vdsp-hb::hb`` (the library found from the file's own place);
- ``lib/vdsp-hb.json``: what was built from (the sources' sha256, the interpreter), so that a
  stale build is rebuilt by :func:`ensure`.

The headers stay in the package (``arm_side/capi/include``); the .pc and CMake files point there.
Where no C compiler, Python headers, shared libpython or cffi is found, :func:`missing` says
which; ``--if-stale`` (``scripts/venv.sh``) then prints that note and exits 0, and everything
else works.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Iterator

from arm_side import capi
from vdsp_sim import capi_native, ctoolchain

NAME = "vdsp-hb"
LIB = "libvdsp_hb.so"
PY_LIB = "libvdsp_hb_python.so"     # the embedded SDK (front.c's EMBEDDED_LIB)
MODULE = "_vdsp_hb"         # the cffi module inside libvdsp_hb_python.so
SOURCES = ("glue.c", "front.c", "capi.cdef", "include/hb_sys.h", "include/hb_dnn.h", "include/hb_dsp.h",
           "include/hb_dsp_ops.h", "include/dnn/hb_sys.h", "include/dnn/hb_dnn.h",
           *(f"native/{n}" for n in ("vdsp_wire.c", "vdsp_wire.h", "vdsp_err.c", "vdsp_err.h", "vdsp_ddr.c",
                                     "vdsp_ddr.h", "vdsp_curve.c", "vdsp_curve.h", "vdsp_link.c", "vdsp_link.h",
                                     "vdsp_client.c", "vdsp_client.h", "vdsp_json.c", "vdsp_json.h", "vdsp_hb.c",
                                     "vdsp_hb.h", "vdsp_zmq.h")))

_INIT_CODE = """\
import sys
try:
    with open("/proc/self/cmdline", "rb") as f:
        sys.argv = [a.decode(errors="replace") for a in f.read(1 << 16).split(b"\\0") if a][:64] or [""]
except OSError:
    sys.argv = [""]
from _vdsp_hb import ffi, lib
from arm_side.capi import bridge
bridge.install(ffi, lib)
"""


def prefix() -> Path:
    """Where the build goes: this environment's prefix."""
    return Path(sys.prefix)


def python() -> str:
    """The Python executable whose environment the library runs: this one."""
    return sys.executable


def libdir() -> Path:
    return prefix() / "lib"


def library() -> Path:
    return libdir() / LIB


def pkgconfig_dir() -> Path:
    return libdir() / "pkgconfig"


def cmake_dir() -> Path:
    return libdir() / "cmake" / NAME


def manifest_path() -> Path:
    return libdir() / f"{NAME}.json"


def _libpython() -> tuple[str, str]:
    """(directory, -l name) of this interpreter's shared libpython; ("", why) when it has none."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return "", "this Python has no shared libpython (built without --enable-shared)"
    directory = sysconfig.get_config_var("LIBDIR") or ""
    ld = sysconfig.get_config_var("LDLIBRARY") or ""
    if not ld or not os.path.exists(os.path.join(directory, ld)):
        return "", f"the shared libpython ({ld or '?'}) is not in {directory or '?'}"
    return directory, ld[len("lib"):].split(".so")[0]


def missing() -> str:
    """What a build needs and this machine lacks ("" if nothing)."""
    toolchain = ctoolchain.missing()
    if toolchain:
        return toolchain
    directory, why = _libpython()
    if not directory:
        return why
    try:
        import cffi  # noqa: F401
    except ImportError:
        return "cffi is not installed (pip install cffi)"
    return ""


def _cdef() -> str:
    from arm_side.capi import opsgen
    base = (capi.DIR / "capi.cdef").read_text()
    return base + "\n" + opsgen.cdef()


def _source(forward: str = "") -> str:
    """glue.c with the forward declarations of the Python functions and the generated table of
    the parameter structs' pointers."""
    from arm_side.capi import opsgen
    source = (capi.DIR / "glue.c").read_text()
    marker = '#include "hb_sys.h"\n'
    source = source.replace(marker, marker + "\n" + forward + "\n", 1)
    return source.replace("/* CAPI_POINTER_MEMBERS */", opsgen.pointer_table(), 1)


def fingerprint() -> dict:
    """What a current build was made from."""
    digests = {}
    for rel in SOURCES:
        try:
            digests[rel] = hashlib.sha256((capi.DIR / rel).read_bytes()).hexdigest()
        except OSError:
            digests[rel] = ""
    digests["cdef"] = hashlib.sha256(_cdef().encode()).hexdigest()
    digests["glue"] = hashlib.sha256(_source().encode()).hexdigest()
    digests["tables"] = hashlib.sha256(capi_native.tables_header().encode()).hexdigest()
    return {"python": python(), "cache_tag": sys.implementation.cache_tag, "include": str(capi.INCLUDE),
            "sources": digests}


def stale() -> str:
    """Why the build is not current ("" if it is)."""
    if not library().is_file():
        return f"{library()} is not built"
    try:
        built = json.loads(manifest_path().read_text())
    except (OSError, ValueError):
        return f"{manifest_path()} cannot be read"
    return "" if built == fingerprint() else "its sources or the interpreter changed since it was built"


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    libdir().mkdir(parents=True, exist_ok=True)
    fd = os.open(libdir() / f".{NAME}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _pc_file(version: str) -> str:
    return (f"prefix=${{pcfiledir}}/../..\nlibdir=${{pcfiledir}}/..\nincludedir={capi.INCLUDE}\n\n"
            f"Name: {NAME}\nDescription: vdsp-sim: the J5 hbSys/hbDSP/hbDNN C API on the simulated SoC\n"
            f"Version: {version}\nCflags: -I${{includedir}}\n"
            "Libs: -L${libdir} -Wl,-rpath,${libdir} -lvdsp_hb\n")


def _cmake_files(version: str) -> dict[str, str]:
    config = f"""\
# find_package({NAME}): the target {NAME}::hb (headers + libvdsp_hb). Written by vdsp_sim.capi_build.
if(NOT TARGET {NAME}::hb)
  add_library({NAME}::hb SHARED IMPORTED)
  set_target_properties({NAME}::hb PROPERTIES
    IMPORTED_LOCATION "${{CMAKE_CURRENT_LIST_DIR}}/../../{LIB}"
    IMPORTED_SONAME "{LIB}"
    INTERFACE_INCLUDE_DIRECTORIES "{capi.INCLUDE}")
endif()
set({NAME}_INCLUDE_DIRS "{capi.INCLUDE}")
set({NAME}_LIBRARIES {NAME}::hb)
"""
    version_file = f"""\
set(PACKAGE_VERSION "{version}")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
"""
    return {f"{NAME}Config.cmake": config, f"{NAME}ConfigVersion.cmake": version_file}


def build(log=print) -> str:
    """Compile the library and write its pkg-config and CMake files. Returns "" or why it failed."""
    why = missing()
    if why:
        return why
    import cffi
    from vdsp_sim import __version__
    version = re.match(r"[0-9]+(\.[0-9]+)*", __version__)
    version_text = version.group(0) if version else "0"
    cdef = _cdef()
    lib_dir, lib_name = _libpython()
    # glue.c calls the extern "Python" functions, which cffi defines after it: declare them first
    forward = "\n".join(re.sub(r'^extern "Python"', "static", decl.strip()) for decl in
                        re.findall(r'extern "Python"[^;]*;', cdef))
    source = _source(forward)
    ffi = cffi.FFI()
    ffi.embedding_api("")
    ffi.cdef(cdef)
    ffi.set_source(MODULE, source, include_dirs=[str(capi.INCLUDE), str(capi.DIR / "native")], libraries=[lib_name],
                   library_dirs=[lib_dir],
                   define_macros=[("CAPI_SDK_PYTHON", json.dumps(python()))],
                   # cffi's generated code has unused parameters and partly initialized tables
                   extra_compile_args=["-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
                                       "-Wno-missing-field-initializers"],
                   extra_link_args=[f"-Wl,-rpath,{lib_dir}", f"-Wl,-soname,{PY_LIB}", "-pthread"])
    ffi.embedding_init_code(_INIT_CODE)
    t0 = time.monotonic()
    try:
        _build(ffi, version_text)
    except OSError as exc:
        return f"cannot write {libdir()}: {exc}"
    except RuntimeError as exc:
        return str(exc)
    log(f"[setup] built the C API library {library()} ({time.monotonic() - t0:.0f} s)")
    return ""


def _build(ffi, version_text: str) -> None:
    """Compile into a temporary directory, then put the library and its files in place. Raises
    OSError (a directory we may not write), RuntimeError (the compiler failed)."""
    with _locked(), tempfile.TemporaryDirectory(prefix="vdsp-capi-") as tmp:
        try:
            with open(os.path.join(tmp, "build.log"), "w") as out, contextlib.redirect_stdout(out):
                built = ffi.compile(tmpdir=tmp, target=PY_LIB)
        except Exception as exc:         # a compiler error: say what it printed
            tail = "\n".join(Path(tmp, "build.log").read_text().splitlines()[-15:])
            raise RuntimeError(f"the build failed: {exc}\n{tail}") from exc
        front = Path(tmp, "front")
        capi_native.compile_library(front, LIB, [capi.DIR / "front.c",
                                                 *(capi_native.NATIVE / s for s in capi_native.SOURCES)],
                                    Path(tmp, "generated"), ("-DVDSP_HB_PREFIXED", f"-Wl,-soname,{LIB}", "-ldl"))
        # libzmq first, the front last: a program running an old one keeps its mapping
        for lib in sorted(front.glob("lib*.so*"), key=lambda p: p.name == LIB):
            _install(lib, libdir() / lib.name)
        _install(Path(built), libdir() / PY_LIB)
        pkgconfig_dir().mkdir(parents=True, exist_ok=True)
        _write(pkgconfig_dir() / f"{NAME}.pc", _pc_file(version_text))
        cmake_dir().mkdir(parents=True, exist_ok=True)
        for name, text in _cmake_files(version_text).items():
            _write(cmake_dir() / name, text)
        _write(manifest_path(), json.dumps(fingerprint(), indent=1) + "\n")


def _install(built: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.new")
    shutil.copyfile(built, tmp)
    os.chmod(tmp, 0o755)
    os.replace(tmp, target)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.new")
    tmp.write_text(text)
    os.replace(tmp, path)


def ensure(log=print) -> str:
    """Build when missing or stale. Returns "" or why there is no current build."""
    if not stale():
        return ""
    try:
        with _locked():
            if not stale():       # another process built it meanwhile
                return ""
    except OSError as exc:
        return f"cannot write {libdir()}: {exc}"
    return build(log)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vdsp_sim.capi_build", description=__doc__.split("\n\n")[0])
    ap.add_argument("--if-stale", action="store_true", help="build only when missing or stale")
    ap.add_argument("--strict", action="store_true", help="exit 1 when nothing could be built")
    args = ap.parse_args(argv)
    failed = ensure() if args.if_stale else build()
    if failed:
        print(f"[setup] no C API library (libvdsp_hb): {failed}; the rest of vdsp-sim works without it",
              file=sys.stderr)
        return 1 if args.strict else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``vdsp capi``: build a C or C++ program against the hbSys / hbDSP / hbDNN C API (libvdsp_hb)."""
from __future__ import annotations

import argparse
import sys

EPILOG = """\
examples:
  cc $(vdsp capi --cflags) app.c $(vdsp capi --libs) -o app        # a plain Makefile
  PKG_CONFIG_PATH=$(vdsp capi --pkgconfig-dir) pkg-config --cflags --libs vdsp-hb
  cmake -DCMAKE_PREFIX_PATH=$(vdsp capi --prefix) ..              # find_package(vdsp-hb), target vdsp-hb::hb

The library is built for this environment under its prefix (scripts/venv.sh does it; the flags
and directories build it first when it is missing or stale). A program built so runs with no
environment variable beyond the SDK's own (VDSP_RUNTIME_DIR, VDSP_RPC_MODE, ...). docs/capi.md.
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("capi", help="compiler flags, pkg-config and CMake files of the C API (libvdsp_hb)",
                       description="The C API of the SDK: hb_sys.h, hb_dsp.h, hb_dnn.h and libvdsp_hb. Without an "
                       "option: where everything is and whether the library is current.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--cflags", action="store_true", help="the compiler flags (-I of the headers)")
    what.add_argument("--libs", action="store_true", help="the linker flags (-L, -Wl,-rpath, -lvdsp_hb)")
    what.add_argument("--pkgconfig-dir", action="store_true", help="the directory of vdsp-hb.pc (PKG_CONFIG_PATH)")
    what.add_argument("--cmake-dir", action="store_true", help="the directory of vdsp-hbConfig.cmake (vdsp-hb_DIR)")
    what.add_argument("--prefix", action="store_true", help="the prefix of lib/ (CMAKE_PREFIX_PATH)")
    what.add_argument("--include-dir", action="store_true", help="the directory of the headers")
    what.add_argument("--build", action="store_true", help="build the library now (even when it is current)")
    return p


def run(args: argparse.Namespace) -> int:
    from arm_side import capi
    from vdsp_sim import capi_build as cb
    if args.cflags or args.include_dir:
        print(f"-I{capi.INCLUDE}" if args.cflags else capi.INCLUDE)
        return 0
    if args.build:
        failed = cb.build(log=lambda msg: print(msg, file=sys.stderr))
    elif args.libs or args.pkgconfig_dir or args.cmake_dir or args.prefix:
        failed = cb.ensure(log=lambda msg: print(msg, file=sys.stderr))
    else:
        return _status(cb, capi)
    if failed:
        print(f"vdsp capi: no C API library: {failed}", file=sys.stderr)
        return 1
    if args.libs:
        print(f"-L{cb.libdir()} -Wl,-rpath,{cb.libdir()} -lvdsp_hb")
    elif args.pkgconfig_dir:
        print(cb.pkgconfig_dir())
    elif args.cmake_dir:
        print(cb.cmake_dir())
    elif args.prefix:
        print(cb.prefix())
    return 0


def _status(cb, capi) -> int:
    why = cb.missing()
    state = f"cannot be built here: {why}" if why else (f"not current ({cb.stale()}; 'vdsp capi --build')"
                                                          if cb.stale() else "current")
    print(f"headers      {capi.INCLUDE}  (hb_sys.h, hb_dsp.h, hb_dnn.h, dnn/hb_sys.h, dnn/hb_dnn.h)")
    print(f"library      {cb.library()}  ({state})")
    print(f"pkg-config   {cb.pkgconfig_dir()}/vdsp-hb.pc")
    print(f"CMake        {cb.cmake_dir()}/vdsp-hbConfig.cmake  (target vdsp-hb::hb)")
    print("\n" + EPILOG.split("\n\n")[0])
    return 0 if not why else 1

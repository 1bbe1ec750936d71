"""``vdsp dsp``: compile a C kernel against the DSP-side SDK (vdsp_kernel.h)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """\
examples:
  cc $(vdsp dsp --cflags) -Wall -Wextra -Werror -c kernel.c     # check a kernel on its own
  vdsp dsp --params examples/c_kernel > vdsp_kernel_params.h    # its parameter structs, for an editor
  vdsp firmware build examples/c_kernel -o build/image/vdsp1      # what the image build does (docs/dsp_kernels.md)
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("dsp", help="compiler flags and parameter header of the DSP-side C kernel SDK",
                       description="The DSP-side C kernel SDK: vdsp_kernel.h (TileBuffer, TCM, IDMA, logging) and "
                       "the parameter structs of an operator source tree's C kernels.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--cflags", action="store_true", help="the compiler flags (-I of the SDK's headers)")
    what.add_argument("--include-dir", action="store_true", help="the directory of vdsp_kernel.h")
    what.add_argument("--params", metavar="SRC", type=Path,
                      help="print vdsp_kernel_params.h of the operator source tree SRC (what the build generates)")
    return p


def run(args: argparse.Namespace) -> int:
    from dsp_side import ckernel
    if args.cflags:
        print(ckernel.cflags())
    elif args.include_dir:
        print(ckernel.INCLUDE)
    else:
        from protocol import errors
        from dsp_side import fw_image
        from dsp_side.ckernel import params
        try:
            _, registry = fw_image.registry_of_tree(args.params)
            print(params.header(ckernel.entries_of(registry)), end="")
        except (errors.VdspError, ValueError) as exc:
            print(f"vdsp dsp: {exc}", file=sys.stderr)
            return 1
    return 0

"""``vdsp firmware build|info`` and installing the stock images."""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from protocol import errors
from protocol.constants import CORE_NAMES
from dsp_side import image
from soc import runtime

STOCK_SRC = Path(__file__).resolve().parent.parent / "dsp_side" / "firmware_src" / "stock"


def install_stock(rt: Path, names: tuple[str, ...] = CORE_NAMES) -> list[Path]:
    """Build the stock image into the default firmware directory for every core that has
    no image there yet (as flashing a board does). Returns the images written."""
    fwdir = runtime.firmware_dir(rt)
    missing = [fwdir / n for n in names if not (fwdir / n).exists()]
    if missing:
        image.build(STOCK_SRC, missing[0], name="stock")
        for path in missing[1:]:
            shutil.copyfile(missing[0], path)
    return missing


def cmd_build(args: argparse.Namespace) -> int:
    header = image.build(Path(args.src), Path(args.output), name=args.name)
    ops = ", ".join(f"{o['name']}(0x{o['id']:04x})" for o in header["operators"])
    print(f"built {args.output}: {header['name']} version {header['version']}, "
          f"{len(header['operators'])} operators: {ops}")
    return 0


def cmd_install_stock(args: argparse.Namespace) -> int:
    rt = runtime.runtime_dir()
    written = install_stock(rt, tuple(args.cores))
    where = runtime.firmware_dir(rt)
    print(f"installed stock firmware as {', '.join(p.name for p in written)} in {where}" if written
          else f"{where} already has images for {', '.join(args.cores)}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    header, _ = image.read(Path(args.image))
    if args.json:
        import json
        print(json.dumps(header, indent=1))
        return 0
    print(f"image:    {args.image}\nname:     {header['name']}\nversion:  {header['version']}\n"
          f"built:    {header['built']}\npayload:  {header['payload_size']} bytes, sha256 {header['payload_sha256']}\n"
          f"operators ({len(header['operators'])}):")
    for op in header["operators"]:
        params = ", ".join(f"{k}: {v['type']}" + (f"={v['default']!r}" if "default" in v else "")
                           for k, v in op["params"].items())
        print(f"  0x{op['id']:04x}  {op['name']:<12} in {op['inputs'][0]}..{op['inputs'][1]} "
              f"out {op['outputs'][0]}..{op['outputs'][1]}  ({params})  {op['doc']}")
    return 0


def add_parser(sub) -> None:
    fw = sub.add_parser("firmware", help="build and inspect DSP firmware images")
    fsub = fw.add_subparsers(dest="fw_command", required=True)
    build = fsub.add_parser("build", help="build an image from an operator source tree (a folder with firmware.py)")
    build.add_argument("src", metavar="SRC_DIR")
    build.add_argument("-o", "--output", required=True, metavar="OUT_FILE")
    build.add_argument("--name", help="image name in the manifest (default: the folder name)")
    build.set_defaults(fn=cmd_build)
    info = fsub.add_parser("info", help="print an image's manifest (version, operators) after verifying it")
    info.add_argument("image", metavar="FILE")
    info.add_argument("--json", action="store_true")
    info.set_defaults(fn=cmd_info)
    stock = fsub.add_parser("install-stock", help="build the stock image into the default firmware directory "
                                                  "($VDSP_FIRMWARE_DIR, else $VDSP_RUNTIME_DIR/firmware) where missing")
    stock.add_argument("cores", nargs="*", default=list(CORE_NAMES), help="image names (default: vdsp0 vdsp1)")
    stock.set_defaults(fn=cmd_install_stock)

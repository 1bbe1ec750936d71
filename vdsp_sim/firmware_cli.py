"""``vdsp firmware build|info|stubs|install-stock|keygen|trust|untrust|trusted``: DSP firmware images,
their typed stubs (``arm_side.stubgen``) and the keys that sign them (see ``dsp_side.signing``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from protocol import errors
from protocol.constants import CORE_NAMES

# Each command imports the image, signing and stock modules it uses when it runs: the parser alone
# ('vdsp --help', 'vdsp --version', each of which builds the whole tree) needs none of them (the
# image builder imports numpy and the C kernel SDK: ~0.6 s of CPU), nor do the key commands.


def _sanitizer(value: str) -> str:
    if value not in ("undefined", "address"):
        raise argparse.ArgumentTypeError(f"{value!r} is no sanitizer: write --sanitize (undefined), "
                                         "--sanitize=undefined or --sanitize=address")
    return value


def cmd_build(args: argparse.Namespace) -> int:
    from dsp_side import fw_image, signing
    key: object      # None (unsigned), a private key, or fw_image.INSTALL_KEY
    if args.unsigned:
        key = None
    elif args.key:
        key = signing.load_private(Path(args.key))
    else:
        key = fw_image.INSTALL_KEY
    header = fw_image.build(Path(args.src), Path(args.output), name=args.name, key=key, sanitize=args.sanitize)
    ops = ", ".join(f"{o['name']}(0x{o['id']:04x})" for o in header["operators"])
    signed = "UNSIGNED (only a core started with --allow-unsigned boots it)" if args.unsigned else \
        f"signed with {args.key or signing.signing_key_path(signing.default_dir())}"
    sanitized = f"; C kernels built with the {header['sanitize']} sanitizer" if "sanitize" in header else ""
    print(f"built {args.output}: {header['name']} version {header['version']}, "
          f"{len(header['operators'])} operators: {ops}; {signed}{sanitized}")
    return 0


def cmd_install_stock(args: argparse.Namespace) -> int:
    from vdsp_board.processes import rundir
    from vdsp_sim.soc.stock import install_stock
    rt = rundir.runtime_dir()
    written = install_stock(rt, tuple(args.cores))
    where = rundir.firmware_dir(rt)
    for path, why in written:
        if why != "missing":
            print(f"replaced {path}: {why}")
    print(f"installed stock firmware as {', '.join(p.name for p, _ in written)} in {where}" if written
          else f"{where} already has trusted images for {', '.join(args.cores)}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from dsp_side import fw_image, signing
    header, _, signer = fw_image.examine(Path(args.image))
    if isinstance(signer, signing.SignatureError):
        verdict = f"REFUSED by this SoC's cores ({signer.reason}): {signer.message}"
    else:
        verdict = f"{signer}, trusted here"
    if args.json:
        import json
        print(json.dumps({**header, "signature": verdict}, indent=1))
        return 0
    print(f"image:    {args.image}\nname:     {header['name']}\nversion:  {header['version']}\n"
          f"built:    {header['built']}\npayload:  {header['payload_size']} bytes, sha256 {header['payload_sha256']}\n"
          f"signed:   {verdict}\noperators ({len(header['operators'])}):")
    for op in header["operators"]:
        params = ", ".join(f"{k}: {v['type']}" + (f"={v['default']!r}" if "default" in v else "")
                           for k, v in op["params"].items())
        print(f"  0x{op['id']:04x}  {op['name']:<12} in {op['inputs'][0]}..{op['inputs'][1]} "
              f"out {op['outputs'][0]}..{op['outputs'][1]}  ({params})  {op['doc']}")
    return 0


def cmd_stubs(args: argparse.Namespace) -> int:
    from dsp_side import fw_image, signing
    header, _, signer = fw_image.examine(Path(args.image))
    title = (f"Typed stubs of the operators of firmware image {header['name']} version {header['version']}"
             f" ({Path(args.image).name}).")
    from arm_side import stubgen    # here: 'vdsp up' installs images and needs none of the SDK for it
    try:
        source = stubgen.from_table(header["operators"], title)
    except ValueError as exc:
        raise errors.InvalidArgument(f"{args.image}: cannot make stubs: {exc}") from exc
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    fw_image.write_atomically(out, source.encode())
    names = ", ".join(f"{o['name']}(0x{o['id']:04x})" for o in header["operators"])
    warn = f"; note: this SoC's cores would refuse the image ({signer.message})" \
        if isinstance(signer, signing.SignatureError) else ""
    print(f"wrote {out}: {len(header['operators'])} typed functions for {names}{warn}")
    return 0


def cmd_keygen(args: argparse.Namespace) -> int:
    from dsp_side import signing
    keys = signing.default_dir()
    path, made = signing.keygen(keys)
    raw = signing.public_raw(signing.load_private(path))
    print(f"{'made' if made else 'kept'} {path} ({signing.key_id(raw)}); public key {keys / signing.SIGNING_PUB}"
          + (f", trusted as {signing.INSTALL_NAME!r}" if made else ""))
    return 0


def cmd_trust(args: argparse.Namespace) -> int:
    from dsp_side import signing
    path, kid = signing.trust(signing.default_dir(), Path(args.public_file), args.name)
    print(f"trusted {kid} as {path.stem} ({path}): the cores boot images it signs from their next boot on")
    return 0


def cmd_untrust(args: argparse.Namespace) -> int:
    from dsp_side import signing
    path = signing.untrust(signing.default_dir(), args.name)
    if path is None:
        print(f"vdsp firmware untrust: no trusted key named {args.name!r}", file=sys.stderr)
        return 1
    print(f"untrusted {args.name} (removed {path}): images it signed are refused from the next boot on")
    return 0


def cmd_trusted(args: argparse.Namespace) -> int:
    from dsp_side import signing
    keys = signing.default_dir()
    for name, raw, path in signing.trusted(keys):
        print(f"{name:20} {signing.key_id(raw)}  {path}")
    return 0


def add_parser(sub) -> argparse.ArgumentParser:
    fw = sub.add_parser("firmware", help="build, inspect and sign DSP firmware images; trust signing keys")
    fsub = fw.add_subparsers(dest="fw_command", required=True)
    build = fsub.add_parser("build", help="build a signed image from an operator source tree (a folder with firmware.py)",
                            description="Build an image and sign it: with --key FILE, else with this install's "
                                        "signing key (made by 'vdsp firmware keygen' or the first 'vdsp up').")
    build.add_argument("src", metavar="SRC_DIR", help="operator source tree: a folder with firmware.py "
                                                      "(dsp_side/firmware_src/stock is the stock one)")
    build.add_argument("-o", "--output", required=True, metavar="OUT_FILE",
                       help="the image file to write (install it with 'vdsp deploy DIR' as DIR/vdsp0, DIR/vdsp1)")
    build.add_argument("--name", help="image name in the manifest (default: the folder name)")
    how = build.add_mutually_exclusive_group()
    how.add_argument("--key", metavar="KEYFILE", help="Ed25519 private key to sign with (PKCS#8 PEM or OpenSSH, "
                                                      "mode 0600; default: this install's key)")
    how.add_argument("--unsigned", action="store_true",
                     help="do not sign: only a core started with --allow-unsigned boots the image")
    build.add_argument("--sanitize", nargs="?", const="undefined", type=_sanitizer, metavar="undefined|address",
                       help="compile the tree's C kernels with a sanitizer: UndefinedBehaviorSanitizer "
                            "(--sanitize or --sanitize=undefined) or AddressSanitizer (--sanitize=address, the "
                            "firmware then starts with the compiler's libasan preloaded): a kernel's undefined "
                            "behaviour or bad memory access ends its firmware, the report in the core's log")
    build.set_defaults(fn=cmd_build)
    info = fsub.add_parser("info", help="print an image's manifest (version, operators, signer) after verifying it")
    info.add_argument("image", metavar="FILE", help="a firmware image")
    info.add_argument("--json", action="store_true", help="the manifest and the verdict on its signature as JSON")
    info.set_defaults(fn=cmd_info)
    stubs = fsub.add_parser("stubs", help="write a typed Python module with one function per operator of an image",
                            description="One typed function per operator the image declares (custom ones "
                                        "included): it takes the Soc, the buffers and the parameters as keywords "
                                        "with their declared types and defaults, and returns the task. mypy "
                                        "checks calls against it.")
    stubs.add_argument("image", metavar="IMAGE", help="a firmware image ('vdsp firmware build' makes one)")
    stubs.add_argument("-o", "--output", required=True, metavar="FILE.py", help="the module to write")
    stubs.set_defaults(fn=cmd_stubs)
    stock = fsub.add_parser("install-stock", help="build the signed stock image into the default firmware directory "
                                                  "($VDSP_FIRMWARE_DIR, else $VDSP_RUNTIME_DIR/firmware) where an "
                                                  "image is missing or would be refused")
    stock.add_argument("cores", nargs="*", default=list(CORE_NAMES), help="image names (default: vdsp0 vdsp1)")
    stock.set_defaults(fn=cmd_install_stock)
    fsub.add_parser("keygen", help="make this install's signing key in the key directory and trust it "
                                   "(kept if present)").set_defaults(fn=cmd_keygen)
    trust = fsub.add_parser("trust", help="trust an Ed25519 public key: the cores boot images it signs")
    trust.add_argument("public_file", metavar="FILE.pub", help="OpenSSH ('ssh-ed25519 ...') or PEM public key")
    trust.add_argument("--name", help="name to trust it under (default: the file name without .pub)")
    trust.set_defaults(fn=cmd_trust)
    untrust = fsub.add_parser("untrust", help="stop trusting a key: images it signs are refused at the next boot")
    untrust.add_argument("name", help="the name it is trusted under ('vdsp firmware trusted' lists them)")
    untrust.set_defaults(fn=cmd_untrust)
    fsub.add_parser("trusted", help="list the trusted signing keys").set_defaults(fn=cmd_trusted)
    return fw

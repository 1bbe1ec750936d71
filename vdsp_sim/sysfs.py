"""``vdsp sysfs`` and ``vdsp deploy``: the J5 remoteproc shell workflow against the simulated SoC.

Paths (as on the board; vdsp0 is remoteproc1, vdsp1 is remoteproc2)::

    /sys/class/remoteproc/remoteprocN/{name,firmware,state,recovery,coredump}
    /sys/kernel/debug/remoteproc/remoteprocN/recovery        (older kernels' place)
    /sys/module/firmware_class/parameters/path               (firmware search path)
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Iterator

from protocol import errors
from protocol.constants import CORE_NAMES
from protocol.remoteproc import ATTRIBUTES
from vdsp_board.config import settings
from vdsp_board.processes import rundir
from vdsp_board.processes.pidfile import PidFile

FW_PATH = "/sys/module/firmware_class/parameters/path"
_RPROC = re.compile(r"^/sys/(?:class|kernel/debug)/remoteproc/remoteproc(\d+)/(\w+)$")


def resolve(path: str) -> tuple[str, str] | None:
    """(core name, attribute) of a remoteproc path, ("", "path") for the firmware path, or None."""
    path = os.path.normpath(path)
    if path == FW_PATH:
        return "", "path"
    m = _RPROC.match(path)
    if not m or not 1 <= int(m[1]) <= len(CORE_NAMES) or m[2] not in ATTRIBUTES:
        return None
    if "/kernel/debug/" in path and m[2] != "recovery":
        return None
    return CORE_NAMES[int(m[1]) - 1], m[2]


@contextlib.contextmanager
def connect() -> Iterator:
    """A Soc through the relay when one runs here (or is configured), else direct to the cores."""
    from arm_side.soc import Soc
    rt = rundir.runtime_dir()
    relay = PidFile(rt / "relay.pid").read() is not None or bool(settings.current().relay_endpoint)
    with Soc(mode="relay" if relay else "direct", autostart_relay=False, connect_timeout_s=3.0) as soc:
        yield soc


def read_attr(soc, core: str, attr: str) -> str:
    if not core:
        try:
            return rundir.firmware_path_file().read_text()
        except FileNotFoundError:
            return ""
    return soc.control(core, attr)


def write_attr(soc, core: str, attr: str, value: str) -> None:
    """Raises RemoteprocError (EBUSY, EINVAL, ENOENT) like the sysfs file."""
    if not core:
        rundir.firmware_path_file().write_text(value.rstrip("\n"))
        return
    soc.control(core, attr, value)


def _errno_text(exc: errors.VdspError) -> str:
    if isinstance(exc, errors.RemoteprocError):
        return os.strerror(-exc.code)
    return exc.message


def cmd_cat(args: argparse.Namespace) -> int:
    where = resolve(args.path)
    if where is None:
        print(f"cat: {args.path}: No such file or directory", file=sys.stderr)
        return 1
    with connect() as soc:
        value = read_attr(soc, *where)
    print(value)
    return 0


def cmd_echo(args: argparse.Namespace) -> int:
    where = resolve(args.path)
    if where is None:
        print(f"sh: {args.path}: No such file or directory", file=sys.stderr)
        return 1
    value = " ".join(args.value) + ("" if args.n else "\n")
    try:
        with connect() as soc:
            write_attr(soc, *where, value)
    except errors.RemoteprocError as exc:
        print(f"sh: echo: write error: {_errno_text(exc)}", file=sys.stderr)    # the board's line, then why
        print(f"vdsp sysfs: {exc.message}", file=sys.stderr)
        return 1
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    for i, core in enumerate(CORE_NAMES, start=1):
        for attr in ATTRIBUTES:
            print(f"/sys/class/remoteproc/remoteproc{i}/{attr}")
    print(FW_PATH)
    return 0


def deploy(image_dir: Path, out=print) -> list[dict]:
    """dsp_deploy.sh: stop both cores, set firmware names, install images, start, report.

    Raises FileNotFound / RemoteprocInvalid for a missing or corrupt image (before any core
    is stopped), RemoteprocError if a core refuses.
    """
    from dsp_side import fw_image
    headers = {name: fw_image.read(image_dir / name)[0] for name in CORE_NAMES}  # verify first
    target = rundir.firmware_search()[0]
    with connect() as soc:
        for name in CORE_NAMES:
            try:
                soc.control(name, "state", "stop")
                out(f"stopped {name}")
            except errors.RemoteprocInvalid:
                out(f"{name} was not running")  # like the sample script: ignore "already stopped"
            soc.control(name, "firmware", name)
        target.mkdir(parents=True, exist_ok=True)
        for name in CORE_NAMES:
            tmp = target / f".{name}.deploy"
            shutil.copyfile(image_dir / name, tmp)
            tmp.replace(target / name)
            out(f"installed {image_dir / name} as {target / name} (version {headers[name]['version']})")
        for name in CORE_NAMES:
            soc.control(name, "state", "start")
        cores = soc.query("cores")["cores"]
    for core in cores:    # the image each core was told to boot is its own name (set above)
        name = core["name"]
        signer = f", signed by {core['firmware_signer']}" if core.get("firmware_signer") else ""
        out(f"{name}: {core['state']}, firmware {target / name} ({headers[name]['name']} "
            f"{core.get('firmware_version') or headers[name]['version']}{signer}), "
            f"{len(core.get('operators', []))} operators")
    return cores


def cmd_deploy(args: argparse.Namespace) -> int:
    try:
        deploy(Path(args.image_dir))
    except errors.VdspError as exc:
        print(f"vdsp deploy: {exc}", file=sys.stderr)
        return 1
    return 0


def add_sysfs_parser(sub) -> argparse.ArgumentParser:
    fs = sub.add_parser("sysfs", help="read and write the remoteproc sysfs files of the SoC")
    fsub = fs.add_subparsers(dest="sysfs_command", required=True)
    cat = fsub.add_parser("cat", help="print an attribute (like cat PATH)")
    cat.add_argument("path", metavar="PATH", help="an attribute ('vdsp sysfs ls' lists them)")
    cat.set_defaults(fn=cmd_cat)
    echo = fsub.add_parser("echo", help="write an attribute (like echo [-n] VALUE > PATH)")
    echo.add_argument("-n", action="store_true", help="no trailing newline")
    echo.add_argument("value", nargs="+", metavar="VALUE", help="what to write: start or stop to state, "
                                                                 "an image name to firmware")
    echo.add_argument("path", metavar="PATH", help="an attribute ('vdsp sysfs ls' lists them)")
    echo.set_defaults(fn=cmd_echo)
    fsub.add_parser("ls", help="list the files").set_defaults(fn=cmd_ls)
    return fs


def add_deploy_parser(sub) -> argparse.ArgumentParser:
    dep = sub.add_parser("deploy", help="install firmware images vdsp0/vdsp1 from IMAGE_DIR and restart both cores "
                                        "(what dsp_deploy.sh does)")
    dep.add_argument("image_dir", metavar="IMAGE_DIR",
                     help="a folder with the images vdsp0 and vdsp1 ('vdsp firmware build -o IMAGE_DIR/vdsp0')")
    return dep

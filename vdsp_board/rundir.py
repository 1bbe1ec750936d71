"""Where a local SoC keeps its sockets and state: the runtime directory and endpoints.

``VDSP_RUNTIME_DIR`` names it; the default is ``$XDG_RUNTIME_DIR/vdsp`` when that
directory exists, else ``/tmp/vdsp-<uid>``. Two SoCs run side by side with two
runtime directories. Endpoints default to ``ipc://`` sockets inside it; the
environment overrides them for tcp (containers, several hosts):

- ``VDSP_RELAY_ENDPOINT``   e.g. ``tcp://relay:6000``
- ``VDSP_CORE_ENDPOINTS``   e.g. ``vdsp0=tcp://vdsp0:6100,vdsp1=tcp://vdsp1:6100``
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from protocol import errors
from protocol.constants import CORE_NAMES
from vdsp_board import settings

IPC_PATH_MAX = 107  # sun_path limit of a unix socket, less the terminating NUL


def runtime_dir(create: bool = True) -> Path:
    """The runtime directory (created 0700 if asked), checked to be private.

    Raises InvalidArgument if it cannot be created, or if it exists and is not a
    directory of ours that only we can use (see :func:`check_private_dir`).
    """
    env = settings.current().runtime_dir
    if env:
        path = env
    else:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        path = Path(xdg) / "vdsp" if xdg and Path(xdg).is_dir() else Path(f"/tmp/vdsp-{os.getuid()}")
    if create:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise errors.InvalidArgument(f"cannot create runtime directory {path}: {exc}") from exc
    if create or os.path.lexists(path):
        check_private_dir(path)
    return path


def check_private_dir(path: Path) -> None:
    """Refuse a directory another user could have planted or can write into, as ssh does.

    It must be a real directory (not a symlink), owned by us, with no group or world access:
    sockets, firmware images and pid files in it are trusted by every process of the SoC.
    Raises InvalidArgument saying what is wrong and how to fix it.
    """
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise errors.InvalidArgument(f"runtime directory {path}: {exc.strerror}") from exc
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise errors.InvalidArgument(f"runtime directory {path} is not a directory (a symlink or a file): "
                                     "refusing it; remove it or set VDSP_RUNTIME_DIR")
    if st.st_uid != os.getuid():
        raise errors.InvalidArgument(f"runtime directory {path} is owned by uid {st.st_uid}, not by you "
                                     f"(uid {os.getuid()}): refusing it; remove it or set VDSP_RUNTIME_DIR")
    if st.st_mode & 0o077:
        raise errors.InvalidArgument(f"bad permissions {stat.S_IMODE(st.st_mode):04o} on runtime directory {path}: "
                                     f"it must be private (chmod 700 {path})")


def ipc(path: Path) -> str:
    """An ipc:// endpoint for ``path``. Raises InvalidArgument if the path is too long."""
    text = str(path)
    if len(text) > IPC_PATH_MAX:
        raise errors.InvalidArgument(
            f"ipc socket path {text} is {len(text)} characters, the limit is {IPC_PATH_MAX}; "
            "set VDSP_RUNTIME_DIR to a shorter directory")
    return f"ipc://{text}"


def relay_endpoint(rt: Path | None = None) -> str:
    return settings.current().relay_endpoint or ipc((rt or runtime_dir()) / "relay.sock")


def core_endpoints(rt: Path | None = None) -> dict[str, str]:
    """Core name -> control endpoint. Raises InvalidArgument on a malformed override."""
    env = settings.current().core_endpoints
    if env:
        return parse_core_list(env.split(","))
    rt = rt or runtime_dir()
    return {name: ipc(rt / f"{name}.sock") for name in CORE_NAMES}


def parse_core_list(items: list[str]) -> dict[str, str]:
    """``["vdsp0=tcp://h:1", ...]`` -> dict. Raises InvalidArgument."""
    out = {}
    for item in items:
        name, sep, endpoint = item.strip().partition("=")
        if not sep or not name or "://" not in endpoint:
            raise errors.InvalidArgument(f"core endpoint {item!r} must look like vdsp0=ipc:///path or vdsp0=tcp://host:port")
        out[name] = endpoint
    return out


def fw_endpoint_for(control: str) -> str:
    """Default firmware (task) endpoint of a core whose control endpoint is ``control``.

    ipc: ``.../vdsp0.sock`` -> ``.../vdsp0.fw.sock``; tcp: the next port.
    """
    if control.startswith("ipc://"):
        base = control[:-5] if control.endswith(".sock") else control
        return f"{base}.fw.sock"
    if control.startswith("tcp://"):
        host, _, port = control[6:].rpartition(":")
        return f"tcp://{host}:{int(port) + 1}"
    raise errors.InvalidArgument(f"unsupported endpoint {control!r}: use ipc:// or tcp://")


def connectable(announced: str, via: str) -> str:
    """Make an announced bind address (``tcp://0.0.0.0:p`` / ``tcp://*:p``) connectable,
    using the host of the control endpoint ``via`` we reached the announcer through."""
    for wildcard in ("tcp://0.0.0.0:", "tcp://*:"):
        if announced.startswith(wildcard) and via.startswith("tcp://"):
            host = via[6:].rpartition(":")[0]
            return f"tcp://{host}:{announced[len(wildcard):]}"
    return announced


def firmware_dir(rt: Path | None = None) -> Path:
    """The SoC's default firmware directory (``VDSP_FIRMWARE_DIR``, else runtime dir/firmware),
    like /system/lib/firmware on the board."""
    env = settings.current().firmware_dir
    return env if env else (rt or runtime_dir()) / "firmware"


def firmware_path_file(rt: Path | None = None) -> Path:
    """Backing file of /sys/module/firmware_class/parameters/path (empty = unset)."""
    return (rt or runtime_dir()) / "firmware_class.path"


def firmware_search(rt: Path | None = None) -> list[Path]:
    """Where a core looks for its image: the custom path if set, then the default directory."""
    rt = rt or runtime_dir()
    try:
        custom = firmware_path_file(rt).read_text().strip()
    except (OSError, ValueError):   # missing, unreadable or not text: no custom path, as if never set
        custom = ""
    return ([Path(custom)] if custom else []) + [firmware_dir(rt)]


def unlink_ipc(endpoint: str) -> None:
    """Remove the socket file of an ipc endpoint we bound (no-op for tcp)."""
    if endpoint.startswith("ipc://"):
        try:
            os.unlink(endpoint[6:])
        except FileNotFoundError:
            pass

"""Where a local SoC keeps its sockets and state: the runtime directory and endpoints.

``VDSP_RUNTIME_DIR`` names it; the default is ``$XDG_RUNTIME_DIR/vdsp`` when that
directory exists, else ``/tmp/vdsp-<uid>``. Two SoCs run side by side with two
runtime directories. Endpoints default to ``ipc://`` sockets inside it; the
environment overrides them for tcp (containers, several hosts):

- ``VDSP_RELAY_ENDPOINT``   e.g. ``tcp://relay:6000``
- ``VDSP_CORE_ENDPOINTS``   e.g. ``vdsp0=tcp://vdsp0:6100,vdsp1=tcp://vdsp1:6100``

**Socket paths.** A unix socket path has at most ``IPC_PATH_MAX`` (107) characters. A runtime
dir whose path leaves room for the SoC's socket names (``SOCKET_NAME_MAX`` characters; the
longest, ``vdsp0.fw.sock``, has 13) holds its sockets itself: at most ``SHORT_ENOUGH`` (90)
characters. A longer one (a CI user's workspace, pytest's tmp path) holds a symlink
``sockets`` to a directory made for it under /tmp, ``/tmp/vdsp-sock-XXXXXXXX``, where the
sockets go (:func:`socket_dir`):

- it is made by ``mkdtemp``: a fresh random name, created 0700 by ``mkdir``, which fails
  rather than adopt a name someone else made first; in the sticky /tmp nobody else can rename
  or remove it while it exists;
- every process of the SoC and every client finds it through the link, and checks at each
  use what the link names as the runtime dir itself is checked (a real directory, ours,
  0700): a name another user makes in /tmp once ours is gone (a reboot, tmpfiles) is never
  used; a server of the SoC then makes a new directory and points the link at it;
- a server (``vdsp up``, ``vdsp core``, the relay) makes it before it binds; ``vdsp down``, the
  supervisor's stop and ``PrivateSoc.close`` remove it, and the link, once no socket is left
  in it (:func:`release_socket_dir`). Both hold a flock on the runtime dir (ours and 0700:
  only our own processes can open it), for at most ``LOCK_WAIT_S``.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import socket
import stat
import tempfile
import time
from pathlib import Path
from typing import Iterator

from protocol import errors
from protocol.constants import CORE_NAMES
from vdsp_board.config import settings

log = logging.getLogger("vdsp.rundir")
IPC_PATH_MAX = 107  # sun_path limit of a unix socket, less the terminating NUL
SOCKET_NAME_MAX = 16            # the longest socket name of a SoC (vdsp0.fw.sock: 13), with room
SHORT_ENOUGH = IPC_PATH_MAX - 1 - SOCKET_NAME_MAX   # 90: a runtime dir this long holds its sockets
SOCKETS_LINK = "sockets"        # in a longer runtime dir: the symlink to its sockets' directory
SHORT_PARENT = "/tmp"           # where those directories are made (not $TMPDIR: it may be long too)
SHORT_PREFIX = "vdsp-sock-"
LOCK_WAIT_S = 5.0               # making or removing the sockets' directory waits this long at most


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


def check_endpoint(endpoint: str) -> str:
    """``endpoint``, checked to be bindable: an ipc path within the limit. Raises InvalidArgument."""
    if endpoint.startswith("ipc://"):
        ipc(Path(endpoint[6:]))
    return endpoint


def relay_endpoint(rt: Path | None = None, create: bool = False) -> str:
    """The relay's endpoint (``create``: as a server about to bind it, see :func:`socket_dir`).
    Raises RelayUnavailable when no SoC has made the sockets' directory of a long runtime dir."""
    return settings.current().relay_endpoint or \
        ipc(socket_dir(rt or runtime_dir(), create, errors.RelayUnavailable) / "relay.sock")


def core_endpoints(rt: Path | None = None, create: bool = False) -> dict[str, str]:
    """Core name -> control endpoint (``create``: as a server about to bind, see :func:`socket_dir`).
    Raises InvalidArgument on a malformed override; CoreOffline when no SoC has made the
    sockets' directory of a long runtime dir."""
    env = settings.current().core_endpoints
    if env:
        return parse_core_list(env.split(","))
    where = socket_dir(rt or runtime_dir(), create)
    return {name: ipc(where / f"{name}.sock") for name in CORE_NAMES}


# --- the sockets' directory of a long runtime dir (see the module's docstring) ---------------------
def socket_dir(rt: Path, create: bool = False,
               unavailable: type[errors.VdspError] = errors.CoreOffline) -> Path:
    """Where the SoC of runtime dir ``rt`` binds its ipc sockets: ``rt`` itself when its path
    has at most SHORT_ENOUGH characters, else the short private directory its ``sockets``
    link names. ``create`` (a server, before it binds): make that directory, or a new one in
    place of one that is gone or not ours. Raises ``unavailable`` (a client's view: no SoC made
    it) when there is none to use; InvalidArgument when ``sockets`` is no symlink or no
    directory can be made (the message names the limit and the fix)."""
    if len(str(rt)) <= SHORT_ENOUGH:
        return rt
    link = rt / SOCKETS_LINK
    target, problem = _linked(link)
    if target is not None and problem is None:
        return target
    if not create:
        raise unavailable(f"no SoC is up in {rt}: that path is too long for unix sockets ({len(str(rt))} characters), "
                          f"so a SoC there keeps them in the short directory its link {link} names, and "
                          f"{f'it names {target}, which {problem}' if problem else 'there is no such link'}. "
                          "Start one with 'vdsp up -d'")
    with _locked(rt):
        target, problem = _linked(link)     # again: another process may have made it meanwhile
        if target is not None and problem is None:
            return target
        try:
            made = Path(tempfile.mkdtemp(prefix=SHORT_PREFIX, dir=SHORT_PARENT))
        except OSError as exc:
            raise errors.InvalidArgument(
                f"runtime directory {rt} is {len(str(rt))} characters: too long for the unix sockets in it (a "
                f"socket path has at most {IPC_PATH_MAX} characters, so the directory at most {SHORT_ENOUGH}), and "
                f"no short directory could be made for them in {SHORT_PARENT} ({exc.strerror or exc}); set "
                f"VDSP_RUNTIME_DIR to a directory of at most {SHORT_ENOUGH} characters") from None
        temp = rt / f".{SOCKETS_LINK}.{os.getpid()}"
        temp.unlink(missing_ok=True)
        os.symlink(made, temp)
        os.replace(temp, link)      # atomic: a reader sees the old link or the new one
    if problem:
        log.warning("%s named %s, which %s: using %s instead", link, target, problem, made)
    return made


def release_socket_dir(rt: Path, stale: bool = False) -> bool:
    """Remove the sockets' directory of a long runtime dir, and its link, if no socket is left
    in it (``stale``: first remove the socket files no process listens on). True if none is
    left (also when ``rt`` holds its sockets itself)."""
    if len(str(rt)) <= SHORT_ENOUGH or not os.path.lexists(rt / SOCKETS_LINK):
        return True
    with _locked(rt):
        link = rt / SOCKETS_LINK
        target, problem = _linked(link)
        if target is not None and problem is None:
            if stale:
                for entry in os.scandir(target):
                    if entry.is_symlink() or not stat.S_ISSOCK(entry.stat().st_mode) or _listening(entry.path):
                        continue
                    os.unlink(entry.path)
            try:
                os.rmdir(target)
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    return False
                raise
        link.unlink(missing_ok=True)    # no link, or one naming what is gone or not ours
    return True


def _linked(link: Path) -> tuple[Path | None, str | None]:
    """(what ``link`` names, why it may not be used or None); (None, None) without a link.
    Raises InvalidArgument if ``link`` is there but no symlink."""
    try:
        st = os.lstat(link)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISLNK(st.st_mode):
        raise errors.InvalidArgument(f"{link} is not a symlink: the runtime directory's link to the short "
                                     f"directory of its sockets is one; remove {link}")
    target = Path(os.readlink(link))
    if not target.is_absolute() or len(str(target)) > SHORT_ENOUGH:
        return target, "is no short absolute path"
    if not os.path.lexists(target):
        return target, "is gone"
    try:
        check_private_dir(target)
    except errors.InvalidArgument as exc:
        return target, f"is refused ({exc.message})"
    return target, None


@contextlib.contextmanager
def _locked(rt: Path) -> Iterator[None]:
    """Hold a flock on the runtime directory (only our processes can open it: it is ours, 0700)."""
    fd = os.open(rt, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise errors.InvalidArgument(f"runtime directory {rt} stayed locked for {LOCK_WAIT_S:g} s "
                                                 "(a process of its SoC holds it): try again") from None
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)    # releases the lock


def _listening(path: str) -> bool:
    """True if a process accepts connections on the unix socket ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        try:
            sock.connect(path)
        except OSError:
            return False
    return True


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

    ipc: ``.../vdsp0.sock`` -> ``.../vdsp0.fw.sock`` (InvalidArgument if that path is too long);
    tcp: the next port.
    """
    if control.startswith("ipc://"):
        base = control[:-5] if control.endswith(".sock") else control
        return check_endpoint(f"{base}.fw.sock")
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

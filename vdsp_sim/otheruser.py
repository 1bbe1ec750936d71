"""Another user to run a process as, for the tests and benchmarks that need another user's state on
this host (a lock flood, a stranger knocking at a tcp port) — as root or as a normal user:

- root: ``nobody`` (uid and gid 65534);
- a normal user: the first of its subordinate uids and gids (``/etc/subuid``, ``/etc/subgid``, which
  ``useradd`` fills), taken through a user namespace of its own that ``newuidmap``/``newgidmap``
  (Debian's and Ubuntu's ``uidmap`` package, RHEL's ``shadow-utils``) map to them: outside that
  namespace the process is that uid, a user of the host like any other.

A process calls :func:`become` once it has imported what it needs (the venv may live in a home
directory that the other user cannot read) and before it starts a thread (a user namespace is
entered by one thread alone). :func:`unavailable` says why no other user can be had here.
"""
from __future__ import annotations

import ctypes
import os
import pwd
import shutil
import subprocess

NOBODY = 65534
CLONE_NEWUSER = 0x10000000
MAP_TIMEOUT_S = 30.0


def _subordinate(path: str, uid: int) -> int | None:
    """The first id of the first range ``path`` (/etc/subuid or /etc/subgid) gives user ``uid``."""
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read(1 << 20).splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[0] in (name, str(uid)) and parts[1].isdigit() and parts[2].isdigit():
            if int(parts[2]) > 0:
                return int(parts[1])
    return None


def other_ids() -> tuple[int, int] | None:
    """(uid, gid) that :func:`become` takes on this host, or None if there is none."""
    if os.geteuid() == 0:
        return NOBODY, NOBODY
    uid, gid = _subordinate("/etc/subuid", os.getuid()), _subordinate("/etc/subgid", os.getuid())
    if uid is None or gid is None or not shutil.which("newuidmap") or not shutil.which("newgidmap"):
        return None
    return uid, gid


def unavailable() -> str | None:
    """Why this process cannot run anything as another user here; None if it can."""
    if os.geteuid() == 0:
        return None
    if other_ids() is None:
        return ("a second user needs root, or subordinate ids of this user (/etc/subuid and /etc/subgid, "
                "which useradd fills) and newuidmap/newgidmap (Debian's uidmap package)")
    probe = subprocess.run(["unshare", "--user", "true"], capture_output=True, text=True, timeout=30) \
        if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        why = probe.stderr.strip() if probe is not None else "no unshare(1)"
        return f"this host lets no normal user make a user namespace ({why})"
    return None


def become() -> int:
    """Run as the other user from now on (see the module's docstring); returns its uid on the host.
    Raises OSError if that is not possible here."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        return NOBODY
    ids = other_ids()
    if ids is None:
        raise OSError(1, unavailable() or "no other user")
    uid, gid = ids
    me = os.getpid()
    ready_r, ready_w = os.pipe()
    helper = os.fork()
    if helper == 0:                     # stays in our namespace: maps the new one from outside
        code = 1
        try:
            os.close(ready_w)
            if os.read(ready_r, 1) == b"!":
                code = 0 if all(subprocess.run([tool, str(me), "0", str(first), "1"], stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL, timeout=MAP_TIMEOUT_S).returncode == 0
                                for tool, first in (("newuidmap", uid), ("newgidmap", gid))) else 1
        finally:
            os._exit(code)
    os.close(ready_r)
    libc = ctypes.CDLL(None, use_errno=True)
    failed = libc.unshare(CLONE_NEWUSER) != 0
    err = ctypes.get_errno()
    os.write(ready_w, b"x" if failed else b"!")
    os.close(ready_w)
    _, status = os.waitpid(helper, 0)
    if failed:
        raise OSError(err, f"cannot make a user namespace: {os.strerror(err)}")
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError(1, f"newuidmap/newgidmap could not map uid {uid} and gid {gid} for this process")
    os.setgroups([])
    os.setgid(0)
    os.setuid(0)            # uid 0 of the namespace is the subordinate uid on the host
    return uid

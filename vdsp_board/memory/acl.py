"""Owners' access lists in the DDR directory: grants of memory to other owners, and the
CURVE key that speaks for an owner over tcp (the format and the rule are ``protocol.acl``).

An owner's list is the file ``vdsp-{owner:06x}.acl`` beside its segments, written only by
the owner (a private temporary file renamed into place, mode 0600). Keeping grants there,
not in a server's memory, makes them work the same in relay and direct mode, survive a
relay or firmware restart, and die with their owner: the owner unlinks the file before
its lock at exit, and a dead owner's file is reaped with its segments (``vdsp_board.memory.ddr``).

Readers (the relay, every firmware, ``register`` in another client) accept a list only if
it is a regular file of this user of at most MAX_ACL_BYTES, well formed, written for the
owner's current lock file, and that lock is held: a dead owner's grants are void at once,
before the reaper has removed them.
"""
from __future__ import annotations

import collections
import fcntl
import os
import stat
import threading

from protocol import acl, errors
from vdsp_board.memory import ddr

SUFFIX = ".acl"
MAX_CACHED = 1024       # owners whose parsed list a reader keeps


def acl_name(owner: int) -> str:
    return f"vdsp-{owner:06x}{SUFFIX}"


# --- the owner's side ---------------------------------------------------------------------------

class OwnList:
    """This process's access list as one owner: grants by token, and its tcp key.

    Invariant: the file holds exactly ``_grants`` and ``_key`` once a call returns (no file
    when both are empty).
    """

    def __init__(self, owner: ddr.Owner) -> None:
        self.owner = owner
        self._mutex = threading.Lock()
        self._grants: dict[int, acl.AclEntry] = {}
        self._next = 1
        self._key: str | None = None

    @property
    def path(self) -> str:
        return os.path.join(self.owner.dir, acl_name(self.owner.id))

    def grant(self, offset: int, size: int, grantee: int) -> int:
        """Publish a grant; its token (for :meth:`revoke`).

        Raises SysInvalidArgument (bad range or grantee, MAX_GRANTS reached, owner closed),
        SysRegisterMemFailed (the file cannot be written).
        """
        try:
            grant = acl.check_grant(offset, size, grantee)
        except errors.InvalidArgument as exc:
            raise errors.SysInvalidArgument(exc.message) from None
        with self._mutex:
            if len(self._grants) >= acl.MAX_GRANTS:
                raise errors.SysInvalidArgument(
                    f"owner 0x{self.owner.id:06x} already has {acl.MAX_GRANTS} grants (the limit): revoke one first")
            token, self._next = self._next, self._next + 1
            self._grants[token] = grant
            try:
                self._write()
            except BaseException:
                del self._grants[token]
                raise
            return token

    def revoke(self, token: int) -> bool:
        """Withdraw a grant; False if it was not in force. Raises SysRegisterMemFailed."""
        with self._mutex:
            grant = self._grants.pop(token, None)
            if grant is None:
                return False
            try:
                self._write()
            except BaseException:
                self._grants[token] = grant
                raise
            return True

    def set_key(self, key: str) -> None:
        """Name the CURVE public key (Z85) that speaks for this owner over tcp."""
        with self._mutex:
            if key == self._key:
                return
            old, self._key = self._key, key
            try:
                self._write()
            except BaseException:
                self._key = old
                raise

    def _write(self) -> None:
        """Write the file (or remove it when empty). Raises SysInvalidArgument / SysRegisterMemFailed."""
        owner = self.owner
        if owner.closed or owner.pid != os.getpid():
            raise errors.SysInvalidArgument(f"DDR owner 0x{owner.id:06x} is closed")
        path = self.path
        if not self._grants and self._key is None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise errors.SysRegisterMemFailed(f"cannot remove access list {path}: {exc}") from exc
            return
        try:
            data = acl.encode(acl.AccessList(os.fstat(owner.lock_fd).st_ino,
                                             tuple(self._grants.values()), self._key))
            tmp = path + ".tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except errors.InvalidArgument as exc:
            raise errors.SysInvalidArgument(exc.message) from None
        except OSError as exc:
            raise errors.SysRegisterMemFailed(f"cannot write access list {path}: {exc}") from exc


_lists_mutex = threading.Lock()
_lists: dict[int, OwnList] = {}     # id(owner) -> its list (owners live as long as this process uses them)


def own_list(owner: ddr.Owner | None = None) -> OwnList:
    """The access list of ``owner`` (default: this process's current owner)."""
    owner = owner or ddr.current_owner()
    with _lists_mutex:
        lst = _lists.get(id(owner))
        if lst is None or lst.owner is not owner:
            for key in [k for k, v in _lists.items() if v.owner.closed]:
                del _lists[key]     # bounded: closed owners' lists go
            lst = _lists[id(owner)] = OwnList(owner)
        return lst


def _after_fork_in_child() -> None:
    global _lists_mutex
    _lists_mutex = threading.Lock()
    _lists.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


# --- readers --------------------------------------------------------------------------------------

class Reader:
    """Live access lists of other owners, from the DDR directory (``ddr.shm_dir()`` at call time)."""

    def __init__(self, directory: str | None = None, max_cached: int = MAX_CACHED) -> None:
        self._dir = directory
        self._max = max_cached
        self._mutex = threading.Lock()
        self._cache: collections.OrderedDict[tuple[str, int], tuple[tuple, acl.AccessList]] = \
            collections.OrderedDict()

    def get(self, owner: int) -> acl.AccessList:
        """``owner``'s list if it is valid and the owner alive, else ``acl.NONE``. Never raises."""
        if not 0 < owner < ddr.MAX_OWNER:
            return acl.NONE
        directory = self._dir or ddr.shm_dir()
        lst = self._parsed(directory, owner)
        if lst is acl.NONE or not _alive(os.path.join(directory, ddr.lock_name(owner)), lst.lock):
            return acl.NONE
        return lst

    def grants(self, owner: int) -> tuple[acl.AclEntry, ...]:
        return self.get(owner).grants

    def _parsed(self, directory: str, owner: int) -> acl.AccessList:
        path = os.path.join(directory, acl_name(owner))
        try:
            st = os.lstat(path)
        except OSError:
            return acl.NONE
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > acl.MAX_ACL_BYTES:
            return acl.NONE
        key, ident = (directory, owner), (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        with self._mutex:
            hit = self._cache.get(key)
            if hit is not None and hit[0] == ident:
                self._cache.move_to_end(key)
                return hit[1]
        lst = _read(path)
        with self._mutex:
            self._cache[key] = (ident, lst)
            self._cache.move_to_end(key)
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return lst


def _read(path: str) -> acl.AccessList:
    """Parse the list at ``path`` (no symlink, no FIFO, ours, bounded); ``acl.NONE`` if unusable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return acl.NONE
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return acl.NONE
        data = os.read(fd, acl.MAX_ACL_BYTES + 1)
    except OSError:
        return acl.NONE
    finally:
        os.close(fd)
    try:
        return acl.decode(data)
    except errors.VdspError:
        return acl.NONE


def _alive(lock_path: str, inode: int) -> bool:
    """True if ``lock_path`` is the lock file ``inode`` and someone holds it (its owner lives)."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_ino != inode:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True         # held exclusively: the owner lives
        return False            # we could lock it: nobody holds it (closing the fd unlocks)
    except OSError:
        return False
    finally:
        os.close(fd)

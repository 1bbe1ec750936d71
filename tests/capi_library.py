"""libvdsp_client.so for the tests that link C programs with it, built once per test run.

``capi_native.build(out)`` costs ~5 s of CPU (eight sources at -O2), and five fixtures of four
modules asked for it (tests/integration/test_capi_native.py, test_capi_hb_native.py twice,
test_conformance.py, test_capi_packed.py). :func:`build` builds it, exactly so, once per run
into the run's own directory and copies that build into ``out``: the first fixture to ask
still compiles it (with ``-Werror``; a failure fails that fixture), the others get its bytes.

Invariants: the build is keyed by a hash of everything that goes into it (the native sources and
headers, the generated headers' text, vdsp_sim/capi_native.py, which holds the flags, the
compiler's command and ``--version``, pyzmq's libzmq files), so a changed input builds again.
It lives only under the run's directory (``VDSP_TEST_LOCK_DIR``, made 0700 by the xdist
controller, tests/conftest.py) or, in a serial run, a private directory of this process, never
in a host-wide path another user could write; a build is made under an exclusive lock and
marked done last, so a worker waiting on it sees a whole build or makes one itself.
"""
from __future__ import annotations

import atexit
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from vdsp_sim import capi_native

_private: list[Path] = []     # a serial run's directory of its own (removed at exit)


def _run_dir() -> Path:
    shared = os.environ.get("VDSP_TEST_LOCK_DIR")
    if shared and os.path.isdir(shared) and not os.path.islink(shared) and os.stat(shared).st_uid == os.getuid():
        return Path(shared)
    if not _private:
        _private.append(Path(tempfile.mkdtemp(prefix="vcapilib-")))
        atexit.register(shutil.rmtree, _private[0], True)
    return _private[0]


def key() -> str:
    """The hash of every input of ``capi_native.build``."""
    h = hashlib.sha256()
    for path in sorted([*capi_native.NATIVE.rglob("*"), *capi_native.HB_INCLUDE.rglob("*"),
                        Path(capi_native.__file__)]):
        if path.is_file():
            h.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(capi_native.constants_header().encode() + capi_native.tables_header().encode())
    version = subprocess.run([*capi_native.cc(), "--version"], capture_output=True, text=True, timeout=60)
    h.update(repr((capi_native.cc(), version.returncode, version.stdout)).encode())
    for lib in capi_native.bundled_libzmq():
        st = lib.stat()
        h.update(repr((str(lib), st.st_size, st.st_mtime_ns)).encode())
    return h.hexdigest()


LOCK_WAIT_S = 900.0     # the holder's build: its compile is bounded by capi_native (300 s), on a loaded host


def _lock(fd: int, name: str) -> None:
    """Take the exclusive lock on ``fd`` within LOCK_WAIT_S (another worker builds meanwhile;
    a holder that dies releases it); else raise, naming the build."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the build {name} stayed locked by another test process for "
                                   f"{LOCK_WAIT_S:.0f} s") from None
            time.sleep(0.05)


def build(out: Path) -> Path:
    """What ``capi_native.build(out)`` makes (the library, its generated headers in
    ``out/include``, libzmq beside it), from this run's one build; the library's path."""
    where = _run_dir() / f"capi-{key()[:32]}"
    lock = os.open(_run_dir() / f"{where.name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        _lock(lock, where.name)
        if not (where / ".done").is_file():
            shutil.rmtree(where, ignore_errors=True)     # a build that died half way
            capi_native.build(where)
            (where / ".done").write_text("")
    finally:
        os.close(lock)      # closing releases the lock
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(where, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".done"))
    return out / capi_native.LIBRARY

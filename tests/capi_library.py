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


def build(out: Path) -> Path:
    """What ``capi_native.build(out)`` makes (the library, its generated headers in
    ``out/include``, libzmq beside it), from this run's one build; the library's path."""
    where = _run_dir() / f"capi-{key()[:32]}"
    lock = os.open(_run_dir() / f"{where.name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.lockf(lock, fcntl.LOCK_EX)
        if not (where / ".done").is_file():
            shutil.rmtree(where, ignore_errors=True)     # a build that died half way
            capi_native.build(where)
            (where / ".done").write_text("")
    finally:
        os.close(lock)      # closing releases the lock
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(where, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".done"))
    return out / capi_native.LIBRARY

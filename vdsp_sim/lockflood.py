"""A lock flood: many flock(2) locks held by another user, the host-wide state that any local user
can grow and that the SoC's identity checks must not depend on (``/proc/locks`` lists them all).

``LockFlood(n)`` starts processes that become another user (``vdsp_sim.otheruser``: nobody under
root, a subordinate uid of a normal user) and each hold as many locks as its open-file limit allows
(the hard RLIMIT_NOFILE; raised to 1M where root may), one ``open`` + ``flock(LOCK_SH)`` each,
spread over FILES files (so no file's lock list grows long), until ``close()``.
Used by tests and ``vdsp bench identity``.
"""
from __future__ import annotations

import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from vdsp_sim import otheruser

FILES = 512             # files per holder process (about 40 locks each: short lock lists, few files to remove)

_HOLDER = """
import fcntl, os, resource, sys
from vdsp_sim.otheruser import become
d, n, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(hard, n + 64), max(hard, n + 64)))
except (ValueError, OSError):
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
become()
paths = [os.path.join(d, f"{os.getpid()}-{i}") for i in range(min(files, n))]
for p in paths:
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600))
for k in range(n):
    fcntl.flock(os.open(paths[k % len(paths)], os.O_RDONLY), fcntl.LOCK_SH)
print("ready", flush=True)
sys.stdin.read()
"""


class LockFlood:
    """``n`` foreign flock locks while open (a context manager)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.dir: Path | None = None
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> "LockFlood":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "LockFlood":
        """Hold the locks; returns once every one is held. Raises PermissionError if there is no
        other user to hold them (``vdsp_sim.otheruser.unavailable`` says why)."""
        why = otheruser.unavailable()
        if why is not None:
            raise PermissionError(f"a lock flood of another user: {why}")
        if self.n <= 0:
            return self
        self.dir = Path(tempfile.mkdtemp(prefix="vdsp-lockflood-"))
        self.dir.chmod(0o777)
        try:
            left, per_process = self.n, _per_process()
            while left > 0:
                chunk = min(left, per_process)
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-c", _HOLDER, str(self.dir), str(chunk), str(FILES)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/"))
                left -= chunk
            for proc in self.procs:
                if proc.stdout is None or proc.stdout.readline().strip() != "ready":
                    raise RuntimeError(f"lock flood process {proc.pid} failed (exit {proc.poll()})")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        self.procs = []
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def _per_process() -> int:
    """Locks one holder can take: 1M if root may raise RLIMIT_NOFILE (CAP_SYS_RESOURCE), else its hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, 1 << 20))
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))     # back: only asked whether we may
        return (1 << 20) - 64
    except (ValueError, OSError):
        return max(hard - 64, 1)

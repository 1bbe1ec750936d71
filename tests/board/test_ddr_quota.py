"""A per-owner DDR quota: one client filled the DDR tmpfs and no other client could allocate
4 KiB. Now an owner gets HB_SYS_OUT_OF_MEMORY past its quota (``VDSP_DDR_QUOTA``, by default
25 % of the DDR file system) and the others keep allocating."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arm_side.memory import MemoryManager
from protocol import errors
from tests import privilege
from tests.privilege import require
from vdsp_board.memory import ddr

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20

OTHER_CLIENT = """
from arm_side.memory import MemoryManager
with MemoryManager() as mm:
    mm.alloc(4096).write(b"still room")
print("allocated")
"""


def other_client_allocates(shm: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", OTHER_CLIENT], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, VDSP_SHM_DIR=str(shm)))


def test_an_owner_past_its_quota_gets_out_of_memory_and_others_still_allocate(shm, monkeypatch):
    monkeypatch.setenv("VDSP_DDR_QUOTA", "3M")
    mm = MemoryManager()
    try:
        first = [mm.alloc(MiB), mm.alloc(MiB), mm.alloc_cached(MiB)]
        with pytest.raises(errors.SysOutOfMemory) as info:
            mm.alloc(4096)
        assert info.value.code == -6000130
        assert "quota of 3145728 bytes" in info.value.message and "VDSP_DDR_QUOTA" in info.value.message
        assert len([n for n in os.listdir(shm) if not n.endswith(".lock")]) == 3    # the refusal made no file
        assert other_client_allocates(shm).stdout.strip() == "allocated"
        first[0].free()                                  # freeing gives the quota back, exactly
        mm.alloc(MiB)
        with pytest.raises(errors.SysOutOfMemory):
            mm.alloc(1)
    finally:
        mm.close()


def test_a_malformed_quota_is_a_clear_invalid_argument(shm, monkeypatch):
    for bad in ("lots", "-5", "0%", "150%"):
        monkeypatch.setenv("VDSP_DDR_QUOTA", bad)
        with pytest.raises(errors.SysInvalidArgument) as info:
            MemoryManager().alloc(4096)
        assert "VDSP_DDR_QUOTA" in info.value.message
    monkeypatch.setenv("VDSP_DDR_QUOTA", "50%")
    with MemoryManager() as mm:
        assert mm.alloc(4096).size == 4096


def on_private_tmpfs(size: str, tmpfs: Path, *cmd: str) -> subprocess.CompletedProcess:
    """``cmd`` run with a fresh tmpfs of ``size`` mounted at ``tmpfs`` as its DDR directory, in a mount
    namespace of its own (a normal user's too: tests/privilege.py); prints, last, the files left there."""
    prefix, why_not = privilege.mount_namespace()
    require(why_not)
    assert prefix is not None
    mount = ('mount -t tmpfs -o "size=$1,mode=0700" tmpfs "$2" && d="$2" && shift 2 && "$@" '
             '&& echo left "$(ls -A "$d" | wc -l)"')
    return subprocess.run([*prefix, "sh", "-c", mount, "sh", size, str(tmpfs), *cmd], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, VDSP_SHM_DIR=str(tmpfs), PYTHONPATH=str(ROOT)))


GREEDY = """
from arm_side.memory import MemoryManager
from protocol import errors
mm, held = MemoryManager(), 0
try:
    while True:
        mm.alloc(1 << 20); held += 1 << 20
except errors.SysOutOfMemory as exc:
    print(held, exc.code)
import sys; sys.stdout.flush()
import subprocess
print(subprocess.run([sys.executable, "-c", sys.argv[1]], capture_output=True, text=True).stdout.strip())
"""


def test_one_client_cannot_fill_a_ddr_tmpfs_by_default(tmp_path):
    """The reported case on a real tmpfs of 16 MiB: a client allocating until it fails stops at
    its default quota, and another client still gets 4 KiB."""
    tmpfs = tmp_path / "ddr"
    tmpfs.mkdir()
    out = on_private_tmpfs("16m", tmpfs, sys.executable, "-c", GREEDY, OTHER_CLIENT)
    assert out.returncode == 0, out.stdout + out.stderr
    held, code, other, _, left = out.stdout.split()
    assert code == "-6000130" and 0 < int(held) <= 16 * MiB * ddr.DEFAULT_QUOTA_SHARE // 100, out.stdout
    assert other == "allocated", out.stdout + out.stderr
    assert left == "0", out.stdout          # both exited: nothing left


GREEDY_HOLDER = """
import sys
from arm_side.memory import MemoryManager
from protocol import errors
mm, held = MemoryManager(), 0
try:
    while True:
        mm.alloc(1 << 20)
        held += 1 << 20
except errors.SysOutOfMemory:
    pass
print(held, flush=True)
sys.stdin.read()        # hold it until told to go
"""


def greedy_clients(ddr_dir: Path, n: int) -> list[int]:
    """``n`` clients, one after the other, each allocating 1 MiB buffers until refused and
    keeping them: the bytes each got."""
    procs, got = [], []
    try:
        for _ in range(n):
            proc = subprocess.Popen([sys.executable, "-c", GREEDY_HOLDER], cwd=ROOT, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True,
                                    env=dict(os.environ, VDSP_SHM_DIR=str(ddr_dir), PYTHONPATH=str(ROOT)))
            procs.append(proc)
            got.append(int(proc.stdout.readline()))
    finally:
        for proc in procs:
            proc.stdin.close()
            proc.wait(60)
    return got


def test_five_greedy_clients_on_a_256_mib_ddr_each_get_a_share(tmp_path, monkeypatch):
    """Before, the quota was each client's own count: four clients that allocated until
    refused filled a 256 MiB DDR (64 MiB each) and the fifth got 0 bytes. The SoC-wide reserve
    (checked under one lock on the DDR directory) leaves each next client half of what is left."""
    for var in ("VDSP_DDR_QUOTA", "VDSP_DDR_RESERVE"):
        monkeypatch.delenv(var, raising=False)
    tmpfs = tmp_path / "ddr"
    tmpfs.mkdir()
    five = f"import json; from pathlib import Path; from tests.board.test_ddr_quota import greedy_clients; " \
           f"print(json.dumps(greedy_clients(Path({str(tmpfs)!r}), 5)))"
    out = on_private_tmpfs("256m", tmpfs, sys.executable, "-c", five)
    assert out.returncode == 0, out.stdout + out.stderr
    got = json.loads(out.stdout.splitlines()[0])
    assert all(g <= 256 * MiB * ddr.DEFAULT_QUOTA_SHARE // 100 for g in got), got
    assert got[4] >= 8 * MiB, [g // MiB for g in got]       # the fifth gets a share, not 0
    assert sum(got) < 256 * MiB

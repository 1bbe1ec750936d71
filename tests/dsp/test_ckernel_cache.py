"""The disk cache of kernel libraries (dsp_side.ckernel.cache): a library stored is read back by
another process's build (no compile), and a cache directory or entry that is not this user's
own private file is never used."""
from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from dsp_side.ckernel import cache

KEY = "ab" * 32
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "vdsp-sim" / "ckernels"


def test_a_stored_library_is_read_back_from_a_private_directory(home):
    cache.store(KEY, b"\x7fELF library")
    assert cache.load(KEY) == b"\x7fELF library"
    assert oct(home.stat().st_mode & 0o777) == "0o700" and oct((home / f"{KEY}.so").stat().st_mode & 0o777) == "0o600"
    assert cache.load("cd" * 32) is None and cache.load("../x") is None


def test_a_directory_others_can_write_or_a_symlink_is_no_cache(home, tmp_path):
    cache.store(KEY, b"lib")
    home.chmod(0o770)
    assert cache.load(KEY) is None
    home.chmod(0o700)
    elsewhere = tmp_path / "planted"
    home.rename(elsewhere)
    home.symlink_to(elsewhere)                 # a planted link to a directory with the entry
    assert cache.load(KEY) is None
    cache.store("cd" * 32, b"x")
    assert not (elsewhere / f"{'cd' * 32}.so").exists()


def test_an_entry_that_is_a_symlink_or_writable_by_others_is_not_read(home, tmp_path):
    cache.store(KEY, b"lib")
    entry = home / f"{KEY}.so"
    entry.chmod(0o666)
    assert cache.load(KEY) is None
    entry.unlink()
    (tmp_path / "evil.so").write_bytes(b"evil")
    entry.symlink_to(tmp_path / "evil.so")
    assert cache.load(KEY) is None


@pytest.mark.skipif(bool(__import__("vdsp_sim.ctoolchain", fromlist=["missing"]).missing()), reason="no C compiler")
def test_a_second_process_builds_the_stock_image_without_compiling(home, tmp_path):
    """As two `vdsp up` do: the second build's library comes from the disk cache, the same bytes."""
    prog = ("import sys, hashlib; from pathlib import Path; from dsp_side.ckernel import build; "
            "from protocol.contract import pointcloud_ops as p; "
            "build._compile = (lambda *a: sys.exit('compiled')) if sys.argv[1] == 'cached' else build._compile; "
            "print(hashlib.sha256(build.compile_tree(Path('dsp_side/firmware_src/stock'), [p.ENCODE, p.TRANSPOSE]))"
            ".hexdigest())")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    first = subprocess.run([sys.executable, "-c", prog, "fresh"], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([sys.executable, "-c", prog, "cached"], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout and len(list(home.glob("*.so"))) == 1


@pytest.mark.skipif(bool(__import__("vdsp_sim.ctoolchain", fromlist=["missing"]).missing()), reason="no C compiler")
def test_a_second_trees_build_compiles_its_own_files_and_not_the_runtime(home, tmp_path):
    """The runtime's object file is cached apart from the trees' libraries: another tree built in
    another process compiles that tree's files only, and its library holds the runtime's functions.
    Holds docs/dsp_kernels.md: "a tree's build compiles the tree's own files and links the runtime's
    object"."""
    log = tmp_path / "cc.log"
    wrapper = tmp_path / "cc"      # the C compiler, each command it runs written down
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec cc "$@"\n')
    wrapper.chmod(0o755)
    trees = [tmp_path / "one", tmp_path / "two"]
    for n, tree in enumerate(trees):
        tree.mkdir()
        (tree / "k.c").write_text(f"int k_answer(void) {{ return {n + 41}; }}\n")
    prog = ("import sys, ctypes; from pathlib import Path; from dsp_side.ckernel import build; "
            "lib = ctypes.CDLL(str(build.library_for(Path(sys.argv[1]), []))); "
            "print(lib.k_answer(), hasattr(lib, 'vdsp_idma_copy_2d'))")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), CC=str(wrapper))
    compiled = []
    for tree in trees:
        log.write_text("")
        out = subprocess.run([sys.executable, "-c", prog, str(tree)], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0 and out.stdout.split() == [str(41 + trees.index(tree)), "True"], out.stderr
        compiled.append(sorted(Path(line.split(" -c ")[1].split()[0]).name for line in log.read_text().splitlines()
                               if " -c " in line))
    assert compiled == [["k.c", "vdsp_rt.c"], ["k.c"]], compiled
    assert len(list(home.glob("*.o"))) == 1 and len(list(home.glob("*.so"))) == 2
    docs = " ".join((ROOT / "docs" / "dsp_kernels.md").read_text().split())
    assert "a tree's build compiles the tree's own files and links the runtime's object" in docs


@pytest.mark.skipif(bool(__import__("vdsp_sim.ctoolchain", fromlist=["missing"]).missing()), reason="no C compiler")
def test_a_process_running_a_source_trees_kernels_leaves_no_file_when_killed(tmp_path):
    """A process that runs the stock tree's C kernels without an image (the loopback SoC, the fuzzer,
    the in-process point-cloud stages) holds its kernel library where nothing is left when it dies,
    even by SIGKILL (no atexit): each such process killed in a test run left a vdsp-kernels-*
    directory in /tmp. Holds docs/dsp_kernels.md's "a memory file of that process (... a memfd,
    so nothing is left on disk however the process ends)"."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    prog = ("import sys, numpy as np; from vdsp_sim import pointcloud_inprocess as p; "
            "_, transpose = p.c_kernels(); out = np.full(256, 7, np.uint8); "
            "transpose([np.arange(256, dtype=np.uint8)], [out], dim=4, layout='cpm', max_pillars=64, max_points=1, "
            "pillar_stride=64, num_pillars=64); print(out[:8].tolist(), flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", prog], cwd=ROOT, env=dict(os.environ, TMPDIR=str(tmp)),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # the child's first line within 120 s (a deadline of its own: a child that hangs is a failure)
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "the child printed nothing in 120 s"
        line = proc.stdout.readline()
        # the kernel ran: plane c holds byte c of each slot's word (slots 0, 1: bytes 0..3, 4..7)
        assert line.strip() == "[0, 4, 8, 12, 16, 20, 24, 28]", proc.stderr.read() if not line else line
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert list(tmp.iterdir()) == []


def test_the_least_recently_used_entry_goes_first(home):
    """An entry read is kept before one only written: the stock image's libraries, read at every
    SoC's start, outlive a run of more than MAX_ENTRIES other kernels (the suite's C-kernel tests
    had pushed them out, so each run began by compiling the stock image again)."""
    keys = [f"{i:064x}" for i in range(cache.MAX_ENTRIES)]
    for i, key in enumerate(keys):
        cache.store(key, b"lib %d" % i)
        os.utime(home / f"{key}.so", ns=(10**18 + i * 10**9,) * 2)      # written in this order, a second apart
    assert cache.load(keys[0]) == b"lib 0"                              # the oldest written, read now
    cache.store("ff" * 32, b"one more")
    left = {p.stem for p in home.glob("*.so")}
    assert keys[0] in left and keys[1] not in left and len(left) == cache.MAX_ENTRIES


BUILDER = ("import sys, hashlib; from pathlib import Path; from dsp_side.ckernel import build; "
           "from protocol.contract import pointcloud_ops as p; real = build._compile\n"
           "def held(*a):\n"
           "    print('compiling', flush=True); sys.stdin.readline(); return real(*a)\n"
           "build._compile = {'held': held, 'refused': lambda *a: sys.exit('compiled'), 'real': real}[sys.argv[1]]\n"
           "print(hashlib.sha256(build.compile_tree(Path('dsp_side/firmware_src/stock'), [p.ENCODE, p.TRANSPOSE]))"
           ".hexdigest(), flush=True)")


def _builder(how: str, tmp_path):
    return subprocess.Popen([sys.executable, "-c", BUILDER, how], cwd=ROOT,
                            env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _first_line(proc, timeout_s: float = 120) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    assert ready, f"no line in {timeout_s} s"
    return proc.stdout.readline().strip()


@pytest.mark.skipif(bool(__import__("vdsp_sim.ctoolchain", fromlist=["missing"]).missing()), reason="no C compiler")
def test_two_processes_building_the_same_kernels_at_once_compile_them_once(home, tmp_path):
    """As SoCs started side by side do (a test run's workers, two `vdsp up`): the second waits for
    the first's build and reads it from the cache; it never compiles (its compiler exits)."""
    first = _builder("held", tmp_path)
    second = None
    try:
        assert _first_line(first) == "compiling"        # the first holds the build of the key
        second = _builder("refused", tmp_path)          # misses the cache meanwhile: waits
        first.stdin.write("go\n")
        first.stdin.flush()
        out1, err1 = first.communicate(timeout=300)
        out2, err2 = second.communicate(timeout=300)
        assert first.returncode == 0, err1
        assert second.returncode == 0, err2             # 'compiled' (exit 1) had it compiled
        assert out2 == out1 and len(list(home.glob("*.so"))) == 1
        assert [p.name for p in home.iterdir() if not p.name.endswith((".so", ".o"))] == []     # no lock file left
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=60)


@pytest.mark.skipif(bool(__import__("vdsp_sim.ctoolchain", fromlist=["missing"]).missing()), reason="no C compiler")
def test_a_builder_killed_mid_build_holds_nobody_up(home, tmp_path):
    """The kernel drops the lock of a builder that dies (SIGKILL: no cleanup): the next build of
    the key takes it without waiting, and leaves no lock file (it unlinks the one the dead left)."""
    dead = _builder("held", tmp_path)
    try:
        assert _first_line(dead) == "compiling"
    finally:
        dead.kill()
        dead.communicate(timeout=60)
    left = [p.name for p in home.iterdir()]
    assert len(left) == 1 and left[0].startswith(".") and left[0].endswith(".lock"), left
    with cache.building(left[0][1:-len(".lock")], wait_s=0.0) as held:
        assert held is True
    assert list(home.iterdir()) == []


def test_a_lock_held_too_long_delays_a_build_and_never_stops_it(home):
    """docs/security.md: "a waiter stops waiting after 5 minutes, so a same-user process that holds
    a lock delays a build, never stops it" (and docs/dsp_kernels.md's "after 5 minutes"): a lock
    another open file holds makes ``building`` wait until its deadline, then yield False (build
    without it); the deadline by default is those 5 minutes."""
    import fcntl
    import time
    assert cache.LOCK_WAIT_S == 5 * 60
    docs = (ROOT / "docs" / "security.md").read_text()
    assert "a waiter stops waiting after 5 minutes" in " ".join(docs.split())
    home.mkdir(parents=True, mode=0o700)
    holder = os.open(home / f".{KEY}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        t0 = time.monotonic()
        with cache.building(KEY, wait_s=0.3) as held:
            waited = time.monotonic() - t0
            assert held is False and waited >= 0.3, waited
    finally:
        os.close(holder)
    assert (home / f".{KEY}.lock").exists()          # the holder's file: not the waiter's to remove


def test_a_lock_path_that_is_a_symlink_is_not_followed(home, tmp_path):
    """A `.KEY.lock` planted as a symlink (a user's cache directory is private, but every file we
    open could be a symlink): no lock is taken and the build goes on without one; the symlink's
    target is neither created nor touched (docs/security.md: "where it cannot be (a symlink,
    another's file) the build goes on without it")."""
    home.mkdir(parents=True, mode=0o700)
    target = tmp_path / "elsewhere"
    (home / f".{KEY}.lock").symlink_to(target)
    with cache.building(KEY, wait_s=1.0) as held:
        assert held is False
    assert not target.exists() and (home / f".{KEY}.lock").is_symlink()


def test_past_the_byte_bound_the_least_recently_used_go_until_the_rest_fit(home, monkeypatch):
    """Few large entries are bounded by their bytes, not by their count: past MAX_TOTAL_BYTES the
    least recently used go, as many as it takes, and the one just stored stays."""
    monkeypatch.setattr(cache, "MAX_TOTAL_BYTES", 1000)
    keys = [f"{i:064x}" for i in range(4)]
    for i, key in enumerate(keys[:3]):
        cache.store(key, bytes([i]) * 300)
        os.utime(home / f"{key}.so", ns=(10**18 + i * 10**9,) * 2)      # written in this order, a second apart
    assert cache.load(keys[0]) == bytes([0]) * 300                      # the oldest written, read now: kept
    cache.store(keys[3], b"x" * 700)                                    # 1,600 bytes: 600 over
    left = {p.stem for p in home.glob("*.so")}
    assert left == {keys[0], keys[3]}, left
    assert sum(p.stat().st_size for p in home.glob("*.so")) <= 1000


_WHERE = ('#include "vdsp_kernel.h"\n#include <assert.h>\n'
          'int k_where(int x) { assert(x >= 0); if (x > 1000) VDSP_LOGW("big %d", x); return x + 1; }\n'
          'const char *k_file(void) { return __FILE__; }\n')
_BUILD = ("import sys, ctypes, hashlib, tempfile; from pathlib import Path; from dsp_side.ckernel import build; "
          "lib = build.compile_tree(Path(sys.argv[1]), [], sanitize=sys.argv[2] or None); "
          "d = tempfile.TemporaryDirectory(); path = Path(d.name) / 'k.so'; path.write_bytes(lib); "
          "k = ctypes.CDLL(str(path)); k.k_file.restype = ctypes.c_char_p; "
          "print(hashlib.sha256(lib).hexdigest(), k.k_file().decode())")


@pytest.mark.skipif(bool(__import__("vdsp_sim.ctoolchain", fromlist=["missing"]).missing()), reason="no C compiler")
def test_a_tree_copied_elsewhere_builds_the_same_library_and_is_read_from_the_cache(tmp_path):
    """Where a tree lies is not in its library (its files are compiled with -ffile-prefix-map:
    __FILE__ names a file by its place in the tree), so a copy elsewhere, built by another process,
    compiles nothing; a sanitizer's build, whose reports name full paths, is still by its path."""
    log = tmp_path / "cc.log"
    wrapper = tmp_path / "cc"      # the C compiler, each command it runs written down
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec cc "$@"\n')
    wrapper.chmod(0o755)
    trees = [tmp_path / "one", tmp_path / "elsewhere" / "deeper" / "two"]
    for tree in trees:
        tree.mkdir(parents=True)
        (tree / "k.c").write_text(_WHERE)

    def build(tree: Path, sanitize: str = "", cache_dir: str = "cache") -> tuple[list[str], list[str]]:
        log.write_text("")
        env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / cache_dir), CC=str(wrapper))
        out = subprocess.run([sys.executable, "-c", _BUILD, str(tree), sanitize], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        compiled = [Path(line.split(" -c ")[1].split()[0]).name for line in log.read_text().splitlines()
                    if " -c " in line]
        return out.stdout.split(), compiled

    (first, file_one), compiled_one = build(trees[0])
    (second, file_two), compiled_two = build(trees[1])
    assert "k.c" in compiled_one and compiled_two == [], compiled_two      # the copy: read from the cache
    assert first == second and file_one == file_two == "./k.c"
    (again, _), compiled_again = build(trees[1], cache_dir="fresh")       # compiled again, nothing cached:
    assert "k.c" in compiled_again and again == first                     # the same bytes from the copy
    _, sanitized_one = build(trees[0], "undefined")
    (_, sanitized_file), sanitized_two = build(trees[1], "undefined")
    assert "k.c" in sanitized_one and "k.c" in sanitized_two               # by its path: compiled for each
    assert sanitized_file == str(trees[1] / "k.c")
    docs = " ".join((ROOT / "docs" / "dsp_kernels.md").read_text().split())    # the promise this test holds
    assert "a tree copied elsewhere builds the same bytes" in docs

"""Compile an operator source tree's C/C++ kernels into the image's kernel library.

Every ``*.c`` / ``*.cc`` / ``*.cpp`` of the tree (sorted, ``__pycache__`` aside) and the runtime
are compiled with the host compiler and ``-Wall -Wextra -Werror`` against the SDK's headers and
the generated ``vdsp_kernel_params.h``, then linked into one shared library whose bytes go into
the signed payload. The flags are fixed here: every image is built alike, but for ``sanitize``:
``"undefined"`` (UndefinedBehaviorSanitizer, ``-fsanitize=undefined -fno-sanitize-recover=all``:
the first report ends the firmware process, exit status 1, the report on its stderr, the core's
log) or ``"address"`` (AddressSanitizer, ``-fsanitize=address``). ASan's runtime must be the
first library of the process, before the (uninstrumented) Python interpreter's: the image's
header says ``"sanitize": "address"``, and the core starts such a firmware as a fresh
interpreter with the compiler's ``libasan`` in ``LD_PRELOAD`` (:func:`asan_runtime`,
``dsp_side.fwproc``).

Build cache: :func:`compile_tree` keeps the library it built under a key that hashes every
input of the build (its sources and headers by their names in the tree, the SDK's headers and
runtime, the generated parameter header, the compiler command words with the size and mtime of
the compiler binaries they resolve to, the flags; the tree's path only for a sanitizer's build):
in memory for the process, and on disk per user
(:mod:`dsp_side.ckernel.cache`), so the same tree is compiled once (every ``vdsp up`` builds
the stock image, in a process of its own). The runtime's object file, the same for every tree, is
kept likewise under a key of its own (its sources, the SDK's headers, the compiler, the flags of a
level and sanitizer): a tree's build compiles the tree's files only (the runtime was 45 of the test
suite's 244 compiles, about a third of their CPU). :func:`library_for` puts a tree's library, for a tree
run in-process without an image, in a memory file of the process (memfd), which no way of dying
leaves behind.

Where the tree lies does not change its library: its files are compiled with
``-ffile-prefix-map=TREE=.``, so ``__FILE__`` (the log macros', ``assert``'s) names a file by its
place in the tree, and a tree copied or checked out elsewhere builds the same bytes, and so is
read from the cache. (The test suite copies its kernel trees into fresh temporary directories:
each run compiled them all again; on a run after another, C++ compiles went from 34 to 22 here.)
A sanitizer's build keeps the full paths,
which its reports name (``-g``): its key holds the tree's path (as does a tree whose path has a
``=``, which the option cannot hold).
"""
from __future__ import annotations

import atexit
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait as futures_wait
from pathlib import Path
from typing import Iterable

from protocol.contract.operator import OperatorEntry
from dsp_side import ckernel
from dsp_side.ckernel import cache, params

WARNINGS = ("-Wall", "-Wextra", "-Werror")
SANITIZERS = {"undefined": ("-fsanitize=undefined", "-fno-sanitize-recover=all", "-g"),
              "address": ("-fsanitize=address", "-fno-omit-frame-pointer", "-g")}
# the kernels' own basic blocks call __sanitizer_cov_trace_pc, which the runtime counts for the
# board-time estimate (src/vdsp_board.c; the runtime is not instrumented, the inlined IVP intrinsics add no
# block: xt_ivpn.h)
BLOCK_COUNT = ("-fsanitize-coverage=trace-pc",)
COMPILE_TIMEOUT_S = 300      # one source file; a compiler stuck longer is refused
MESSAGE_MAX = 8000           # characters of the compiler's message kept in the error


# an identifier the compiler does not know, as GCC (C: implicit declaration; C++: not declared)
# and Clang (undeclared identifier) name it
_UNDECLARED_IVP = re.compile(r"(?:implicit declaration of function|undeclared identifier)\W+(IVP_\w+)"
                             r"|\W(IVP_\w+)\W+ was not declared")
IVP_HOW = ("{name} is not in the vdsp-sim IVP subset (<xtensa/tie/xt_ivpn.h>): add it to "
           "dsp_side/ckernel/include/xtensa/tie/xt_ivpn.h with its semantics and a test in tests/dsp/test_ivp.py "
           "(docs/dsp_kernels.md, The IVP subset)")


class CompileError(Exception):
    """A kernel source that does not compile (the compiler's message), or no compiler."""


def sources(src: Path) -> list[Path]:
    """The C/C++ sources of the tree ``src``."""
    return sorted(p for p in src.rglob("*") if p.suffix in ckernel.SOURCE_SUFFIXES
                  and p.is_file() and "__pycache__" not in p.parts)


def _tool(var: str, default: str) -> list[str]:
    words = shlex.split(os.environ.get(var) or default)
    if not words or shutil.which(words[0]) is None:
        raise CompileError(f"no compiler to build the C kernels: {var}={' '.join(words) or '(empty)'} not found")
    return words


class _Stopped(Exception):
    """A compile not run, or cut, because one before it in its build's order failed."""


class _Build:
    """The compiles of one build (an image's levels, each level's files), each with its place in
    the order its errors are raised in (``rank``: level, then file). When one fails, those after it
    stop (not started, or their compilers killed): the error raised is the first in that order,
    which they cannot change; those before it go on, as one of them may fail too. A broken file
    ended its build only after every other file of every level had compiled (the test suite's
    build of a tree with an unknown intrinsic: 12 compiles, 15 s of CPU)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failed: tuple[int, int] | None = None     # the rank of the first failure in order so far
        self._running: dict[tuple[int, int], subprocess.Popen] = {}

    def _cut(self, rank: tuple[int, int]) -> bool:
        return self._failed is not None and rank > self._failed

    def wait(self, jobs: list[Future]) -> None:
        """Wait for ``jobs`` of this build; interrupted (Ctrl-C: the compilers, each in a group of
        its own, do not get the terminal's SIGINT), stop every compile of the build first."""
        try:
            futures_wait(jobs)
        except BaseException:
            with self._lock:
                self._failed = (-1, -1)
                for other in self._running.values():
                    _kill_group(other)
            raise

    def run(self, cmd: list[str], where: str, rank: tuple[int, int]) -> None:
        """``cmd`` (one compile, in a process group of its own: the driver's cc1 and as die with it)
        unless a compile before it failed. Raises CompileError, _Stopped."""
        with self._lock:
            if self._cut(rank):
                raise _Stopped
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    process_group=0)
            self._running[rank] = proc
        try:
            out, err = proc.communicate(timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise CompileError(f"{where}: the compiler ran past {COMPILE_TIMEOUT_S} s") from exc
        finally:
            with self._lock:
                del self._running[rank]
            if proc.returncode is None:     # timed out, or interrupted (KeyboardInterrupt)
                _kill_group(proc)
                proc.communicate()
        if proc.returncode == 0:
            return
        with self._lock:
            if self._cut(rank):             # killed: an earlier one failed
                raise _Stopped
            self._failed = rank
            for later, other in self._running.items():
                if later > rank:
                    _kill_group(other)
        raise CompileError(_failure(where, err or out))


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass


def _failure(where: str, output: str) -> str:
    message = output[-MESSAGE_MAX:]
    names = dict.fromkeys(a or b for a, b in _UNDECLARED_IVP.findall(message))
    hints = "".join("\n" + IVP_HOW.format(name=name) for name in names)
    return f"{where} does not compile:\n{message}{hints}"


def _run(cmd: list[str], where: str) -> None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise CompileError(f"{where}: the compiler ran past {COMPILE_TIMEOUT_S} s") from exc
    if out.returncode != 0:
        raise CompileError(_failure(where, out.stderr or out.stdout))


def sanitizer(sanitize: bool | str | None) -> str | None:
    """The sanitizer a build asks for: None, ``"undefined"`` (also ``True``: the older flag) or
    ``"address"``. Raises ValueError for another."""
    if sanitize is None or sanitize is False:
        return None
    name = "undefined" if sanitize is True else sanitize
    if name not in SANITIZERS:
        raise ValueError(f"no sanitizer {sanitize!r} (one of {', '.join(SANITIZERS)})")
    return name


def asan_runtime() -> str:
    """The path of the compiler's AddressSanitizer runtime (``$CC -print-file-name=libasan.so``),
    which a firmware of an ASan image is started with (``LD_PRELOAD``). Raises CompileError when
    the compiler has none."""
    cc = _tool("CC", "cc")
    try:
        out = subprocess.run([*cc, "-print-file-name=libasan.so"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompileError(f"cannot ask {cc[0]} for its AddressSanitizer runtime: {exc}") from exc
    path = out.stdout.strip()
    if out.returncode != 0 or not os.path.isabs(path) or not os.path.isfile(path):
        raise CompileError(f"{cc[0]} has no AddressSanitizer runtime (libasan.so): install it (Debian: libasan8) "
                           "to build or run an image built with --sanitize=address")
    return os.path.realpath(path)


HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".inc")
_CACHE: dict[str, bytes] = {}       # build key -> library bytes (this process's builds)
_CACHE_MAX = 16
_RUNTIME_OBJECTS: dict[str, bytes] = {}     # runtime key -> the runtime's object file (this process's)


def _compiler_id(words: list[str]) -> str:
    """The compiler command and the size and mtime of the binary it runs (an upgrade changes the key)."""
    found = shutil.which(words[0])
    st = os.stat(found) if found else None
    return repr((words, found, st and (st.st_size, st.st_mtime_ns)))


def _build_key(src: Path, files: list[Path], header: str, sanitize: str | None, level: str | None = None) -> str:
    """The hash of everything :func:`compile_tree` reads (the module docstring's list)."""
    h = hashlib.sha256()
    tree_headers = sorted(p for p in src.rglob("*") if p.suffix in HEADER_SUFFIXES and p.is_file()
                          and "__pycache__" not in p.parts)
    sdk = sorted(p for p in ckernel.INCLUDE.rglob("*") if p.is_file())
    runtime = sorted(p for p in ckernel.RUNTIME.parent.iterdir() if p.is_file())   # vdsp_rt.c and what it includes
    for path in [*runtime, *sdk, *files, *tree_headers]:
        name = str(path.relative_to(src)) if path.is_relative_to(src) else str(path)
        h.update(f"{name}\0{path.stat().st_size}\0".encode())
        h.update(path.read_bytes())
    cxx = shlex.split(os.environ.get("CXX") or "c++") if any(p.suffix != ".c" for p in files) else []
    h.update(repr(("" if _placeless(src, sanitize) else str(src.resolve()), header, sanitize, level,
                   _level_flags(level), WARNINGS,
                   SANITIZERS.get(sanitize or "", ()), BLOCK_COUNT,
                   _compiler_id(_tool("CC", "cc")), cxx and _compiler_id(cxx))).encode())
    return h.hexdigest()


def _placeless(src: Path, sanitize: str | None) -> bool:
    """Whether the tree's place is left out of its library and its key (the module docstring): not
    for a sanitizer's build (its reports name full paths), nor for a path the compiler's
    ``OLD=NEW`` option cannot hold (one with a ``=``)."""
    return not sanitize and "=" not in str(src)


def _runtime_command(cc: list[str], flags: tuple[str, ...], obj: Path) -> list[str]:
    """The runtime's compile: the SDK's headers only (it includes no tree header and not the
    generated parameters, so a tree's header could not shadow one of its includes)."""
    return [*cc, "-std=c11", "-O2", "-fPIC", *WARNINGS, f"-I{ckernel.INCLUDE}", *flags, "-c", str(ckernel.RUNTIME),
            "-o", str(obj)]


def _runtime_key(cc: list[str], flags: tuple[str, ...]) -> str:
    """The hash of everything the runtime's object file is made of: its sources (``vdsp_rt.c`` and
    what it includes), the SDK's headers, the compiler and the command."""
    h = hashlib.sha256(b"vdsp-sim kernel runtime object\0")
    runtime = sorted(p for p in ckernel.RUNTIME.parent.iterdir() if p.is_file())
    sdk = sorted(p for p in ckernel.INCLUDE.rglob("*") if p.is_file())
    for path in [*runtime, *sdk]:
        h.update(f"{path}\0{path.stat().st_size}\0".encode())
        h.update(path.read_bytes())
    h.update(repr((_runtime_command(cc, flags, Path("0.o")), _compiler_id(cc))).encode())
    return h.hexdigest()


def _runtime_object(cc: list[str], flags: tuple[str, ...], obj: Path) -> None:
    """The runtime compiled with ``flags`` (a level's and a sanitizer's) written to ``obj``: from the
    build cache (memory, then disk) when it was compiled before with the same inputs."""
    key = _runtime_key(cc, flags)
    data = _RUNTIME_OBJECTS.get(key) or cache.load(key, ".o")
    if data is None:
        with cache.building(key):       # one process compiles it at a time; the others read what it stored
            data = cache.load(key, ".o")
            if data is None:
                _compile_one(_runtime_command(cc, flags, obj), "the kernel runtime")
                data = obj.read_bytes()
                cache.store(key, data, ".o")
    if not obj.exists():
        obj.write_bytes(data)
    _RUNTIME_OBJECTS[key] = data


def _level_flags(level: str | None) -> tuple[str, ...]:
    return ckernel.LEVELS[level][0] if level else ()


def levels(sanitize: str | None = None) -> list[str | None]:
    """The x86-64 levels an image's kernel library is built for (:data:`dsp_side.ckernel.LEVELS`,
    each a library of the payload: :func:`dsp_side.ckernel.library_name`): every level on an
    x86-64 host; one build (None: the compiler's own target) elsewhere and with a sanitizer."""
    return list(ckernel.LEVELS) if ckernel.x86_64() and not sanitize else [None]


def compile_levels(src: Path, entries: Iterable[OperatorEntry], *,
                   sanitize: bool | str | None = None) -> dict[str, bytes]:
    """{payload name: library} of ``src`` for every level of :func:`levels` (an image's kernels).
    Raises as :func:`compile_tree`."""
    entries = list(entries)
    name = sanitizer(sanitize)
    wanted = levels(name)
    # the levels side by side, and each level's files (_compile): one compiler a CPU at a time
    build = _Build()        # a broken file stops the compiles of the later levels too
    with ThreadPoolExecutor(max_workers=len(wanted)) as pool:
        done = [pool.submit(_compile_tree, src, entries, name, level, build, i) for i, level in enumerate(wanted)]
        build.wait(done)
    built = [job.result() for job in done]      # the first level's error, in order (the later ones' _Stopped)
    return {ckernel.library_name(level): lib for level, lib in zip(wanted, built)}


def compile_tree(src: Path, entries: Iterable[OperatorEntry], *, sanitize: bool | str | None = None,
                 level: str | None = None) -> bytes:
    """The kernel library of ``src`` (its C sources and the runtime), for the C-kernel operators
    ``entries`` (``sanitize``: :func:`sanitizer`'s names), compiled for the x86-64 ``level``
    (:data:`dsp_side.ckernel.LEVELS`; None: the compiler's own target); from the build cache
    (memory, then disk) when the same inputs were built before. Raises CompileError (the
    compiler's message), ValueError (a parameter a C kernel cannot take, an unknown sanitizer or
    level)."""
    return _compile_tree(src, entries, sanitizer(sanitize), level, _Build(), 0)


def _compile_tree(src: Path, entries: Iterable[OperatorEntry], name: str | None, level: str | None,
                  build: _Build, order: int) -> bytes:
    """:func:`compile_tree`, as the ``order``-th level of ``build``."""
    if level is not None and level not in ckernel.LEVELS:
        raise ValueError(f"unknown x86-64 level {level!r} (one of {', '.join(ckernel.LEVELS)})")
    if name == "address":
        asan_runtime()      # refused now, not at the first boot
    files = sources(src)
    if not files:
        raise CompileError(f"{src}: C kernels are bound but the tree has no C source ({', '.join(ckernel.SOURCE_SUFFIXES)})")
    header = params.header(entries)
    key = _build_key(src, files, header, name, level)
    lib = _CACHE.get(key) or cache.load(key)
    if lib is None:
        with cache.building(key):       # one process compiles a key at a time; the others read what it stored
            lib = cache.load(key)
            if lib is None:
                lib = _compile(src, files, header, name, level, build, order)
                cache.store(key, lib)
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = lib
    return lib


_LIBRARIES: dict[str, Path] = {}    # library hash -> the file this process loads it from


def library_for(src: Path, entries: Iterable[OperatorEntry]) -> Path:
    """The kernel library of ``src`` as a file (for a tree run in-process, without an image):
    an anonymous memory file of this process (``memfd_create``, named ``/proc/self/fd/N``; the
    descriptor stays open for the process's life), which nothing outlives: a process killed by
    SIGKILL leaves no file behind. Where there is no memfd or no /proc: a private directory
    (``mkdtemp``, 0700) removed at a normal exit. Raises as :func:`compile_tree`."""
    lib = compile_tree(src, entries, level=ckernel.host_level() if ckernel.x86_64() else None)
    digest = hashlib.sha256(lib).hexdigest()
    path = _LIBRARIES.get(digest)
    if path is None:
        path = _LIBRARIES[digest] = _memory_file(lib) or _private_file(lib)
    return path


def _memory_file(lib: bytes) -> Path | None:
    """``lib`` in a new memfd of this process (close-on-exec), by its /proc path; None when the
    kernel or the libc has no memfd_create or /proc is not mounted."""
    try:
        fd = os.memfd_create(ckernel.LIBRARY, os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return None
    path = Path(f"/proc/self/fd/{fd}")
    try:
        with os.fdopen(os.dup(fd), "wb") as f:
            f.write(lib)
        if os.path.getsize(path) == len(lib):
            return path
    except OSError:
        pass
    os.close(fd)
    return None


def _private_file(lib: bytes) -> Path:
    work = Path(tempfile.mkdtemp(prefix="vdsp-kernels-"))
    atexit.register(shutil.rmtree, work, True)
    path = work / ckernel.LIBRARY
    with open(path, "xb") as f:          # a new file in a new private directory
        f.write(lib)
    return path


def _cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's or a taskset's, not the host's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# at most one compiler per CPU of this process at a time, over every build of the process (the
# levels of an image build side by side, and each level's files side by side)
_COMPILERS = threading.BoundedSemaphore(_cpus())


def _compile_one(cmd: list[str], where: str) -> None:
    with _COMPILERS:
        _run(cmd, where)


def _compile_file(build: _Build, cmd: list[str], where: str, rank: tuple[int, int]) -> None:
    with _COMPILERS:
        build.run(cmd, where, rank)


def _compile(src: Path, files: list[Path], header: str, sanitize: str | None, level: str | None, build: _Build,
             order: int) -> bytes:
    flags = SANITIZERS.get(sanitize or "", ()) + _level_flags(level)
    cc, cxx = _tool("CC", "cc"), None
    with tempfile.TemporaryDirectory(prefix="vdsp-kernels-") as tmp:
        work = Path(tmp)
        (work / ckernel.PARAMS_HEADER).write_text(header)
        includes = [f"-I{work}", f"-I{ckernel.INCLUDE}", f"-I{src}", *flags]
        if _placeless(src, sanitize):
            includes.append(f"-ffile-prefix-map={src}=.")
        jobs, objects = [], [str(work / "0.o")]
        for i, path in enumerate(files, 1):
            obj = work / f"{i}.o"
            if path.suffix == ".c":
                cmd = [*cc, "-std=c11", "-O2", "-fPIC", *WARNINGS, *BLOCK_COUNT, *includes, "-c", str(path), "-o",
                       str(obj)]
            else:
                cxx = cxx or _tool("CXX", "c++")
                cmd = [*cxx, "-std=c++17", "-O2", "-fPIC", *WARNINGS, *BLOCK_COUNT, *includes, "-c", str(path), "-o",
                       str(obj)]
            jobs.append((cmd, str(path.relative_to(src))))
            objects.append(str(obj))
        # the runtime (cached) and the files side by side (_COMPILERS bounds them); the first file's
        # error, in this order, is raised
        with ThreadPoolExecutor(max_workers=len(jobs) + 1) as pool:
            done = [pool.submit(_runtime_object, cc, flags, work / "0.o")]
            done += [pool.submit(_compile_file, build, cmd, where, (order, i)) for i, (cmd, where) in enumerate(jobs)]
            build.wait(done)
        for job in done:
            job.result()
        lib = work / ckernel.LIBRARY
        _compile_one([*(cxx or cc), "-shared", *flags, "-o", str(lib), *objects], "linking the kernel library")
        return lib.read_bytes()

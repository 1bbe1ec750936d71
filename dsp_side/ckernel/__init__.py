"""C kernels: operators written in C against ``include/vdsp_kernel.h``, as a J5 team writes them.

A firmware image's source tree may hold C (``*.c``) or C++ (``*.cc``, ``*.cpp``) sources besides its
``firmware.py``. ``vdsp firmware build`` compiles them with the host's compiler (``$CC``/``$CXX``,
else ``cc``/``c++``; ``-Wall -Wextra -Werror``), together with the runtime (``src/vdsp_rt.c``),
into one shared library that the image's signed payload carries (:mod:`dsp_side.ckernel.build`).
``firmware.py`` binds a kernel to its operator's contract entry, declared once as for a Python
kernel::

    AFFINE_U8 = OperatorEntry.declare(0x1410, "affine_u8", {...}, inputs=1, outputs=1, doc="...")

    def register(registry):
        ckernel.bind(registry, AFFINE_U8, "affine_u8_kernel", __file__)

The kernel reads its parameters as the entry's ``hbDSP<Name>Param`` struct, from the header
``vdsp_kernel_params.h`` the build generates from the same entries
(:func:`dsp_side.ckernel.params.header`, with ``protocol.contract.c_layout`` as the ARM side's
``hb_dsp_ops.h``). :class:`dsp_side.ckernel.kernel.CKernel` runs it (ctypes) and turns the
runtime's traps into coded errors.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

INCLUDE = Path(__file__).resolve().parent / "include"
RUNTIME = Path(__file__).resolve().parent / "src" / "vdsp_rt.c"
LIBRARY = "vdsp_kernels.so"          # the compiled kernels, in an image's payload beside firmware.py
PARAMS_HEADER = "vdsp_kernel_params.h"
SOURCE_SUFFIXES = (".c", ".cc", ".cpp")


# x86-64 micro-architecture levels: the kernel library is built once for each (its vectors as wide
# as the level's: <xtensa/tie/xt_ivpn.h>, VDSP_IVP_HOST_BYTES), and a core loads the widest its CPU
# runs. Only the host's speed differs: every level gives the same bytes and the same board-time
# counts, but for a block or two per entry of a loop (docs/dsp_kernels.md, "Emulation speed").
# level -> (the compiler's flags, the CPU flags of /proc/cpuinfo it needs beyond the level below)
LEVELS = {
    "x86-64": ((), ()),
    "x86-64-v3": (("-march=x86-64-v3",), ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")),
    "x86-64-v4": (("-march=x86-64-v4",), ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
}
BASELINE = "x86-64"


def x86_64() -> bool:
    """Whether this host is x86-64 (the levels apply; elsewhere one library, for the host)."""
    import platform
    return platform.machine().lower() in ("x86_64", "amd64")


def library_name(level: str | None) -> str:
    """The payload name of the kernel library built for ``level`` (the baseline's, or a host that
    is not x86-64: :data:`LIBRARY`)."""
    return LIBRARY if level in (None, BASELINE) else f"vdsp_kernels.{level}.so"


def cpu_levels(cpuinfo: str | None = None) -> list[str]:
    """The levels of :data:`LEVELS` this CPU runs, narrowest first, from the flags of
    ``/proc/cpuinfo`` (``cpuinfo``: its text, for a test); the baseline alone when it cannot be
    read or the host is not x86-64."""
    if cpuinfo is None:
        return list(_this_cpu())
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            break
    runs = [BASELINE]
    for level, (_, needs) in list(LEVELS.items())[1:]:
        if not flags.issuperset(needs):
            break
        runs.append(level)
    return runs


@functools.cache
def _this_cpu() -> tuple[str, ...]:
    """cpu_levels() of this CPU, read once a process."""
    if not x86_64():
        return (BASELINE,)
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return tuple(cpu_levels(f.read(1 << 20)))
    except OSError:
        return (BASELINE,)


def host_level() -> str:
    """The level whose kernel library this process loads: the widest the CPU runs, or a narrower
    one named by ``VDSP_KERNEL_LEVEL`` (to see a kernel's host speed on a narrower CPU); a level
    the CPU does not run, or an unknown one, raises ValueError."""
    from vdsp_board.config import settings
    runs = cpu_levels()
    wanted = settings.current().kernel_level
    if wanted is None:
        return runs[-1]
    if wanted not in LEVELS:
        raise ValueError(f"VDSP_KERNEL_LEVEL={wanted}: not one of {', '.join(LEVELS)}")
    if wanted not in runs:
        raise ValueError(f"VDSP_KERNEL_LEVEL={wanted}: this CPU does not run it (it runs {', '.join(runs)})")
    return wanted


def library_in(where: Path) -> Path:
    """The kernel library an unpacked image at ``where`` runs here: the one built for
    :func:`host_level`, or, in an image without it (built on another host, or with a sanitizer),
    the widest it carries that this CPU runs, else the baseline's :data:`LIBRARY`."""
    if not x86_64():
        return where / LIBRARY
    runs = cpu_levels()
    wanted = host_level()
    for level in reversed(runs[:runs.index(wanted) + 1]):
        path = where / library_name(level)
        if path.is_file():
            return path
    return where / LIBRARY


def cflags() -> str:
    """The flags to compile a kernel against the SDK's headers (``vdsp dsp --cflags``)."""
    return f"-I{INCLUDE}"


_LIBRARY_AT: dict[Path, Path] = {}     # source tree -> its kernel library, for trees run without an image


def use_library(tree: Path, library: Path) -> None:
    """Kernels bound from now on by ``tree``'s firmware.py run from ``library`` instead of the
    library beside it (a source tree run in this process without an image:
    :func:`dsp_side.fw_image.registry_of_source`)."""
    _LIBRARY_AT[Path(tree).resolve()] = library


_IMAGES: set[Path] = set()        # directories of unpacked images (dsp_side.fw_image.load)


def mark_image(tree: Path) -> None:
    """``tree`` is an unpacked image: :func:`available` there means "carries its library"."""
    _IMAGES.add(Path(tree).resolve())


def available(firmware_file: str, *, cxx: bool = False) -> bool:
    """Whether the tree of ``firmware_file`` can run C kernels: an unpacked image when it carries
    its kernel library; a source tree when the compilers to build one are found (``$CC``, and
    ``$CXX`` with ``cxx``). A firmware.py with a Python fallback asks this (the stock image:
    docs/pointcloud.md)."""
    import shlex
    import shutil
    where = Path(firmware_file).resolve().parent
    if where in _IMAGES:
        return (where / LIBRARY).is_file()
    tools = [os.environ.get("CC") or "cc"] + ([os.environ.get("CXX") or "c++"] if cxx else [])
    return all(shlex.split(t) and shutil.which(shlex.split(t)[0]) for t in tools)


class Around:
    """The operator function ``around(kernel, ctx, inputs, outputs, **params)`` of a C kernel
    bound with ``around``: Python before and after the C kernel (checks with their coded errors,
    a task result), which it calls as ``kernel(ctx, inputs, outputs, **params)``."""

    def __init__(self, kernel, around) -> None:
        self.kernel, self.around = kernel, around
        self.__doc__, self.__name__ = kernel.__doc__, kernel.__name__

    def __call__(self, ctx, inputs: list, outputs: list, **params) -> dict:
        return self.around(self.kernel, ctx, inputs, outputs, **params)


def bind(registry, entry, symbol: str, firmware_file: str, *, init=None, around=None, **hooks):
    """Bind the C function ``symbol`` of this image's kernel library (beside ``firmware_file``,
    the caller's ``__file__``) to ``entry``. ``init`` (optional) runs after the library is
    loaded; ``around`` (optional) wraps the kernel (:class:`Around`); other hooks (``prepare``,
    ``destroy``) as ``Registry.bind``. Raises ValueError as ``Registry.bind`` (and for
    parameters a C kernel cannot take)."""
    from dsp_side.ckernel.kernel import CKernel
    where = Path(firmware_file).resolve().parent
    kernel = CKernel(entry, symbol, _LIBRARY_AT.get(where) or library_in(where))
    for name, hook in (("init", init), ("around", around)):
        if hook is not None and not callable(hook):
            raise ValueError(f"operator {entry.name}: {name} hook must be callable")

    def load_then_init(ctx) -> None:
        kernel.load(ctx)
        if init is not None:
            init(ctx)
    return registry.bind(entry, kernel if around is None else Around(kernel, around), init=load_then_init, **hooks)


def entries_of(registry) -> list:
    """The contract entries ``registry`` binds to C kernels (what the build compiles for)."""
    from dsp_side.ckernel.kernel import CKernel
    specs = (registry.get(row["id"]) for row in registry.table())
    return [s.entry for s in specs if isinstance(s.fn.kernel if isinstance(s.fn, Around) else s.fn, CKernel)]

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

from pathlib import Path

INCLUDE = Path(__file__).resolve().parent / "include"
RUNTIME = Path(__file__).resolve().parent / "src" / "vdsp_rt.c"
LIBRARY = "vdsp_kernels.so"          # the compiled kernels, in an image's payload beside firmware.py
PARAMS_HEADER = "vdsp_kernel_params.h"
SOURCE_SUFFIXES = (".c", ".cc", ".cpp")


def cflags() -> str:
    """The flags to compile a kernel against the SDK's headers (``vdsp dsp --cflags``)."""
    return f"-I{INCLUDE}"


def bind(registry, entry, symbol: str, firmware_file: str, *, init=None, **hooks):
    """Bind the C function ``symbol`` of this image's kernel library (beside ``firmware_file``,
    the caller's ``__file__``) to ``entry``. ``init`` (optional) runs after the library is
    loaded; other hooks (``prepare``, ``destroy``) as ``Registry.bind``. Raises ValueError as
    ``Registry.bind`` (and for parameters a C kernel cannot take)."""
    from dsp_side.ckernel.kernel import CKernel
    kernel = CKernel(entry, symbol, Path(firmware_file).resolve().parent / LIBRARY)
    if init is not None and not callable(init):
        raise ValueError(f"operator {entry.name}: init hook must be callable")

    def load_then_init(ctx) -> None:
        kernel.load(ctx)
        if init is not None:
            init(ctx)
    return registry.bind(entry, kernel, init=load_then_init, **hooks)


def entries_of(registry) -> list:
    """The contract entries ``registry`` binds to C kernels (what the build compiles for)."""
    from dsp_side.ckernel.kernel import CKernel
    specs = (registry.get(row["id"]) for row in registry.table())
    return [s.entry for s in specs if isinstance(s.fn, CKernel)]

"""What building a C extension against this Python needs of the machine: a C compiler (``$CC``,
else ``cc``) and the Python headers. The compiled modules (:mod:`vdsp_sim.native_build`) and the
C API library (:mod:`vdsp_sim.capi_build`) ask it first, then check what each needs besides."""
from __future__ import annotations

import os
import shutil
import sysconfig


def missing() -> str:
    """What a C build against this Python lacks here ("" if nothing), said so that a user can act."""
    cc = os.environ.get("CC") or "cc"
    if shutil.which(cc.split()[0]) is None:
        return f"no C compiler ({cc})"
    include = sysconfig.get_paths().get("include", "")
    if not os.path.isfile(os.path.join(include, "Python.h")):
        return f"no Python headers (Python.h in {include or '?'}; on Debian: apt-get install python3-dev)"
    return ""

"""``python -m dsp_side.firmware_main ...``: a firmware process as a fresh interpreter (a core
without templates, ``VDSP_FW_TEMPLATE=0``; with them the core's starter forks it and calls
:func:`dsp_side.firmware.main` itself).

Why a module of its own: the compiled build (``vdsp_sim/native_build.py``) compiles
``dsp_side.firmware``, and Python's ``-m`` runs only a module it has the code object of (a
compiled one says "No code object available"); this one stays Python in every build."""
from dsp_side.firmware import main

if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# The whole test suite (unit + live integration), after setting up .venv.
#
# It runs in parallel (pytest-xdist): VDSP_TEST_WORKERS worker processes (default: the CPUs this
# shell may run on, plus three, at most 24 — the live tests mostly wait on their SoC's processes:
# on the 2-CPU VM the run took 362 s with 3 workers, 313 s with 4, 292 s with 5; since each module's
# exclusive tests come first, 250-270 s with 5 and 300 s with 6), each with its own SoCs, runtime
# and DDR directories; `--dist loadfile` keeps each module (and the SoC it shares) on one worker;
# the `exclusive` tests run alone, first in their modules, and the modules are handed out longest first
# (tests/durations.json; --no-loadscope-reorder keeps that order: tests/conftest.py). Arguments go to pytest:
# `./test.sh -k relay`, `./test.sh tests/board/test_ddr.py`, `./test.sh -n 0` (serially).
# `PYTHON=python3.13 ./test.sh` runs it on that Python, in a venv of its own (scripts/venv.sh).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/venv.sh
venv=$(bash scripts/venv.sh --dir)
export PATH="$PWD/$venv/bin:$PATH"
# Bytecode is cached (as for a user by default) even where PYTHONDONTWRITEBYTECODE is set: else
# each worker compiles and assert-rewrites every test module again (collection 8.7 s of CPU
# instead of 2.9 on the 2-CPU VM), and every process a test starts (each SoC's, each `vdsp`
# command) compiles each module of the checkout it imports again. The __pycache__ directories
# are ignored by git. (Not PYTHONPYCACHEPREFIX: a firmware unpacks each image into the same
# directory again, and a cache outside it served the code of the image booted a second earlier.)
unset PYTHONDONTWRITEBYTECODE
cpus=$(nproc 2>/dev/null || echo 2)
workers=$((cpus + 3 < 24 ? cpus + 3 : 24))
exec "$venv/bin/python" -m pytest -q -n "${VDSP_TEST_WORKERS:-$workers}" --dist loadfile --no-loadscope-reorder "$@"

#!/usr/bin/env bash
# Create/refresh the project's virtual environment — idempotent, quiet when up to date.
#
# One venv per Python version: `.venv` for the first one set up (python3, or $PYTHON), and
# `.venv-X.Y` for a Python of another version (`PYTHON=python3.13 ./test.sh`), so that runs on
# several versions never share one. `scripts/venv.sh --dir` prints the directory $PYTHON uses.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2]) if sys.version_info >= (3, 11) else sys.exit(1)') || {
  echo "vdsp-sim needs Python 3.11 or newer; $PY is $("$PY" --version 2>&1 || echo missing)" \
       "(choose one: PYTHON=python3.11 ./test.sh)" >&2
  exit 1
}
VENV=.venv
if [ -e .venv ] && [ "$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" != "$version" ]; then
  VENV=.venv-$version
fi
if [ "${1:-}" = "--dir" ]; then
  echo "$VENV"
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $("$PY" --version)"
  "$PY" -m venv "$VENV"
fi
# The install: editable in setuptools' compat mode — a path entry to this checkout, which mypy
# and editors follow from any directory (the default mode's import hook they cannot), and which
# keeps edits and new modules live (strict mode links each file into build/: a new module would
# need this set-up again). setuptools calls compat transitional; should it drop it, strict. The
# test extra brings setuptools itself, which a venv of Python >= 3.12 lacks, for the mypyc build.
recipe="editable_mode=compat"
stamp=$VENV/.vdsp-installed
want=$( (cat pyproject.toml; echo "$recipe") | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[setup] installing vdsp-sim and its dependencies into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]' --config-settings "$recipe" || {
    echo "[setup] that failed: installing in setuptools' strict editable mode (a new module needs bash scripts/venv.sh)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]' --config-settings editable_mode=strict
  }
  echo "[setup] compiling the point-cloud kernels (numba, cached next to the sources)"
  "$VENV/bin/python" -m vdsp_sim.pointcloud_inprocess
  echo "[setup] building the seeded sample models (vdsp_sim/models; their class ids mean nothing)"
  "$VENV/bin/python" -m vdsp_sim.dnn_models
  echo "$want" > "$stamp"
fi
# The compiled build of the hot modules (mypyc; vdsp_sim/native_build.py), installed into the
# venv: compiled again when one of their sources changed, skipped with a note where no C compiler
# is found (the pure modules then run).
rm -rf .native .native.old       # where that build went before it was installed into the venv
"$VENV/bin/python" -m vdsp_sim.native_build --if-stale
# The C API library (libvdsp_hb, docs/capi.md) for this venv: rebuilt when its sources changed,
# skipped with a note where no C compiler or shared libpython is found (the rest works without it).
"$VENV/bin/python" -m vdsp_sim.capi_build --if-stale

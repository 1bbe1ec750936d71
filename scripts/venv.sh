#!/usr/bin/env bash
# Create/refresh the project virtual environment (.venv) — idempotent, quiet when up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "vdsp-sim needs Python 3.11 or newer")'
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $("$PY" --version)"
  "$PY" -m venv .venv
fi
stamp=.venv/.vdsp-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[setup] installing vdsp-sim and its dependencies into .venv"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
  echo "[setup] compiling the point-cloud kernels (numba, cached next to the sources)"
  .venv/bin/python -m vdsp_sim.pointcloud_inprocess
  echo "[setup] building the seeded sample models (vdsp_sim/models; their class ids mean nothing)"
  .venv/bin/python -m vdsp_sim.dnn_models
  echo "$want" > "$stamp"
fi
# The compiled build of the hot modules (mypyc; protocol/native.py): rebuilt when one of their
# sources changed, skipped with a note where no C compiler is found (the pure modules then run).
.venv/bin/python -m vdsp_sim.native_build --if-stale
# The C API library (libvdsp_hb, docs/capi.md) for this venv: rebuilt when its sources changed,
# skipped with a note where no C compiler or shared libpython is found (the rest works without it).
.venv/bin/python -m vdsp_sim.capi_build --if-stale

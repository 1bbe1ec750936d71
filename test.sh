#!/usr/bin/env bash
# The whole test suite (unit + live integration), after setting up .venv.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/venv.sh
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/python -m pytest -q "$@"

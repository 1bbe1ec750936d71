#!/usr/bin/env bash
# The Pythons this machine can set the project up with (3.11 or newer, with venv and ensurepip),
# one "X.Y path" line per version, oldest first: python3 and python3.N on PATH, then pyenv's
# installed versions (its shims on PATH answer only for the versions it has selected).
set -uo pipefail
candidates=()
for name in python3 $(compgen -c python3. | grep -E '^python3\.[0-9]+$' | sort -u); do
  path=$(command -v "$name") && candidates+=("$path")
done
for path in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/*/bin/python3; do
  [ -x "$path" ] && candidates+=("$path")
done
for path in "${candidates[@]}"; do
  "$path" -c 'import sys, venv, ensurepip; print("%d.%d" % sys.version_info[:2], sys.argv[1]) if sys.version_info >= (3, 11) else None' \
    "$path" 2>/dev/null
done | awk '!seen[$1]++' | sort -t. -k1,1n -k2,2n

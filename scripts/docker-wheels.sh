#!/usr/bin/env bash
# The wheelhouse docker/Dockerfile installs from (build/docker/wheels/), so that the image
# build needs no network: the wheels of pyproject.toml's dependencies (and of setuptools,
# which builds the project) for CPython 3.11 on manylinux x86_64 (the base image's Python
# and glibc 2.36), downloaded on this host with pip from the package index pip is set up for.
#
#   scripts/docker-wheels.sh [--dest build/docker/wheels]
#
# Any host Python 3 with pip will do: the target is named explicitly (--python-version,
# --platform), never taken from the host. Wheels already there are reused.
set -euo pipefail
cd "$(dirname "$0")/.."

DEST=build/docker/wheels
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while [ $# -gt 0 ]; do
    case $1 in
        --dest) DEST=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "docker-wheels.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done

PY=${PYTHON:-python3}
mapfile -t REQS < <("$PY" - <<'EOF'
import re, tomllib
with open("pyproject.toml", "rb") as fh:
    project = tomllib.load(fh)
for req in project["build-system"]["requires"] + project["project"]["dependencies"]:
    print(req)
print("wheel")
EOF
)
PLATFORMS=(--platform manylinux2014_x86_64)
for minor in $(seq 17 36); do PLATFORMS+=(--platform "manylinux_2_${minor}_x86_64"); done
mkdir -p "$DEST"
echo "docker-wheels.sh: ${REQS[*]} -> $DEST"
"$PY" -m pip download --quiet --dest "$DEST" --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
    "${PLATFORMS[@]}" "${REQS[@]}" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
echo "docker-wheels.sh: $(ls "$DEST" | wc -l) wheels, $(du -sh "$DEST" | cut -f1)"

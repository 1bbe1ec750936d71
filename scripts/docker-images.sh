#!/usr/bin/env bash
# The image of docker-compose.yml where no image registry is reachable (where one is,
# `docker compose up --build` builds it from the official python:3.11-slim-bookworm alone):
#   1. vdsp-base:bookworm  Debian bookworm by debootstrap + docker import (scripts/docker-base.sh;
#                          skipped when it exists)
#   2. build/docker/wheels the dependencies' wheels for the image's Python (scripts/docker-wheels.sh)
#   3. vdsp-sim:local      docker/Dockerfile on that base, built with no network
#                          (docker build --network none --build-arg BASE_IMAGE=vdsp-base:bookworm)
# Then `docker compose` uses them with VDSP_BASE_IMAGE=vdsp-base:bookworm VDSP_BUILD_NETWORK=none
# in its environment (a rebuild by `up --build` then comes from the build cache).
#
#   scripts/docker-images.sh [--rebuild-base]
#
# Needs a docker daemon ($DOCKER_HOST; checked first), and root for the base image's debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_ARGS=()
case ${1:-} in
    --rebuild-base) BASE_ARGS=(--force) ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    "") ;;
    *) echo "docker-images.sh: unknown argument $1" >&2; exit 2 ;;
esac

if ! docker info >/dev/null 2>&1; then
    echo "docker-images.sh: no docker daemon answers (DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}):" \
         "start one first (as root, scripts/compose-e2e.sh starts a private one and builds these images)" >&2
    exit 1
fi
bash scripts/docker-base.sh "${BASE_ARGS[@]}"
bash scripts/docker-wheels.sh
BASE=$(sed -n 's/^TAG=//p' scripts/docker-base.sh)
echo "docker-images.sh: docker build --network none --build-arg BASE_IMAGE=$BASE -f docker/Dockerfile -t vdsp-sim:local ."
docker build --network none --build-arg BASE_IMAGE="$BASE" -f docker/Dockerfile -t vdsp-sim:local . \
    > build/docker/image-build.log 2>&1 \
    || { tail -40 build/docker/image-build.log >&2; echo "docker-images.sh: the image build failed; see build/docker/image-build.log" >&2; exit 1; }
grep -m1 "^Sending build context" build/docker/image-build.log || true
echo "docker-images.sh: vdsp-sim:local $(docker image inspect -f '{{.Size}}' vdsp-sim:local | numfmt --to=iec) bytes"

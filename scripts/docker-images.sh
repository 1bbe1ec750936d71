#!/usr/bin/env bash
# The images of docker-compose.yml, built on this machine with no image registry:
#   1. vdsp-base:bookworm  Debian bookworm by debootstrap + docker import (scripts/docker-base.sh;
#                          skipped when it exists)
#   2. build/docker/wheels the dependencies' wheels for the image's Python (scripts/docker-wheels.sh)
#   3. vdsp-sim:local      docker/Dockerfile, built with no network (docker build --network none)
#
#   scripts/docker-images.sh [--rebuild-base]
#
# Needs a docker daemon ($DOCKER_HOST), and root for the base image's debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_ARGS=()
case ${1:-} in
    --rebuild-base) BASE_ARGS=(--force) ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    "") ;;
    *) echo "docker-images.sh: unknown argument $1" >&2; exit 2 ;;
esac

bash scripts/docker-base.sh "${BASE_ARGS[@]}"
bash scripts/docker-wheels.sh
echo "docker-images.sh: docker build --network none -f docker/Dockerfile -t vdsp-sim:local ."
docker build --network none -f docker/Dockerfile -t vdsp-sim:local . > build/docker/image-build.log 2>&1 \
    || { tail -40 build/docker/image-build.log >&2; echo "docker-images.sh: the image build failed; see build/docker/image-build.log" >&2; exit 1; }
grep -m1 "^Sending build context" build/docker/image-build.log || true
echo "docker-images.sh: vdsp-sim:local $(docker image inspect -f '{{.Size}}' vdsp-sim:local | numfmt --to=iec) bytes"

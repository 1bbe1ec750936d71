#!/usr/bin/env bash
# The base image of docker/Dockerfile, built here with no image registry: a Debian bookworm
# root file system made by debootstrap from Debian's package mirror (python3 3.11,
# python3-venv, tini; minbase variant), trimmed (apt lists and caches, docs, man pages,
# locales), then loaded with `docker import`.
#
#   scripts/docker-base.sh [--tag vdsp-base:bookworm] [--mirror URL] [--force]
#
# Needs a docker daemon ($DOCKER_HOST; checked before anything else) and root (debootstrap
# chroots). Skips the build when the tag exists (--force rebuilds). The root file system is
# made under build/docker/ and removed once imported.
set -euo pipefail
cd "$(dirname "$0")/.."

TAG=vdsp-base:bookworm
MIRROR=${VDSP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
FORCE=0
PACKAGES=python3,python3-venv,tini
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while [ $# -gt 0 ]; do
    case $1 in
        --tag) TAG=$2; shift 2 ;;
        --mirror) MIRROR=$2; shift 2 ;;
        --force) FORCE=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "docker-base.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done

# The daemon first: debootstrap takes minutes, and its result is of no use without one.
if ! docker info >/dev/null 2>&1; then
    echo "docker-base.sh: no docker daemon answers (DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}):" \
         "start one first (as root, scripts/compose-e2e.sh starts a private one)" >&2
    exit 1
fi
if [ "$FORCE" = 0 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
    echo "docker-base.sh: $TAG exists ($(docker image inspect -f '{{.Size}}' "$TAG" | numfmt --to=iec) bytes); --force rebuilds it"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "docker-base.sh: debootstrap needs root" >&2
    exit 1
fi
command -v debootstrap >/dev/null || { echo "docker-base.sh: installing debootstrap"; apt-get install -y -qq debootstrap >/dev/null; }

ROOTFS=build/docker/rootfs
cleanup() { rm -rf --one-file-system "$ROOTFS"; }
trap cleanup EXIT
cleanup
mkdir -p build/docker
echo "docker-base.sh: debootstrap bookworm ($PACKAGES) from $MIRROR"
debootstrap --variant=minbase --include="$PACKAGES" bookworm "$ROOTFS" "$MIRROR" > build/docker/debootstrap.log 2>&1 \
    || { tail -20 build/docker/debootstrap.log >&2; exit 1; }
rm -rf "$ROOTFS"/var/cache/apt/* "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/usr/share/doc/* \
       "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/* "$ROOTFS"/var/log/* "$ROOTFS"/tmp/*
"$ROOTFS"/usr/bin/python3 --version
tar -C "$ROOTFS" --numeric-owner -c . | docker import \
    -c 'ENV LANG=C.UTF-8' -c 'CMD ["/bin/bash"]' \
    -m "Debian bookworm minbase + $PACKAGES (debootstrap from $MIRROR)" - "$TAG" >/dev/null
echo "docker-base.sh: $TAG imported ($(docker image inspect -f '{{.Size}}' "$TAG" | numfmt --to=iec) bytes)"

#!/bin/sh
# Build the base image every nel image starts FROM, locally, from Debian's own packages: no registry is
# pulled from. debootstrap makes a minimal bookworm root filesystem with Python 3.11, `docker import` turns
# it into an image.
#
#   deploy/base-image.sh            build nel-base:bookworm unless it exists already
#   deploy/base-image.sh --force    build it again (e.g. to pick up Debian security updates)
#
# Environment: NEL_BASE_IMAGE (default nel-base:bookworm), DEBIAN_MIRROR (default http://deb.debian.org/debian).
# Needs root (debootstrap), debootstrap and a running Docker engine. Takes about a minute.
set -eu

IMAGE="${NEL_BASE_IMAGE:-nel-base:bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
# python3 (3.11 on bookworm) with venv + ensurepip (the image installs the workbench into a venv),
# ca-certificates (HTTPS model endpoints).
PACKAGES=python3,python3-venv,ca-certificates

force=0
case "${1:-}" in
    --force) force=1 ;;
    "") ;;
    *) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

if [ "$force" = 0 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "base image $IMAGE exists (--force to rebuild)"
    exit 0
fi
command -v debootstrap >/dev/null || { echo "$0: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }

rootfs="$(mktemp -d "${TMPDIR:-/tmp}/nel-base.XXXXXX")"
trap 'rm -rf "$rootfs"' EXIT INT TERM

echo "debootstrap $SUITE ($PACKAGES) from $MIRROR ..."
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 || {
    tail -n 30 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
rm -f "$rootfs.log"

# What an image does not need: downloaded .debs, package lists, documentation, locales but C.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
       "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
       "$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old
# The apt sources point at the mirror it was built from: `apt-get update && apt-get install` works in a child image.
echo "deb $MIRROR $SUITE main" >"$rootfs/etc/apt/sources.list"

tar -C "$rootfs" --numeric-owner -c . | docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    --message "debootstrap --variant=minbase --include=$PACKAGES $SUITE" \
    - "$IMAGE" >/dev/null
echo "built base image $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"

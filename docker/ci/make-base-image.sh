#!/usr/bin/env bash
# Builds local/debian:bookworm with debootstrap (minbase) and imports it; for machines that cannot pull.
# Idempotent: does nothing when the image exists. Needs root and the debootstrap package.
set -euo pipefail
DOCKER="${DOCKER:-docker}"
IMAGE="${BASE_IMAGE_NAME:-local/debian:bookworm}"
SUITE="${SUITE:-bookworm}"
if "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "$IMAGE exists"
    exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install -y debootstrap" >&2; exit 1; }
rootfs="$(mktemp -d /tmp/envcheck-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
timeout 900 debootstrap --variant=minbase "$SUITE" "$rootfs" http://deb.debian.org/debian
tar -C "$rootfs" -c . | "$DOCKER" import - "$IMAGE"
echo "imported $IMAGE"

#!/usr/bin/env bash
# Builds local/debian:bookworm with debootstrap (minbase) and imports it; for machines that cannot pull.
# Idempotent: does nothing when the image exists. Needs root and the debootstrap package.
#   ARCH=arm64 (default: this machine's) builds an arm64 base on an amd64 machine: debootstrap's second stage then
#   runs under QEMU (qemu-user-static + binfmt-support), and the image is imported as linux/arm64.
set -euo pipefail
DOCKER="${DOCKER:-docker}"
ARCH="${ARCH:-}"
IMAGE="${BASE_IMAGE_NAME:-local/debian:bookworm${ARCH:+-$ARCH}}"
SUITE="${SUITE:-bookworm}"
if "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "$IMAGE exists"
    exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install -y debootstrap" >&2; exit 1; }
arch_args=()
import_args=()
if [ -n "$ARCH" ]; then
    arch_args=(--arch="$ARCH")
    import_args=(--platform "linux/$ARCH")
fi
rootfs="$(mktemp -d /tmp/envcheck-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
timeout 1800 debootstrap --variant=minbase "${arch_args[@]}" "$SUITE" "$rootfs" http://deb.debian.org/debian
tar -C "$rootfs" -c . | "$DOCKER" import "${import_args[@]}" - "$IMAGE"
echo "imported $IMAGE"

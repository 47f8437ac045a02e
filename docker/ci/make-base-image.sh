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
rootfs="$(mktemp -d /tmp/envcheck-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
if [ -z "$ARCH" ]; then
    timeout 900 debootstrap --variant=minbase "$SUITE" "$rootfs" http://deb.debian.org/debian
    tar -C "$rootfs" -c . | "$DOCKER" import - "$IMAGE"
    echo "imported $IMAGE"
    exit 0
fi
# Another architecture: `docker import --platform` needs an experimental daemon (Docker 20.10 ignores it and labels
# the image amd64, so BuildKit then looks for the arm64 base in a registry). A FROM-scratch build with --platform
# labels it right.
timeout 1800 debootstrap --variant=minbase --arch="$ARCH" "$SUITE" "$rootfs/root" http://deb.debian.org/debian
tar -C "$rootfs/root" -c . > "$rootfs/rootfs.tar"
rm -rf "$rootfs/root"
printf 'FROM scratch\nADD rootfs.tar /\nCMD ["bash"]\n' > "$rootfs/Dockerfile"
DOCKER_BUILDKIT=1 "$DOCKER" build --platform "linux/$ARCH" -t "$IMAGE" "$rootfs"
echo "built $IMAGE (linux/$ARCH)"

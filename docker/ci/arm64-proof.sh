#!/usr/bin/env bash
# What an amd64 machine without a GPU can prove of the arm64 images (docs/images.md, "arm64"): the Dockerfile, the
# entrypoints and envcheck are architecture-clean. Under QEMU user emulation it builds the runtime target for
# linux/arm64 on a debootstrapped arm64 base, with PyPI's aarch64 CPU torch (the aarch64 CUDA wheels' dependencies
# cannot be reached from such machines), then runs `envcheck run --allow-cpu` and `envcheck host` inside it.
# Each step's wall time goes to OUT/timings.tsv; the reports to OUT/. Needs root (binfmt, debootstrap, the engine).
#   make arm64-proof [OUT=arm64-proof] [TAG=envcheck-arm64-proof:runtime] [TORCH=2.9.1 TORCHVISION=0.24.1]
set -euo pipefail
cd "$(dirname "$0")/../.."
DOCKER="${DOCKER:-docker}"
OUT="${OUT:-arm64-proof}"
TAG="${TAG:-envcheck-arm64-proof:runtime}"
TORCH="${TORCH:-2.9.1}"             # PyPI's aarch64 torch 2.9.1 is a CPU build (2.11 and later are CUDA builds)
TORCHVISION="${TORCHVISION:-0.24.1}"
BASE="${BASE:-local/debian:bookworm-arm64}"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
export DOCKER_BUILDKIT=1
mkdir -p "$OUT"
printf 'step\tseconds\n' > "$OUT/timings.tsv"
timed() {  # timed NAME CMD...: runs CMD, appends its wall time
    local name="$1" t0 rc=0
    shift
    t0=$(date +%s)
    echo "== $name" >&2
    "$@" || rc=$?
    printf '%s\t%s\n' "$name" "$(( $(date +%s) - t0 ))" >> "$OUT/timings.tsv"
    return "$rc"
}

if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    command -v update-binfmts >/dev/null && [ -e /usr/libexec/qemu-binfmt/aarch64-binfmt-P ] || {
        echo "no aarch64 emulation: apt-get install -y qemu-user-static binfmt-support" >&2
        exit 2
    }
    mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    update-binfmts --enable qemu-aarch64
fi

timed base env DOCKER="$DOCKER" ARCH=arm64 BASE_IMAGE_NAME="$BASE" docker/ci/make-base-image.sh
secret=()
if [ -s "$CA_BUNDLE" ]; then secret=(--secret "id=ca,src=$CA_BUNDLE"); fi
timed build "$DOCKER" build --platform linux/arm64 -f docker/Dockerfile --target runtime "${secret[@]}" \
    --build-arg BASE_IMAGE="$BASE" --build-arg TORCH_VERSION="$TORCH" \
    --build-arg TORCHVISION_VERSION="$TORCHVISION" --build-arg TORCHAUDIO_VERSION= \
    --build-arg CUDA_VERSION=cpu --build-arg TORCH_INDEX_URL=https://pypi.org/simple -t "$TAG" .
"$DOCKER" image inspect "$TAG" --format '{{.Os}}/{{.Architecture}} {{.Size}}' > "$OUT/image.txt"
cat "$OUT/image.txt"
# shellcheck disable=SC2329  # called through timed
run() { "$DOCKER" run --rm --platform linux/arm64 --ipc=host --ulimit stack=67108864 "$TAG" "$@"; }
timed uname run uname -m > "$OUT/uname.txt"
rc=0
timed run run envcheck run --allow-cpu --json - > "$OUT/run.json" || rc=$?
echo "envcheck run --allow-cpu exited $rc" | tee "$OUT/run.rc"
timed host run envcheck host --json - > "$OUT/host.json"
cat "$OUT/timings.tsv"
exit "$rc"

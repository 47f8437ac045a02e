#!/usr/bin/env bash
# CI part for the images (called from .ci/run): start a Docker engine if none answers, debootstrap the
# local base, download the CI row's wheels once (cached in $WHEEL_CACHE and in the envcheck-wheelhouse
# image), then run tests/images: they build `runtime` and `devel` offline from those wheels, run envcheck
# inside through the SDK runner (--allow-cpu), check drift, secrets, user, and compile a CUDA extension.
# Idempotent: every step is skipped when its product exists. Needs root (apt-get, dockerd).
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
ROW="${ROW:-2.11-cu130}"
PYTHON="${PYTHON:-python3}"
WHEEL_CACHE="${WHEEL_CACHE:-/var/cache/envcheck/wheelhouse}"
if [ -x /usr/bin/docker ]; then DOCKER=/usr/bin/docker; else DOCKER=docker; fi
export DOCKER ENVCHECK_DOCKER="$DOCKER" DOCKER_BUILDKIT=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
step() { echo "== [$(( $(date +%s) - start ))s] $*"; }

step "docker engine"
if ! "$DOCKER" info >/dev/null 2>&1; then
    if ! command -v dockerd >/dev/null; then
        apt-get update -q && apt-get install -y -q docker.io debootstrap
    fi
    dockerd >/tmp/dockerd.log 2>&1 &
    for _ in $(seq 90); do "$DOCKER" info >/dev/null 2>&1 && break; sleep 1; done
    "$DOCKER" info >/dev/null 2>&1 || { echo "dockerd did not come up; see /tmp/dockerd.log" >&2; exit 1; }
fi
command -v debootstrap >/dev/null || { apt-get update -q && apt-get install -y -q debootstrap; }

step "local base image (debootstrap)"
docker/ci/make-base-image.sh

step "wheelhouse for $ROW"
if ! "$DOCKER" image inspect "envcheck-wheelhouse:$ROW" >/dev/null 2>&1; then
    mkdir -p "$WHEEL_CACHE"
    "$PYTHON" -m envcheck image wheelhouse --row "$ROW" --dest "$WHEEL_CACHE"
fi

step "image tests (build runtime + devel, envcheck inside, drift, secrets, extension)"
ENVCHECK_REQUIRE_DOCKER=1 ENVCHECK_TEST_ROW="$ROW" "$PYTHON" -m pytest tests/images -q -p no:cacheprovider

step "done"
"$DOCKER" image prune -f >/dev/null || true
echo "images CI wall time: $(( $(date +%s) - start ))s"

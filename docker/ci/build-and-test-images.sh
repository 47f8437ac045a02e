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
step() { echo "== [$(( $(date +%s) - start ))s] $*"; }

docker/ci/prepare-engine.sh
# After prepare-engine: it installs docker.io, whose client has BuildKit built in.
if [ -x /usr/bin/docker ]; then DOCKER=/usr/bin/docker; else DOCKER=docker; fi
export DOCKER ENVCHECK_DOCKER="$DOCKER" DOCKER_BUILDKIT=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

step "image tests (build runtime + devel, envcheck inside, drift, secrets, extension)"
ENVCHECK_REQUIRE_DOCKER=1 ENVCHECK_TEST_ROW="$ROW" "$PYTHON" -m pytest tests/images -q -p no:cacheprovider

step "done"
"$DOCKER" image prune -f >/dev/null || true
echo "images CI wall time: $(( $(date +%s) - start ))s"

#!/usr/bin/env bash
# Prepares a machine for the Docker tests: a running engine, the debootstrap base image (nothing can be
# pulled here) and the CI row's wheelhouse image (so image builds install torch offline, once).
# Idempotent: each step is skipped when its product exists. Needs root (apt-get, dockerd).
#   PYTHON  a python with envcheck and the docker SDK (default python3)   ROW  matrix row (2.11-cu130)
# An argument picks a part: `engine` (the engine and the base image; no python needed, so .ci/run runs it beside
# the test venv's install), `wheelhouse` (the row's wheels, on a running engine), `all` (the default: both).
set -euo pipefail
PART="${1:-all}"
case "$PART" in engine|wheelhouse|all) ;; *) echo "usage: $0 [engine|wheelhouse|all]" >&2; exit 2;; esac
cd "$(dirname "$0")/../.."
start=$(date +%s)
ROW="${ROW:-2.11-cu130}"
PYTHON="${PYTHON:-python3}"
WHEEL_CACHE="${WHEEL_CACHE:-/var/cache/envcheck/wheelhouse}"
step() { echo "== [$(( $(date +%s) - start ))s] $*"; }

engine() {
    step "docker engine"
    if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io debootstrap
    fi
    if ! timeout 20 "$(client)" info >/dev/null 2>&1; then
        nohup dockerd >/tmp/dockerd.log 2>&1 &
        for _ in $(seq 90); do timeout 10 "$(client)" info >/dev/null 2>&1 && break; sleep 1; done
        timeout 20 "$(client)" info >/dev/null 2>&1 || { echo "dockerd did not come up; see /tmp/dockerd.log" >&2; exit 1; }
    fi
    DOCKER="$(client)"
    export DOCKER ENVCHECK_DOCKER="$DOCKER" DOCKER_BUILDKIT=1

    step "disk"
    # CUDA images are ~6 GB each and the build cache grows per run: reclaim it when space runs low.
    MIN_FREE_GB="${MIN_FREE_GB:-35}"
    root_dir="$("$DOCKER" info --format '{{.DockerRootDir}}' 2>/dev/null || echo /var/lib/docker)"
    free_gb=$(( $(df -Pk "$root_dir" | awk 'NR==2 {print $4}') / 1048576 ))
    if [ "$free_gb" -lt "$MIN_FREE_GB" ]; then
        echo "only ${free_gb} GB free under $root_dir (< ${MIN_FREE_GB}): pruning the build cache and unused images"
        timeout 900 "$DOCKER" builder prune -af >/dev/null || true
        timeout 900 "$DOCKER" image prune -af --filter "label!=keep" >/dev/null || true
    fi
    echo "${free_gb} GB free before pruning decisions; now $(( $(df -Pk "$root_dir" | awk 'NR==2 {print $4}') / 1048576 )) GB"

    step "local base image (debootstrap)"
    docker/ci/make-base-image.sh
}

wheelhouse() {
    DOCKER="$(client)"
    export DOCKER ENVCHECK_DOCKER="$DOCKER" DOCKER_BUILDKIT=1
    timeout 20 "$DOCKER" info >/dev/null 2>&1 || { echo "no docker engine answers: run $0 engine first" >&2; exit 1; }
    step "wheelhouse image for $ROW"
    if ! "$DOCKER" image inspect "envcheck-wheelhouse:$ROW" >/dev/null 2>&1; then
        mkdir -p "$WHEEL_CACHE"
        timeout 1800 "$PYTHON" -m envcheck image wheelhouse --row "$ROW" --dest "$WHEEL_CACHE"
    fi
}

# Chosen once docker.io is installed: Debian's client has BuildKit built in, while a newer client elsewhere on
# PATH (e.g. /usr/local/bin/docker) may lack the buildx plugin it requires.
client() { if [ -x /usr/bin/docker ]; then echo /usr/bin/docker; else echo docker; fi; }

case "$PART" in
    engine) engine ;;
    wheelhouse) wheelhouse ;;
    all) engine; wheelhouse ;;
esac
step "engine ready ($PART)"

#!/usr/bin/env bash
# A newcomer's path, timed: a fresh clone followed through the commands of the README, docs/images.md and docs/dev-containers.md, step by step, to a
# verified runtime image and running JupyterLab and SSH (prints a table of steps and seconds; asserts what a
# newcomer would see, so a step the docs do not write down shows up as a failure here).
#
#   bash bench/newcomer.sh [REPO]        # REPO: what to clone (default: this checkout)
#
# Needs a running Docker engine (docker/ci/prepare-engine.sh makes one) and, on a machine that cannot pull,
# the local base image (`make base-image`, one of the steps). Uses the documented default ports (8888, 2222)
# and tags (`make image` builds the matrix's latest row: envcheck:latest-*). WHEELHOUSE=1: a machine whose build
# containers cannot fetch every wheel (a proxy that serves only some) first packs the row's wheels with
# `make wheelhouse` (pip on the host, which may see a local mirror); `make image` then finds them there (the
# wheelhouse image is a --find-links source of every build; OFFLINE=1 would also refuse the index, and the jupyter
# and ssh targets' packages are not in a wheelhouse). Everything it starts is stopped and removed at the end, also on
# failure; the clone is left in $WORK for inspection unless KEEP=0.
set -euo pipefail

REPO=${1:-$(cd "$(dirname "$0")/.." && pwd)}
WORK=${WORK:-$(mktemp -d /tmp/newcomer-XXXX)}
export DOCKER_BUILDKIT=1
BASE=local/debian:bookworm
TAG=envcheck:latest
IMAGE_FLAGS=("BASE_IMAGE=$BASE")
CPU=(-f compose.yaml -f compose.cpu.yaml)
declare -a STEPS=()

step() {  # step "what" command...: run it from the clone, time it, stop the walk on failure
    local what=$1 start end
    shift
    echo "== $what: $*" >&2
    start=$(date +%s.%N)
    local dir="$WORK/envcheck"
    [[ -d "$dir" ]] || dir=$WORK
    if ! (cd "$dir" && "$@") >"$WORK/step.log" 2>&1; then
        tail -n 30 "$WORK/step.log" >&2
        echo "FAILED at: $what" >&2
        exit 1
    fi
    end=$(date +%s.%N)
    STEPS+=("$(printf '%-62s %7.1f s' "$what" "$(echo "$end - $start" | bc)")")
}

cleanup() {
    if [[ -d "$WORK/envcheck" ]]; then
        (cd "$WORK/envcheck" && docker compose "${CPU[@]}" --profile '*' down -v --remove-orphans) \
            >/dev/null 2>&1 || true
    fi
    printf '%s\n' "" "newcomer walk-through ($(nproc) cores, $(date -u +%F)):" "${STEPS[@]}"
    if [[ ${KEEP:-1} == 0 ]]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

jupyter_up() {  # the token from the log, then the API with and without it
    local token="" i
    for i in $(seq 1 90); do
        token=$(docker compose "${CPU[@]}" logs jupyter 2>/dev/null | grep -o 'generated token for this start: [0-9a-f]*' \
                | tail -n 1 | awk '{print $NF}') || true
        [[ -n "$token" ]] && curl -fsS "http://127.0.0.1:8888/api/status?token=$token" >/dev/null 2>&1 && break
        sleep 2
    done
    [[ -n "$token" ]] || { echo "no generated token in the jupyter log" >&2; return 1; }
    curl -fsS "http://127.0.0.1:8888/api/status?token=$token" >/dev/null
    # without the token the API must refuse
    [[ $(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8888/api/status) == 403 ]]
}

oneline_up() {  # docs/dev-containers.md's "JupyterLab in one line", then its token from `docker logs`
    docker run --rm -d --name jupyter -p 127.0.0.1:8888:8888 -v "$PWD:/workspace" -e HOST_UID=1000 -e HOST_GID=1000 \
        "$TAG-jupyter" >/dev/null
    local token="" i
    for i in $(seq 1 90); do
        token=$(docker logs jupyter 2>&1 | grep -o 'generated token for this start: [0-9a-f]*' | awk '{print $NF}') || true
        [[ -n "$token" ]] && curl -fsS "http://127.0.0.1:8888/api/status?token=$token" >/dev/null 2>&1 && break
        sleep 2
    done
    local ok=1
    [[ -n "$token" ]] && curl -fsS "http://127.0.0.1:8888/api/status?token=$token" >/dev/null || ok=0
    docker stop jupyter >/dev/null
    [[ $ok == 1 ]]
}

ssh_up() {
    local i
    for i in $(seq 1 60); do
        ssh -p 2222 -i "$WORK/id_ed25519" -o IdentitiesOnly=yes -o StrictHostKeyChecking=no \
            -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o ConnectTimeout=3 dev@127.0.0.1 \
            'envcheck --version && id -u' && return 0
        sleep 2
    done
    return 1
}

mkdir -p "$WORK"
STEPS+=("$(printf '%-62s %7s' step seconds)")
step "git clone" git clone -q --no-local "$REPO" "$WORK/envcheck"
step "make verify ALLOW_CPU=1 (venv with PyPI's torch, then envcheck)" make verify ALLOW_CPU=1
step "pipx install . (README: check a host before pulling)" env PIPX_HOME="$WORK/pipx" PIPX_BIN_DIR="$WORK/bin" \
    pipx install .
step "envcheck host (the pipx install, outside the clone)" bash -c "cd '$WORK' && '$WORK/bin/envcheck' host"
step "make dist (the wheel and sdist)" make dist
step "pipx install dist/torch_envcheck-*.whl (a machine without the clone)" bash -c \
    "PIPX_HOME='$WORK/pipx2' PIPX_BIN_DIR='$WORK/bin2' pipx install dist/torch_envcheck-*.whl && cd '$WORK' && '$WORK/bin2/envcheck' matrix list >/dev/null"
step "make compose (only if 'docker compose version' fails)" \
    bash -c 'docker compose version >/dev/null 2>&1 || make compose'
step "make base-image (no registry here)" bash -c "docker image inspect $BASE >/dev/null 2>&1 || make base-image"
if [[ ${WHEELHOUSE:-0} == 1 ]]; then step "make wheelhouse (WHEELHOUSE=1: the latest row's wheels, once)" make wheelhouse; fi
step "make image TARGET=runtime ${IMAGE_FLAGS[*]}" make image TARGET=runtime "${IMAGE_FLAGS[@]}"
step "docker run --rm --ipc=host ... $TAG-runtime envcheck run --allow-cpu" \
    docker run --rm --ipc=host --ulimit stack=67108864 "$TAG-runtime" envcheck run --allow-cpu
step "make verify-image IMAGE=$TAG-runtime ALLOW_CPU=1" make verify-image "IMAGE=$TAG-runtime" ALLOW_CPU=1
step "cp .env.example .env (HOST_UID/HOST_GID: a non-root uid)" \
    bash -c 'cp .env.example .env && grep -q "^HOST_UID=1000" .env'
step "make image TARGET=jupyter && make image TARGET=ssh (BASE_IMAGE=...)" \
    bash -c "make image TARGET=jupyter ${IMAGE_FLAGS[*]} && make image TARGET=ssh ${IMAGE_FLAGS[*]}"
step "JupyterLab in one line (docker run ... $TAG-jupyter), token from docker logs" oneline_up
step "docker compose -f compose.yaml -f compose.cpu.yaml up -d jupyter" \
    docker compose "${CPU[@]}" up -d jupyter
step "JupyterLab answers with the logged token (403 without it)" jupyter_up
ssh-keygen -q -t ed25519 -N '' -f "$WORK/id_ed25519"
step "SSH_AUTHORIZED_KEYS=... docker compose ... up -d ssh" \
    env SSH_AUTHORIZED_KEYS="$(cat "$WORK/id_ed25519.pub")" docker compose "${CPU[@]}" up -d ssh
step "ssh -p 2222 dev@127.0.0.1 envcheck --version (key only)" ssh_up
step "docker compose ... --profile '*' down -v" docker compose "${CPU[@]}" --profile '*' down -v

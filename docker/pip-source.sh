# Sourced by the Dockerfile's install steps: where pip and uv take wheels from.
# Sets PIP_SOURCE/UV_SOURCE (bash arrays). The CA bundle is a BuildKit secret mounted at
# /run/secrets/ca for the length of one RUN step; it is never copied into a layer.
# shellcheck shell=bash
set -euo pipefail
if [ -s /run/secrets/ca ]; then
    export PIP_CERT=/run/secrets/ca SSL_CERT_FILE=/run/secrets/ca
fi
shopt -s nullglob
wheels=(/wheels/*.whl)
shopt -u nullglob
if [ "${OFFLINE:-0}" = 1 ]; then
    if [ "${#wheels[@]}" -eq 0 ]; then
        echo "OFFLINE=1 but the WHEELHOUSE_IMAGE holds no wheels; run: make wheelhouse ROW=<row id>" >&2
        exit 1
    fi
    PIP_SOURCE=(--no-index --find-links /wheels)
    UV_SOURCE=(--offline --no-index --find-links /wheels)
else
    PIP_SOURCE=(--index-url "${TORCH_INDEX_URL}" --find-links /wheels)
    UV_SOURCE=(--index-url "${TORCH_INDEX_URL}" --find-links /wheels)
fi
export PIP_SOURCE UV_SOURCE

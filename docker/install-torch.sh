# The torch layer: exact pins from the matrix row, CUDA from the wheels; fails if the CUDA is not the row's.
# CUDA_VERSION=cpu expects a CPU build (torch.version.cuda is None): the arm64 proof under emulation, where the
# aarch64 CUDA wheels cannot be reached (docs/images.md, "arm64").
# shellcheck shell=bash
set -euo pipefail
# shellcheck source=docker/pip-source.sh
source /opt/envcheck-build/pip-source.sh
pkgs=("torch==${TORCH_VERSION}" "torchvision==${TORCHVISION_VERSION}")
if [ -n "${TORCHAUDIO_VERSION}" ]; then pkgs+=("torchaudio==${TORCHAUDIO_VERSION}"); fi
if [ "${INSTALLER}" = uv ]; then
    pip install --no-cache-dir "${PIP_SOURCE[@]}" "uv==${UV_VERSION}"
    # unlike pip, uv writes no bytecode unless asked; and the image sets PYTHONDONTWRITEBYTECODE, so without it every
    # `import torch` in a container would compile torch's modules from source again
    uv pip install --no-cache --compile-bytecode --python /opt/venv/bin/python "${UV_SOURCE[@]}" "${pkgs[@]}"
else
    pip install --no-cache-dir "${PIP_SOURCE[@]}" "${pkgs[@]}"
fi
have="$(python -c 'import torch; print(torch.version.cuda or "cpu")')"
if [ "$have" != "${CUDA_VERSION}" ]; then
    echo "torch ${TORCH_VERSION} from ${TORCH_INDEX_URL} is CUDA $have, the row says ${CUDA_VERSION}" >&2
    exit 1
fi

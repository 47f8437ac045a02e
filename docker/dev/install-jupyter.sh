# jupyter target: JupyterLab + ipykernel into the image's venv, as dev. The packages already installed
# (torch and its dependencies) are constraints, so this step can add packages but never change them.
# shellcheck shell=bash
set -euo pipefail
export TORCH_INDEX_URL="${DEV_INDEX_URL:-https://pypi.org/simple}"
# shellcheck source=docker/pip-source.sh
source /opt/envcheck-build/pip-source.sh
constraints=$(mktemp)
pip freeze --exclude-editable >"$constraints"
pip install --no-cache-dir "${PIP_SOURCE[@]}" --constraint "$constraints" \
    -r /opt/envcheck-build/jupyter-requirements.txt
rm -f "$constraints"
python -c 'import torch, ipykernel, jupyterlab'

# Builds envcheck's own wheel; its build backend comes from the same wheel sources as torch.
# shellcheck shell=bash
set -euo pipefail
# shellcheck source=docker/pip-source.sh
source /opt/envcheck-build/pip-source.sh
touch /tmp/envcheck-src/README.md
pip wheel --no-cache-dir --no-deps "${PIP_SOURCE[@]}" -w /tmp/dist /tmp/envcheck-src

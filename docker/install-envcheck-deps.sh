# envcheck's own runtime dependencies (rich; nvidia-ml-py for the NVML checks; prometheus_client, the `cluster`
# extra, for the documented node modes' --prometheus textfile), in their own layer after torch so the torch layer
# never depends on them. From PyPI (a torch index may not mirror them) or the wheelhouse when OFFLINE=1.
# Keep the list equal to ENVCHECK_DEPS in envcheck/images/build.py (tests/images/test_matrix.py checks it).
# shellcheck shell=bash
set -euo pipefail
TORCH_INDEX_URL=https://pypi.org/simple
# shellcheck source=docker/pip-source.sh
source /opt/envcheck-build/pip-source.sh
pip install --no-cache-dir "${PIP_SOURCE[@]}" "rich>=13" "packaging>=22" "nvidia-ml-py>=12" "prometheus_client>=0.20"

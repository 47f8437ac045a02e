# Base layer: python3 from the base's own apt, tini (PID 1), g++ + Python headers (torch.compile builds
# C++ on CPU), make (`make verify` inside); the non-root user dev (uid 1000) and /opt/venv, /workspace.
# shellcheck shell=bash
set -euo pipefail
apt_opts=()
if [ -s /run/secrets/ca ]; then apt_opts=(-o Acquire::https::CAInfo=/run/secrets/ca); fi
apt-get "${apt_opts[@]}" update
apt-get "${apt_opts[@]}" install -y --no-install-recommends \
    ca-certificates g++ libpython3-dev make python3 python3-venv tini
rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
have="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ "$have" != "${PYTHON_VERSION}" ]; then
    echo "BASE_IMAGE ships python $have but PYTHON_VERSION=${PYTHON_VERSION}; pick a base with that python3" >&2
    exit 1
fi
useradd --create-home --uid 1000 --user-group --shell /bin/bash dev
install -d -o dev -g dev /opt/venv /workspace

#!/usr/bin/env bash
# CI part for the dev containers, run after docker/ci/build-and-test-images.sh (which starts the
# engine and makes local/debian:bookworm and the row's wheelhouse image). tests/compose builds runtime,
# jupyter and ssh FROM the cached torch layers (warm: ~1.5 min), then brings the services up with
# compose.cpu.yaml and logs in for real. Every project is torn down even when a test fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
PYTHON="${PYTHON:-python3}"
if [ -x /usr/bin/docker ]; then export ENVCHECK_DOCKER=/usr/bin/docker; fi
export ENVCHECK_REQUIRE_DOCKER=1 ENVCHECK_TEST_ROW="${ROW:-2.11-cu130}" DOCKER_BUILDKIT=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PYTHON" -m pytest tests/compose -q -p no:cacheprovider "$@"
echo "dev-container CI wall time: $(( $(date +%s) - start ))s"

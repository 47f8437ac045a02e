#!/usr/bin/env bash
# Waits for a step that .ci/run started in the background: PREFIX.rc appears when it ends (holding its exit code),
# PREFIX.log is its output. Prints the log, indented, and exits with the step's code (1 after TIMEOUT_S seconds).
#   docker/ci/await.sh PREFIX [TIMEOUT_S]
set -euo pipefail
prefix="${1:?usage: $0 PREFIX [TIMEOUT_S]}"
timeout_s="${2:-1800}"
began=$(date +%s)
until [ -s "$prefix.rc" ]; do
    if [ $(( $(date +%s) - began )) -ge "$timeout_s" ]; then
        echo "$(basename "$prefix") did not end within ${timeout_s}s; its output so far:" >&2
        sed 's/^/  /' "$prefix.log" >&2 || true
        exit 1
    fi
    sleep 1
done
echo "== $(basename "$prefix") (started in the background, waited $(( $(date +%s) - began ))s for it):"
sed 's/^/  /' "$prefix.log"
exit "$(cat "$prefix.rc")"

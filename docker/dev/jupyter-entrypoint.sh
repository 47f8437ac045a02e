#!/bin/bash
# Entrypoint of the `jupyter` image: resolve the token, adopt the host uid/gid, run JupyterLab as dev.
#
# Token: JUPYTER_TOKEN, or the first line of the file named by JUPYTER_TOKEN_FILE (a compose/Docker
# secret), or, when neither is set, a random token generated now and printed once on this line of the
# log. Authentication is never off: an empty value counts as unset, and nothing is decided at build time.
set -euo pipefail
ENVCHECK_ROLE=jupyter
# shellcheck source=docker/dev/dev-user.sh
. /usr/local/lib/envcheck/dev-user.sh

token=${JUPYTER_TOKEN:-}
token_file=${JUPYTER_TOKEN_FILE:-}
if [ -n "$token" ] && [ -n "$token_file" ]; then
    die "both JUPYTER_TOKEN and JUPYTER_TOKEN_FILE are set; keep only one"
fi
if [ -n "$token_file" ]; then
    [ -r "$token_file" ] || die "JUPYTER_TOKEN_FILE=$token_file is not a readable file; mount the secret there or unset it"
    IFS= read -r token <"$token_file" || true
    token=${token//[[:space:]]/}
    [ -n "$token" ] || die "JUPYTER_TOKEN_FILE=$token_file is empty; write a token into it (e.g. openssl rand -hex 32)"
elif [ -z "$token" ]; then
    token=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
    say "no JUPYTER_TOKEN or JUPYTER_TOKEN_FILE set; generated token for this start: $token"
fi
case "$token" in *[[:space:]]*) die "the Jupyter token contains whitespace; use letters and digits" ;; esac
unset JUPYTER_TOKEN_FILE
export JUPYTER_TOKEN="$token"   # jupyter-server reads it; only this process tree sees it

adopt_host_ids "$DEV_HOME/.cache"
cd /workspace 2>/dev/null || cd "$DEV_HOME"
if [ "$#" -eq 0 ]; then
    set -- jupyter lab --config=/usr/local/lib/envcheck/jupyter_server_config.py
fi
exec_as_dev /usr/bin/tini -- "$@"

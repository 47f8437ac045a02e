#!/bin/bash
# session-env.sh SSHD_INCLUDE PROFILE_SCRIPT: write the image's runtime environment for SSH sessions.
#
# Kept: PATH (with the venv), VIRTUAL_ENV, LD_LIBRARY_PATH, LANG/LC_ALL/TZ, and every NVIDIA_*, CUDA_*,
# NCCL_*, TORCH_*, ENVCHECK_*, PYTHON* and HF_* variable. Never kept: secrets (tokens, keys) and
# HOST_UID/HOST_GID. Values with a double quote or a newline cannot be expressed and are skipped.
set -euo pipefail
include=$1
profile=$2
keep='^(PATH|VIRTUAL_ENV|LD_LIBRARY_PATH|LANG|LC_ALL|TZ|(NVIDIA|CUDA|NCCL|TORCH|ENVCHECK|PYTHON|HF)_?[A-Za-z0-9_]*)$'
secret='(TOKEN|SECRET|PASSWORD|AUTHORIZED_KEYS|_KEY$)'
{
    echo "# Written by session-env.sh at container start: the image's environment for SSH sessions."
    printf 'SetEnv'
    while IFS= read -r name; do
        value=${!name}
        case "$value" in *'"'* | *$'\n'*) continue ;; esac
        printf ' "%s=%s"' "$name" "$value"
    done < <(compgen -e | grep -E "$keep" | grep -Ev "$secret" | sort)
    echo
} >"$include.tmp"
{
    echo "# Written at container start: login shells (which reset PATH in /etc/profile) get the image's env."
    while IFS= read -r name; do
        printf 'export %s=%q\n' "$name" "${!name}"
    done < <(compgen -e | grep -E "$keep" | grep -Ev "$secret" | sort)
} >"$profile.tmp"
chmod 644 "$include.tmp" "$profile.tmp"
mv "$include.tmp" "$include"
mv "$profile.tmp" "$profile"

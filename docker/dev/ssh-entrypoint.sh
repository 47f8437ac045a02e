#!/bin/bash
# Entrypoint of the `ssh` image: authorized keys, per-container host keys, session environment, sshd.
#
# Why sshd runs as `dev` on port 2222 (not as root on 22): after this script's root phase no root
# process is left in the container. A non-root sshd cannot switch users, so the only account that can
# ever log in is dev; password and root logins are impossible by construction, not only by
# configuration (PasswordAuthentication no, PermitRootLogin no, AllowUsers dev are set too), and a
# pre-auth bug in sshd yields dev, not root. The cost: UsePAM no (no PAM session modules), no
# utmp/lastlog, and a high port -- none of which a dev container needs.
set -euo pipefail
ENVCHECK_ROLE=ssh
# shellcheck source=docker/dev/dev-user.sh
. /usr/local/lib/envcheck/dev-user.sh

HOST_KEY_DIR=/var/lib/envcheck/ssh-host-keys  # also named in sshd_config
KEYS_FILE=${SSH_AUTHORIZED_KEYS_FILE:-/run/secrets/ssh_authorized_keys}
RUN_DIR=/run/envcheck-sshd
HOW_TO="set SSH_AUTHORIZED_KEYS='ssh-ed25519 AAAA...' or mount your public key file at $KEYS_FILE (docs/dev-containers.md)"

[ "$(id -u)" -eq 0 ] || die "start this image as root (no \`user:\`); it drops to dev before starting sshd"

# 1. Authorized keys: from the environment and/or a mounted file; refuse to start without any.
collected=$(mktemp)
printf '%s\n' "${SSH_AUTHORIZED_KEYS:-}" >"$collected"
if [ -e "$KEYS_FILE" ]; then
    [ -r "$KEYS_FILE" ] || die "$KEYS_FILE is not readable; $HOW_TO"
    cat "$KEYS_FILE" >>"$collected"
fi
valid=$(mktemp)
while IFS= read -r line; do
    case "$line" in '' | '#'*) continue ;; esac
    if printf '%s\n' "$line" | ssh-keygen -l -f - >/dev/null 2>&1; then
        printf '%s\n' "$line" >>"$valid"
    else
        say "ignoring a line that is not an SSH public key: ${line:0:40}..."
    fi
done <"$collected"
[ -s "$valid" ] || die "no SSH public key configured, refusing to start: $HOW_TO"
unset SSH_AUTHORIZED_KEYS
install -d -m 700 -o "$DEV_USER" -g "$DEV_USER" "$DEV_HOME/.ssh"
install -m 600 -o "$DEV_USER" -g "$DEV_USER" "$valid" "$DEV_HOME/.ssh/authorized_keys"
rm -f "$collected" "$valid"

# 2. Host keys: generated on this container's first start into a volume, never in the image.
install -d -m 700 "$HOST_KEY_DIR"
for type in ed25519 rsa; do
    key="$HOST_KEY_DIR/ssh_host_${type}_key"
    if [ ! -s "$key" ]; then
        rm -f "$key" "$key.pub"
        ssh-keygen -q -t "$type" -N '' -C "envcheck-ssh-$(hostname)" -f "$key"
        say "generated host key $(ssh-keygen -l -f "$key.pub")"
    fi
done

# 3. Session environment: sshd builds a fresh environment for each session, so hand it the image's
#    (root-owned SetEnv lines for ssh commands, a profile.d script for login shells).
install -d -m 755 "$RUN_DIR" /run/sshd  # /run/sshd: sshd insists on it even when not root
/usr/local/lib/envcheck/session-env.sh "$RUN_DIR/session_env.conf" /etc/profile.d/00-envcheck-image.sh

# 4. Ownership (HOST_UID/HOST_GID), then sshd as dev under tini.
adopt_host_ids "$DEV_HOME/.cache"
chown -R "$DEV_USER:$DEV_USER" "$HOST_KEY_DIR"
chmod 600 "$HOST_KEY_DIR"/ssh_host_*_key
chown "$DEV_USER:$DEV_USER" "$DEV_HOME/.ssh" "$DEV_HOME/.ssh/authorized_keys"
/usr/sbin/sshd -t -f /usr/local/lib/envcheck/sshd_config || die "sshd rejected its configuration (see above)"
if [ "$#" -eq 0 ]; then
    set -- /usr/sbin/sshd -D -e -f /usr/local/lib/envcheck/sshd_config
fi
exec_as_dev /usr/bin/tini -- "$@"

# shellcheck shell=bash
# Shared by the jupyter and ssh entrypoints (sourced, never executed).
#
# UID/GID choice: the container starts as root only long enough to give the user `dev` the host's
# uid/gid (HOST_UID/HOST_GID, via usermod/groupmod) and to fix ownership of the few paths dev owns;
# then it drops to dev with `setpriv` (util-linux) and exec()s tini, so no root process survives the
# start. Files dev writes into a mounted /workspace therefore belong to the host user. We do not use
# compose `user: "${HOST_UID}:${HOST_GID}"` because sshd needs a passwd entry and a home for the login
# user, and an anonymous uid has neither.

DEV_USER=dev
DEV_HOME=/home/dev

die() {  # one line on stderr, exit 78 (EX_CONFIG): a configuration problem the user must fix
    printf 'envcheck-%s: %s\n' "${ENVCHECK_ROLE:-dev}" "$*" >&2
    exit 78
}

say() { printf 'envcheck-%s: %s\n' "${ENVCHECK_ROLE:-dev}" "$*" >&2; }

_numeric_id() {  # _numeric_id NAME VALUE HOST_COMMAND -> validates a uid/gid from the environment
    case "$2" in
        '' | *[!0-9]*) die "$1='$2' is not a number; set it to the host user's id, e.g. $1=\$($3)" ;;
    esac
    [ "$2" -ne 0 ] || die "$1=0 would make dev root; leave it unset or set it to a non-root id"
}

# Give dev the host user's uid/gid (root only) and chown what dev must own.
adopt_host_ids() {
    local want_uid want_gid have_uid have_gid
    have_uid=$(id -u "$DEV_USER")
    have_gid=$(id -g "$DEV_USER")
    want_uid=${HOST_UID:-$have_uid}
    want_gid=${HOST_GID:-$have_gid}
    _numeric_id HOST_UID "$want_uid" "id -u"
    _numeric_id HOST_GID "$want_gid" "id -g"
    if [ "$(id -u)" -ne 0 ]; then
        [ "$want_uid" = "$(id -u)" ] || die "HOST_UID=$want_uid needs the container to start as root (drop \`user:\`/--user)"
        return 0
    fi
    if [ "$want_gid" != "$have_gid" ]; then
        groupmod -o -g "$want_gid" "$DEV_USER" || die "groupmod -g $want_gid failed"
    fi
    if [ "$want_uid" != "$have_uid" ]; then
        usermod -o -u "$want_uid" "$DEV_USER" >/dev/null || die "usermod -u $want_uid failed"
    fi
    if [ "$want_uid:$want_gid" != "$have_uid:$have_gid" ]; then
        # Directories only: dev can then add/remove packages in the venv without copying every
        # file of the torch layers up into the container (chown of a file forces a full copy-up).
        find /opt/venv -xdev -type d -exec chown "$want_uid:$want_gid" {} +
    fi
    local path
    for path in "$DEV_HOME" "$@"; do
        [ -e "$path" ] || continue
        if [ "$(stat -c %u:%g "$path")" != "$want_uid:$want_gid" ]; then
            chown -R "$want_uid:$want_gid" "$path"
        fi
    done
}

# Replace this process with CMD running as dev (PID 1 stays PID 1: tini is exec'd as dev).
exec_as_dev() {
    export HOME="$DEV_HOME" USER="$DEV_USER" LOGNAME="$DEV_USER" SHELL=/bin/bash
    if [ "$(id -u)" -ne 0 ]; then
        exec "$@"
    fi
    exec setpriv --reuid="$DEV_USER" --regid="$DEV_USER" --init-groups --inh-caps=-all -- "$@"
}

"""A host's view for a process on a machine that is itself a container (this one has /.dockerenv, as CI's may):
the process runs in a private mount namespace, chrooted into a root that binds every top-level entry of / again
(with whatever is mounted below it) except the container runtime's mark, which envcheck reads to tell a container
from a host (probe.system.in_container). Staged, and only that: the mark's absence. Everything the process reads
is the machine's own. Nothing outlives the process: the mounts live in its namespace, the root folder in the
caller's temp dir."""

from __future__ import annotations

import os
import shlex
import shutil

MARKS = (
    ".dockerenv",
)  # the container runtime's files at /: Docker's (Podman's /run/.containerenv sits in /run)


def needed() -> bool:
    """Whether this machine carries a container mark a host would not."""
    return any(os.path.exists(f"/{m}") for m in MARKS)


def steps(root: str) -> list[str]:
    """The shell steps that build the root at `root` (inside a private mount namespace)."""
    q = shlex.quote(root)
    skip = "|".join([*MARKS, "run"])
    return [
        f"mkdir -p {q}",
        f"mount -t tmpfs envcheck-stage-root {q}",
        'for e in /* /.[!.]*; do n=${e#/}; { [ -e "$e" ] || [ -L "$e" ]; } || continue; '
        f"case $n in {skip}) continue;; esac; "
        f'if [ -L "$e" ]; then ln -s "$(readlink "$e")" {q}/"$n"; '
        f'elif [ -d "$e" ]; then mkdir {q}/"$n" && mount --rbind "$e" {q}/"$n"; '
        f'else touch {q}/"$n" && mount --bind "$e" {q}/"$n"; fi; done',
        f"mkdir {q}/run && mount --rbind /run {q}/run",
    ]


def chroot_argv(root: str, cwd: str, argv: list[str]) -> list[str]:
    """argv run in the root, from `cwd`."""
    chroot = shutil.which("chroot", path="/usr/sbin:/usr/bin:/sbin:/bin") or "chroot"
    return [chroot, root, "/bin/sh", "-c", 'cd "$0" && exec "$@"', cwd, *argv]


# Where command() builds its root: a tmpfs of its own namespace over /mnt (FHS: present on every Linux), so not even an
# empty folder is left on the machine.
SCRATCH = "/mnt"


def command(cwd: str, argv: list[str]) -> list[str]:
    """argv as a process on the host sees it: its own namespace, the root built, chrooted (argv as is when this
    machine carries no container mark)."""
    if not needed():
        return argv
    root = f"{SCRATCH}/envcheck-host-root"
    lines = [
        "set -e",
        "mount --make-rprivate /",
        f"mount -t tmpfs envcheck-stage-scratch {SCRATCH}",
        *steps(root),
    ]
    script = "\n".join([*lines, 'exec "$@"'])
    return [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "host",
        *chroot_argv(root, cwd, argv),
    ]


def shell(cwd: str, argv: list[str]) -> str:
    """command() as one line of shell, for a prolog script."""
    return " ".join(shlex.quote(a) for a in command(cwd, argv))

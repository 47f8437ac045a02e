"""Readers for the runtime profile: mounts and /proc/self/status fields (cgroup limits: envcheck.probe.cgroup). No
verdicts."""

from __future__ import annotations

import os


def mount_options(path: str) -> set[str]:
    """The mount options (per-mount and superblock) of the mount holding `path`; empty when unreadable."""
    try:
        with open("/proc/self/mountinfo") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return set()
    real, best, opts = os.path.realpath(path), "", set()
    for line in lines:
        fields = line.split()
        if len(fields) < 6:
            continue
        point = fields[4].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, opts = point, set(fields[5].split(","))
    return opts


def status_fields() -> dict[str, str]:
    """/proc/self/status as a dict (NoNewPrivs, Seccomp, CapEff...)."""
    try:
        with open("/proc/self/status") as fh:
            return dict(line.split(":\t", 1) for line in fh.read().splitlines() if ":\t" in line)
    except OSError:
        return {}


def writable(path: str) -> bool:
    """Whether this process can create files in `path` (access(2) plus a read-only mount)."""
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK) and "ro" not in mount_options(path)


def creatable(path: str) -> bool:
    """Whether this process can write in `path`, or create it under its nearest existing ancestor."""
    current = os.path.abspath(path)
    while not os.path.exists(current) and current != "/":
        current = os.path.dirname(current)
    return writable(current)

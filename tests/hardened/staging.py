"""Stage a hardened runtime without Docker: a private mount namespace, read-only temp/HOME, a uid, ulimits.

Built on util-linux `unshare -m` and `setpriv` (root is needed to unshare and to switch uid; tests skip otherwise).
Only what cannot be made here is left out: nothing is simulated, the kernel enforces every restriction.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

UID = 4242  # a uid with no passwd entry on this machine (asserted by the fixture)


@dataclass
class Hardening:
    """What the staged runtime takes away."""

    readonly: tuple[str, ...] = ()  # directories bind-mounted read-only over themselves
    noexec: tuple[str, ...] = ()  # directories remounted noexec (bind, same contents)
    uid: int | None = None  # switch to this uid/gid, groups cleared
    env: dict[str, str] = field(default_factory=dict)
    limits: tuple[str, ...] = ()  # `prlimit` options, e.g. "--nofile=32", "--nproc=8"


def can_stage() -> bool:
    """True where this process may unshare a mount namespace and switch uid (root with util-linux)."""
    return (
        os.geteuid() == 0
        and shutil.which("unshare") is not None
        and all(shutil.which(t) for t in ("setpriv", "prlimit"))
    )


def command(h: Hardening, argv: list[str]) -> list[str]:
    """The argv that runs `argv` under the hardening `h`."""
    steps = ["mount --make-rprivate /"]
    for path in h.readonly:
        steps.append(f"mount --bind {shlex.quote(path)} {shlex.quote(path)}")
        steps.append(f"mount -o remount,bind,ro {shlex.quote(path)}")
    for path in h.noexec:
        steps.append(f"mount --bind {shlex.quote(path)} {shlex.quote(path)}")
        steps.append(f"mount -o remount,bind,noexec {shlex.quote(path)}")
    run = [shlex.quote(a) for a in argv]
    if h.uid is not None:
        steps += expose_interpreter()
        run = ["setpriv", f"--reuid={h.uid}", f"--regid={h.uid}", "--clear-groups", *run]
    if h.limits:
        run = ["prlimit", *h.limits, *run]
    script = " && ".join([*steps, "exec " + " ".join(run)])
    return ["unshare", "-m", "sh", "-c", script]


def expose_interpreter() -> list[str]:
    """Mount steps that let another uid reach this interpreter when it sits under a private dir (pyenv in /root).

    Inside the private namespace only: the closed dir is covered by a 0755 tmpfs holding just the interpreter's
    tree, bind-mounted back; the real directory's mode is never changed.
    """
    real = os.path.realpath(sys.executable)
    parts = real.split("/")
    for depth in range(2, len(parts)):
        closed = "/".join(parts[:depth]) or "/"
        if not os.stat(closed).st_mode & 0o001:
            keep = "/".join(parts[: depth + 1])
            q, k = shlex.quote(closed), shlex.quote(keep)
            return [
                "mount -t tmpfs envcheck-stage /mnt",
                "mkdir /mnt/keep",
                f"mount --bind {k} /mnt/keep",
                f"mount -t tmpfs -o mode=0755 envcheck-stage {q}",
                f"mkdir -p {k}",
                f"mount --move /mnt/keep {k}",
            ]
    return []


def run(h: Hardening, argv: list[str], timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """Run argv staged; the environment is the caller's plus h.env (HOME etc.)."""
    env = {**os.environ, **h.env}
    env.pop("PYTEST_CURRENT_TEST", None)
    return subprocess.run(
        command(h, argv), capture_output=True, text=True, timeout=timeout_s, env=env, check=False, cwd="/"
    )


def python(h: Hardening, code: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """Run a Python snippet staged (the premise: does the real job break here?)."""
    return run(h, [sys.executable, "-c", code], timeout_s)

"""The suite's guard on the system temp dir: a run dir (`envcheck-run-<pid>-*`, envcheck.core.rundir) that a test
left there, made during the session and held by no live run at its end, is a leak (tests that kill runs use a
private TMPDIR). Cheap: one listing of the temp dir at the start and one at the end. xdist-safe: every worker checks
at its own end, and a run still going in another worker holds its dir's lock, so it is never named."""

from __future__ import annotations

import os
import tempfile
import time

from envcheck.checks.torch_compile.toolchain import default_cache_name
from envcheck.core import stale_rundirs
from envcheck.core.rundir import PREFIX


def run_dirs(base: str) -> set[str]:
    """The names of the run dirs in `base`."""
    try:
        with os.scandir(base) as entries:
            return {e.name for e in entries if e.name.startswith(PREFIX)}
    except OSError:
        return set()


def left_behind(base: str, before: set[str], wait_s: float = 5.0) -> list[str]:
    """The run dirs made since `before` that no live run holds, after `wait_s` for runs just ending to remove
    their own (a fork server removes the dir of an envcheck just killed)."""
    deadline = time.monotonic() + wait_s
    while True:
        found = sorted(
            os.path.join(base, n)
            for n in run_dirs(base) - before
            if stale_rundirs.abandoned(os.path.join(base, n), PREFIX)
        )
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)


def system_temp() -> str:
    """The temp dir envcheck children of the tests use when a test gives them none."""
    return os.environ.get("TMPDIR") or tempfile.gettempdir()


def inductor_default_cache(base: str) -> tuple[str, int] | None:
    """Inductor's default cache dir in `base` (<temp>/torchinductor_<user>) and the newest modification time of it and
    the folders in it (a file made anywhere in it changes its folder's), or None when there is none."""
    path = os.path.join(base, default_cache_name())
    if not os.path.isdir(path):
        return None
    newest = 0
    for folder, _, _ in os.walk(path):
        try:
            newest = max(newest, os.stat(folder).st_mtime_ns)
        except OSError:  # removed meanwhile
            pass
    return path, newest

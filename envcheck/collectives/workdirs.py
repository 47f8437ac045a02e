"""The launcher's work directories (`$TMPDIR/envcheck-dist-<owner pid>-*`, one per launch, thousands of files
on a long sweep): named by the process that owns them, so any envcheck process can remove those of dead owners
(a worker killed on timeout, by Ctrl-C or SIGKILL never runs its own cleanup). No torch here: the CLI calls it."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

WORKDIR_PREFIX = "envcheck-dist-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    try:  # a zombie (killed, not yet reaped) is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def sweep_stale_workdirs(root: str | None = None) -> list[str]:
    """Remove the work directories whose owner process is gone; the paths removed."""
    base = Path(root or tempfile.gettempdir())
    removed = []
    for path in base.glob(f"{WORKDIR_PREFIX}*-*"):
        pid_text = path.name[len(WORKDIR_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or path.is_symlink() or not path.is_dir():
            continue
        if int(pid_text) != os.getpid() and not _pid_alive(int(pid_text)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


def sweep_after_run(started: float, wait_s: float = 5.0) -> list[str]:
    """At the end of a run whose workers were just killed: wait (at most `wait_s`) for the owners of work
    directories created since `started` (unix time) to be gone, then remove every stale one."""
    try:
        base = Path(tempfile.gettempdir())
    except OSError:  # no writable temp dir (a read-only container): no rank could have made a work dir there
        return []
    end = time.monotonic() + wait_s
    removed = sweep_stale_workdirs()
    while time.monotonic() < end:
        try:
            recent = [p for p in base.glob(f"{WORKDIR_PREFIX}*-*") if p.stat().st_mtime >= started - 1]
        except OSError:
            continue
        if not recent:
            break
        time.sleep(0.05)
        removed += sweep_stale_workdirs()
    return removed

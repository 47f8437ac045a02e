"""Which run dirs are in use, and the sweep of those no process holds any more (see `envcheck.core.rundir`).

A run dir is in use while a process of its run lives: envcheck itself, its fork server and every worker hold a
shared `flock` on the dir (one open of it, inherited across fork). When the whole run is SIGKILLed at once (a
cgroup kill: Slurm ending a job, `docker kill`, the OOM killer taking the cgroup) nothing of it can clean up,
and the next run in the same temp dir removes the dir instead. It removes `<temp>/envcheck-run-<pid>-*` only
when all of these hold: it is a real dir (not a symlink) owned by this user, older than GRACE_S, its pid is not
a live envcheck (or python: an envcheck without the lock, or an engine embedded in a Python program) here,
nobody holds its lock (so a run in another PID namespace sharing this temp dir keeps its dir), and everything in
it is this user's and its top level holds only worker dirs (`w<pid>`) and the shared one (`shared`). Removal never
follows a symlink.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import stat
import time

GRACE_S = 10.0  # a dir this young may be between its mkdtemp and its lock: left alone
SHARED = "shared"  # the part of a run's dir the fork server's imports write in (its later workers inherit it)
_WORKER = re.compile(rf"w\d+|{SHARED}")
_PF_KTHREAD = 0x00200000  # /proc/<pid>/stat flags: a kernel thread


def hold(path: str) -> int | None:
    """Mark `path` in use for as long as this process (or a child forked from it) lives: the fd holding a
    shared lock on it, or None where the file system has no locks (the dir is then never swept)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    for _ in range(50):  # a sweep or `abandoned` holds the lock exclusively for a moment
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            time.sleep(0.02)
        except OSError:
            break
    os.close(fd)
    return None


def abandoned(path: str, prefix: str) -> bool:
    """Whether the run dir `path` (`<prefix><pid>-*`) belongs to no live run: its pid is no live envcheck and
    nobody holds its lock. Removes nothing (the test suite's guard asks this)."""
    pid_text = os.path.basename(path)[len(prefix) :].split("-", 1)[0]
    if not pid_text.isdigit() or run_alive(int(pid_text)):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def run_alive(pid: int) -> bool:
    """Whether `pid` may still be the envcheck (or a Python process embedding its engine) that made the dir: a
    live process here, not a zombie nor a kernel thread, whose command line names envcheck or python, or one we
    cannot read. A recycled pid, or init (pid 1 here, when the dir was made by envcheck as pid 1 of a container
    sharing this temp dir), is not; the lock still guards a live run."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        if fields[0] == b"Z" or int(fields[6]) & _PF_KTHREAD:
            return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except (OSError, IndexError, ValueError):
        return True
    return not cmdline or b"envcheck" in cmdline or b"python" in cmdline  # empty: a process in execve


def _only_ours(path: str, uid: int) -> bool:
    """Whether the top level of `path` holds only worker dirs (and the shared one) and everything under it belongs
    to `uid`."""
    try:
        with os.scandir(path) as top:
            for entry in top:
                if not _WORKER.fullmatch(entry.name) or not entry.is_dir(follow_symlinks=False):
                    return False
        for folder, dirs, files in os.walk(path, followlinks=False):
            for name in dirs + files:
                if os.lstat(os.path.join(folder, name)).st_uid != uid:
                    return False
    except OSError:
        return False
    return True


def _stale(path: str, pid: int, grace_s: float) -> bool:
    uid = os.geteuid()
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or time.time() - info.st_mtime < grace_s:
        return False
    return pid != os.getpid() and not run_alive(pid) and _only_ours(path, uid)


def sweep(base: str, prefix: str, grace_s: float = GRACE_S) -> list[str]:
    """Remove the run dirs `<base>/<prefix><pid>-*` of runs that are wholly gone; the paths removed."""
    removed: list[str] = []
    try:
        with os.scandir(base) as entries:
            names = [e.name for e in entries if e.name.startswith(prefix)]
    except OSError:
        return removed
    for name in names:
        pid_text = name[len(prefix) :].split("-", 1)[0]
        path = os.path.join(base, name)
        if not pid_text.isdigit() or not _stale(path, int(pid_text), grace_s):
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by a live run (any PID namespace): not ours
            if os.fstat(fd).st_ino != os.lstat(path).st_ino:  # replaced since it was judged
                continue
            shutil.rmtree(path, ignore_errors=True)  # fd-based on Linux: never follows a symlink
            if not os.path.lexists(path):
                removed.append(path)
        except OSError:
            continue
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
    return removed

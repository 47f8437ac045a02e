"""The run's private temp dir: every worker's TMPDIR lives in it, and it goes with the run however the run ends.

Workers are killed with SIGKILL (a timeout, Ctrl-C, SIGTERM, SIGHUP), so their own clean-up never runs:
multiprocessing's `pymp-*` dir (DataLoader workers), a `TemporaryDirectory`, Inductor's default cache
(`<temp>/torchinductor_<user>`) would stay in the user's temp dir. So the engine makes one dir per run,
`<TMPDIR>/envcheck-run-<pid>-XXXX`, and each forked worker makes `w<its pid>` in it its TMPDIR (its
subprocesses inherit it); what the fork server's imports write in a temp dir (torch._dynamo makes Inductor's cache
dir) goes in its `shared` part, which the workers forked after them inherit. It is made in the user's temp dir
itself, so it is on the same mount: a noexec or read-only temp dir is still what the checks meet. The engine
removes a worker's part when the worker ends, the whole dir when the run ends (normally, by an exception or a
signal), and the fork server removes it when envcheck is gone without doing so (SIGKILL). A
TORCHINDUCTOR_CACHE_DIR or TRITON_CACHE_DIR the user set is left as it is: that cache is the user's, and whether it
works is the point. Where the temp dir is not writable (a hardened runtime) there is no private dir: the workers get
the environment as it is.

When every process of the run dies at once (a cgroup or PID-namespace kill: Slurm ending the job, `docker kill`,
the OOM killer) none of them can remove the dir. So each process of a run holds a shared lock on it (envcheck
from `create`, the fork server from its start, the workers by inheritance), and `create` first sweeps the temp
dir: a `envcheck-run-<pid>-*` dir goes only when it is this user's real dir (never a symlink, never followed),
older than a few seconds, its pid is no live envcheck (nor python), nobody holds its lock (a live run in
another PID namespace sharing the temp dir keeps its dir) and it holds only worker dirs (and the shared one) of
this user's files (`envcheck.core.stale_rundirs`). A group kill that lands between the fork server's fork and its
setsid takes the server too: that dir also waits for the next run's sweep.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

from envcheck.core import stale_rundirs

RUN_DIR_ENV = "ENVCHECK_RUN_DIR"  # the parent tells the fork server where the run's dir is (popped there)
PREFIX = "envcheck-run-"
MOVED = ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR")  # set in a worker by us (TMPDIR) or by Inductor's first compile
_outer_temp: str | None = None  # in a worker: the temp dir the user's own jobs use
_outer_env: dict[str, str | None] = {}  # in a worker: MOVED as the user set them
_run_dir: str | None = None  # in a worker: the run's dir (its own part's parent)
_held: dict[str, int] = {}  # run dir -> the fd holding its in-use lock (envcheck.core.stale_rundirs)


def create(env: dict[str, str]) -> tuple[str | None, str | None]:
    """A fresh private dir in the temp dir `env` names (TMPDIR, else /tmp, as the user's jobs and their C
    compilers use): (path, None), or (None, why there is none) when that dir is not writable."""
    base = env.get("TMPDIR") or "/tmp"
    stale_rundirs.sweep(
        base, PREFIX
    )  # the dirs of runs killed whole (a cgroup kill) that nothing could remove
    try:
        path = os.path.abspath(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base))
    except OSError as exc:
        return None, (
            f"the temp dir {base} is not writable ({exc.strerror or exc}): the checks run without a "
            "private temp dir, so a check killed there may leave files behind"
        )
    hold(path)
    return path, None


def hold(path: str | None) -> None:
    """Mark the run dir `path` in use while this process (and what it forks) lives, so no sweep takes it."""
    if path and path not in _held:
        fd = stale_rundirs.hold(path)
        if fd is not None:
            _held[path] = fd


def worker_dir(run_dir: str, pid: int) -> str:
    """The part of the run's dir that belongs to the worker `pid`."""
    return os.path.join(run_dir, f"w{pid}")


def enter(run_dir: str | None) -> str | None:
    """In a freshly forked worker: make its own part of `run_dir` this process's temp dir (TMPDIR for the
    processes it starts too); the path, or None when there is none (the environment stays as it is)."""
    global _outer_temp, _outer_env, _run_dir
    if not run_dir:
        return None
    path = worker_dir(run_dir, os.getpid())
    try:
        outer = tempfile.gettempdir()
        os.mkdir(path, 0o700)
    except OSError:
        return None
    _outer_temp, _outer_env, _run_dir = outer, {name: os.environ.get(name) for name in MOVED}, run_dir
    os.environ["TMPDIR"] = path
    tempfile.tempdir = None  # gettempdir() caches; the next call reads TMPDIR again
    process = sys.modules.get("multiprocessing.process")
    if process is not None:  # a pymp-* dir inherited from the fork server would be the server's, not ours
        process.current_process()._config.pop("tempdir", None)
    return path


def shared_dir(run_dir: str | None) -> str | None:
    """The part of `run_dir` that the fork server's imports write in and its later workers inherit, made if need be:
    on the user's temp dir's mount too, and removed with the run. None without a run dir."""
    if run_dir is None:
        return None
    path = os.path.join(run_dir, stale_rundirs.SHARED)
    try:
        os.mkdir(path, 0o700)  # never the run's dir itself: one already removed stays removed
    except FileExistsError:
        pass
    except OSError:
        return None
    return path


def user_temp_dir() -> str:
    """The temp dir the user's own jobs use (in a worker: the one envcheck was started with, not its own)."""
    return _outer_temp or tempfile.gettempdir()


def user_env(name: str) -> str | None:
    """A variable of MOVED as the user set it (in a worker, TMPDIR is ours and Inductor writes its cache dir
    into TORCHINDUCTOR_CACHE_DIR once it compiled); any other variable as it is."""
    return _outer_env[name] if name in _outer_env else os.environ.get(name)


def user_paths(text: str) -> str:
    """`text` (an error message) with this worker's private temp dir, and the run's shared part, written as the
    user's temp dir, where the same file would be in the user's own job (same mount, same problem)."""
    own = os.environ.get("TMPDIR")
    if _outer_temp is None or not own or own == _outer_temp:
        return text
    shared = [os.path.join(_run_dir, stale_rundirs.SHARED)] if _run_dir else []
    outer = _outer_temp
    for private in (own, *shared):
        text = text.replace(private.rstrip("/") + "/", outer.rstrip("/") + "/").replace(private, outer)
    return text


def remove(path: str | None, wait_s: float = 2.0) -> bool:
    """Remove `path` and all in it, retrying for `wait_s` while just-killed processes may still write there;
    whether it is gone. A run dir this process holds stays held until then (no sweep judges it half-removed)."""
    if not path:
        return True
    try:
        return _remove(path, wait_s)
    finally:
        fd = _held.pop(path, None)
        if fd is not None:
            os.close(fd)


def _remove(path: str, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            return True
        if time.monotonic() >= deadline:
            return False
        _grant_write(path)
        time.sleep(0.05)


def _grant_write(folder: str) -> None:
    """A check may have left a dir without write permission (so nothing in it can be removed): give it back."""
    try:
        os.chmod(folder, 0o700)
        with os.scandir(folder) as entries:
            subdirs = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for sub in subdirs:
        _grant_write(sub)

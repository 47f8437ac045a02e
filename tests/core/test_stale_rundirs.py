"""Runs ended where nothing of envcheck can clean up, and the sweep that removes their dirs (envcheck.core.rundir).

Real: the CLI (`python -m envcheck run`), its fork server and forked workers, a real DataLoader's `pymp-*` dir,
SIGKILL, a PID namespace killed whole (`unshare --pid --kill-child`, as `docker kill` ends a container and a
cgroup kill ends a Slurm job), flock. Staged: only the age of the dirs the next run finds (set back past the
sweep's grace with os.utime, as a run minutes later would find them, instead of waiting). Each test has its own
TMPDIR and lists it afterwards.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from envcheck.core import stale_rundirs
from envcheck.core.rundir import PREFIX
from tests.helpers import ROOT, kill_leftovers, processes_with_marker, wait_for

pytest.importorskip("torch")


def _run_dirs(tmp: Path) -> list[Path]:
    return sorted(tmp.glob(f"{PREFIX}*"))


def _start(tmp: Path, marker: str, *module_argv: str, whole_namespace: bool = False) -> subprocess.Popen[str]:
    """`python -m MODULE ARGS` with TMPDIR=tmp; in a PID namespace of its own that dies whole with it."""
    env = {**os.environ, "TMPDIR": str(tmp), "ENVCHECK_TEST_MARKER": marker, "CUDA_VISIBLE_DEVICES": ""}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    argv = [sys.executable, "-m", *module_argv]
    if whole_namespace:
        argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", *argv]
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _age(*paths: Path) -> None:
    """As the next run finds them a minute later: past the sweep's grace for a dir between mkdtemp and lock."""
    then = time.time() - 60
    for path in paths:
        os.utime(path, (then, then))


def _fork_server_started(marker: str) -> bool:
    """Whether the fork server runs its own program (before its exec it is still in envcheck's process group)."""
    for pid in processes_with_marker(marker):
        try:
            if b"envcheck.core.isolation.forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            pass
    return False


@pytest.mark.parametrize("kill", ["envcheck", "its process group"])
def test_envcheck_sigkilled_while_the_fork_server_imports_torch_leaves_no_dir(
    tmp_path: Path, kill: str
) -> None:
    """The fork server (its own session: a group kill such as `timeout -s KILL` or a prolog's group spares it)
    finds envcheck gone when it says hello or ready: a broken pipe, which once skipped its removal of the dir."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    marker = f"envcheck-stale-{uuid.uuid4().hex}"
    proc = _start(tmp, marker, "envcheck", "run", "--allow-cpu")
    try:
        assert wait_for(lambda: _fork_server_started(marker) and _run_dirs(tmp), 60), "no fork server"
        (run_dir,) = _run_dirs(tmp)
        assert list(run_dir.iterdir()) == [], "a worker was already forked: the server had finished importing"
        if kill == "envcheck":
            proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert wait_for(lambda: processes_with_marker(marker) == [], 60), processes_with_marker(marker)
        assert sorted(p.name for p in tmp.iterdir()) == []
    finally:
        kill_leftovers(proc, marker)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) for a PID namespace to kill whole",
)
def test_a_run_killed_whole_is_swept_by_the_next_run_and_a_live_runs_dir_is_not(tmp_path: Path) -> None:
    """Both runs are pid 1 of a PID namespace sharing this TMPDIR (a container with a bind-mounted /tmp), so
    their dirs are `envcheck-run-1-*` and pid 1 here is init: only the live run's lock keeps its dir."""
    if stale_rundirs.run_alive(1):
        pytest.skip("pid 1 here is a python or envcheck process: a dir named for pid 1 is never swept here")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    live_marker, dead_marker = (f"envcheck-stale-{uuid.uuid4().hex}" for _ in range(2))
    live = _start(tmp, live_marker, "tests.core.leftover_driver", "--hang-only", whole_namespace=True)
    dead = None
    try:
        assert wait_for(lambda: list(tmp.glob(f"{PREFIX}*/w*/pymp-*")), 120), (
            "the live run never held its pymp dir"
        )
        (live_dir,) = _run_dirs(tmp)
        dead = _start(tmp, dead_marker, "envcheck", "run", "--allow-cpu", whole_namespace=True)
        assert wait_for(lambda: [d for d in _run_dirs(tmp) if d != live_dir and list(d.glob("w*"))], 120)
        (dead_dir,) = (d for d in _run_dirs(tmp) if d != live_dir)
        dead.kill()  # unshare: --kill-child SIGKILLs envcheck, pid 1 there, and the kernel every process with it
        dead.wait(timeout=10)
        assert wait_for(lambda: processes_with_marker(dead_marker) == [], 30), processes_with_marker(
            dead_marker
        )
        assert dead_dir.is_dir(), "the premise: nothing of the killed run could remove its dir"
        # a process being killed loses its memory (and so its /proc environ) before its fds: wait for the lock
        assert wait_for(lambda: stale_rundirs.abandoned(str(dead_dir), PREFIX), 10)
        assert live_dir.name.startswith(f"{PREFIX}1-") and dead_dir.name.startswith(f"{PREFIX}1-")
        _age(live_dir, dead_dir)

        env = {**os.environ, "TMPDIR": str(tmp), "CUDA_VISIBLE_DEVICES": ""}
        after = subprocess.run(
            [sys.executable, "-m", "envcheck", "run", "--allow-cpu", "--only", "linalg.svd"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert after.returncode == 0, after.stderr
        assert not dead_dir.exists()
        assert live_dir.is_dir() and list(live_dir.glob("w*/pymp-*")), "a live run's dir was swept"
        assert _run_dirs(tmp) == [live_dir]  # the next run removed its own

        live.kill()  # the live run is now killed whole too: the next sweep takes its dir
        live.wait(timeout=10)
        assert wait_for(lambda: processes_with_marker(live_marker) == [], 30), processes_with_marker(
            live_marker
        )
        assert wait_for(lambda: stale_rundirs.abandoned(str(live_dir), PREFIX), 10)
        _age(live_dir)
        assert stale_rundirs.sweep(str(tmp), PREFIX) == [str(live_dir)]
        assert sorted(p.name for p in tmp.iterdir()) == []
    finally:
        kill_leftovers(live, live_marker)
        if dead is not None:
            kill_leftovers(dead, dead_marker)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_the_sweep_takes_only_dead_runs_own_dirs(tmp_path: Path) -> None:
    """What the sweep must leave: a symlink (and what it points at), a dir holding anything but worker dirs, a
    dir younger than the grace, the dir of a live envcheck that holds no lock (an older envcheck), a dir
    someone holds the lock of. What it takes: a dead run's dir of worker dirs and its shared dir, whatever they
    hold."""
    pid = _dead_pid()
    dead = tmp_path / f"{PREFIX}{pid}-dead"
    (dead / "w12" / "pymp-x").mkdir(parents=True)
    (dead / "w12" / "pymp-x" / "listener-y").write_text("")
    (dead / "w12" / "link-out").symlink_to(tmp_path / "precious")
    (dead / "shared" / "torchinductor_x").mkdir(parents=True)  # the compile workers' cache
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("")
    (tmp_path / f"{PREFIX}{pid}-symlink").symlink_to(precious)
    foreign = tmp_path / f"{PREFIX}{pid}-foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not envcheck's")
    young = tmp_path / f"{PREFIX}{pid}-young"
    (young / "w1").mkdir(parents=True)
    locked = tmp_path / f"{PREFIX}{pid}-locked"
    (locked / "w1").mkdir(parents=True)
    older = subprocess.Popen(["bash", "-c", "exec -a envcheck sleep 60"])  # an envcheck without the lock
    assert wait_for(lambda: Path(f"/proc/{older.pid}/cmdline").read_bytes() == b"envcheck\x0060\x00", 10)
    unlocked_live = tmp_path / f"{PREFIX}{older.pid}-live"
    (unlocked_live / "w1").mkdir(parents=True)
    try:
        _age(dead, foreign, locked, unlocked_live)
        holder = stale_rundirs.hold(str(locked))
        assert holder is not None
        try:
            removed = stale_rundirs.sweep(str(tmp_path), PREFIX)
        finally:
            os.close(holder)
    finally:
        older.kill()
        older.wait()
    assert removed == [str(dead)]
    assert (precious / "keep").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["precious", f"{PREFIX}{pid}-symlink", foreign.name, young.name, locked.name, unlocked_live.name]
    )


def test_the_suite_guard_names_a_run_dir_left_behind_and_not_a_live_or_older_one(tmp_path: Path) -> None:
    """tests/conftest.py's session guard (tests/helpers/temp_guard): new and abandoned is named; a dir that was
    there before the session, or that a live run holds, is not."""
    from tests.helpers import temp_guard

    pid = _dead_pid()
    (tmp_path / f"{PREFIX}{pid}-before").mkdir()
    before = temp_guard.run_dirs(str(tmp_path))
    left, held = tmp_path / f"{PREFIX}{pid}-left", tmp_path / f"{PREFIX}{pid}-held"
    left.mkdir()
    held.mkdir()
    holder = stale_rundirs.hold(str(held))
    assert holder is not None
    try:
        assert temp_guard.left_behind(str(tmp_path), before, wait_s=0) == [str(left)]
    finally:
        os.close(holder)

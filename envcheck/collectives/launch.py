"""The coordinator: start one process per rank (forked while CUDA is untouched here, else spawned), watch their heartbeats, enforce a deadline, clean up.

Ranks are plain child processes of the check's worker (same process group, so the engine's kill on
timeout reaches them too). Rendezvous is a TCPStore the coordinator binds on an ephemeral port of
127.0.0.1, so no fixed port (29500) is ever assumed and there is no port race.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from envcheck.collectives.forked import ForkedRank
from envcheck.collectives.shm import remove_segments, segments_mapped_by
from envcheck.collectives.workdirs import WORKDIR_PREFIX, sweep_stale_workdirs
from envcheck.core.check import MEMORY_FRACTION
from envcheck.core.errors import StartFailure, process_start_problem
from envcheck.probe.system import mapped_paths

POLL_S = 0.05
GRACE_S = 3.0  # how long the other ranks get to notice a dead peer before they are killed
LOG_TAIL = 6000


@dataclass(frozen=True)
class LaunchPlan:
    """What to run: backend, world size, steps, sizes, the internal deadline and extra environment."""

    backend: str
    world_size: int
    steps: tuple[str, ...]
    deadline_s: float
    sizes: tuple[int, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    start: str = "spawn"  # "fork" (when this process has not initialised CUDA, see can_fork) or "spawn"
    memory_fraction: float = MEMORY_FRACTION  # GPU sweep: share of free memory the largest message may use
    floor_bytes: int | None = None  # GPU sweep: a busbw floor's message size, added when it fits the budget


@dataclass
class RankOutcome:
    """How one rank ended: exit code, whether the coordinator killed it, last phase, findings, log."""

    rank: int
    exit_code: int | None
    killed: bool
    phases: list[tuple[str, float]]
    found: dict[str, Any] | None
    log: str

    @property
    def phase(self) -> str:
        """The last phase this rank entered."""
        return self.phases[-1][0] if self.phases else "not started"


@dataclass
class LaunchOutcome:
    """Everything the checks need to judge one launch."""

    plan: LaunchPlan
    ranks: list[RankOutcome]
    elapsed_s: float
    deadline_hit: bool
    shm_removed: list[str] = field(default_factory=list)
    started_at: float = 0.0  # unix time, to turn phase times into offsets

    @property
    def ok(self) -> bool:
        """Every rank exited 0 with findings."""
        return all(r.exit_code == 0 and r.found and "error" not in r.found for r in self.ranks)


def _rank_env(plan: LaunchPlan) -> dict[str, str]:
    env = dict(os.environ)
    env.update(dict(plan.env))
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # all ranks are local
    env.setdefault("OMP_NUM_THREADS", "1")
    if plan.backend == "nccl":
        env.setdefault("NCCL_DEBUG", "INFO")
        env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    return env


def read_progress(path: Path) -> list[tuple[str, float]]:
    """The (phase, unix time) lines a rank wrote, oldest first."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    return [(p, float(t)) for p, _, t in (line.partition(" ") for line in lines) if t]


class RankProcess(Protocol):
    """What the coordinator needs from a rank process (Popen or ForkedRank)."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send_signal(self, sig: int) -> None: ...


CUDA_ERROR_NOT_INITIALIZED = 3


def mapped_libcuda(maps: str | None = None) -> str | None:
    """The path of the CUDA driver library mapped into this process, or None."""
    paths = mapped_paths(maps)
    if paths is None:
        return "unknown"  # cannot tell: callers treat it as loaded
    return next((p for p in sorted(paths) if "/libcuda.so" in p), None)


def cuda_driver_initialised(maps: str | None = None) -> bool:
    """Whether cuInit has run in this process (a child forked after it fails with "initialization error").

    torch.cuda.is_initialized() does not see a cuInit made through cudaGetDeviceCount, and on the H100 proof
    host libcuda was already mapped in a coordinator that had not called it. So ask the driver: while cuInit
    has not run, cuDeviceGetCount returns CUDA_ERROR_NOT_INITIALIZED, without initialising anything.
    """
    import ctypes

    path = mapped_libcuda(maps)
    if path is None:
        return False
    try:
        lib = ctypes.CDLL(
            path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY
        )  # the copy already mapped, never a new one
        count = ctypes.c_int(0)
        return int(lib.cuDeviceGetCount(ctypes.byref(count))) != CUDA_ERROR_NOT_INITIALIZED
    except (OSError, AttributeError):
        return True  # cannot tell: assume initialised, and spawn


def can_fork(backend: str, maps: str | None = None) -> bool:
    """Forking ranks is safe while this process has not initialised CUDA: for NCCL ranks (which use CUDA)
    cuInit must not have run here; gloo ranks never touch CUDA, so only torch's own CUDA state counts."""
    import torch

    if torch.cuda.is_initialized():
        return False
    return backend != "nccl" or not cuda_driver_initialised(maps)


def _spawn_rank(rank: int, argv: list[str], workdir: Path, env: dict[str, str]) -> RankProcess:
    with (workdir / f"rank{rank}.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "envcheck.collectives.rank", *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )


def _fork_rank(rank: int, argv: list[str], workdir: Path, env: dict[str, str]) -> tuple[RankProcess, int]:
    """Fork a rank that reads the store port from a pipe; returns it and the pipe's write end."""
    from envcheck.collectives import rank as rank_main

    read_fd, write_fd = os.pipe()
    child_argv = [*argv[:2], f"fd:{read_fd}", *argv[3:]]

    def target() -> int:
        os.close(write_fd)
        return rank_main.main(child_argv)

    proc = ForkedRank(target, str(workdir / f"rank{rank}.log"), env)
    os.close(read_fd)
    return proc, write_fd


def launch(plan: LaunchPlan) -> LaunchOutcome:
    """Run every rank to completion, death or the deadline; never leaves a rank behind, nor its work
    directory (removed on every path here; a SIGKILL that skips this is swept by the next launch)."""
    sweep_stale_workdirs()
    workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))
    try:
        return _launch(plan, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _launch(plan: LaunchPlan, workdir: Path) -> LaunchOutcome:
    import torch.distributed as dist

    began, started_at = time.monotonic(), time.time()
    config = json.dumps(
        {
            "backend": plan.backend,
            "steps": list(plan.steps),
            "sizes": list(plan.sizes),
            "memory_fraction": plan.memory_fraction,
            "floor_bytes": plan.floor_bytes,
            "collective_timeout_s": plan.deadline_s + 5.0,
        }
    )
    env = _rank_env(plan)
    fork = plan.start == "fork" and can_fork(plan.backend)
    procs: list[RankProcess] = []
    pipes: list[int] = []
    store = None
    try:
        # Forked ranks are started BEFORE the store exists: forking while its server thread runs
        # can deadlock a child (observed: a rank stuck creating its store client). They get the port
        # through a pipe. Spawned ranks exec a fresh interpreter, so the order does not matter.
        argv = ["RANK", str(plan.world_size), "PORT", str(workdir), config]
        for rank in range(plan.world_size) if fork else ():
            proc, write_fd = _fork_rank(rank, [str(rank), *argv[1:]], workdir, env)
            procs.append(proc)
            pipes.append(write_fd)
        store = dist.TCPStore(
            "127.0.0.1",
            0,
            plan.world_size + 1,
            is_master=True,
            wait_for_workers=False,
            timeout=timedelta(seconds=plan.deadline_s),
        )
        for write_fd in pipes:
            os.write(write_fd, f"{store.port}\n".encode())
        for rank in () if fork else range(plan.world_size):
            procs.append(_spawn_rank(rank, [str(rank), argv[1], str(store.port), *argv[3:]], workdir, env))
        deadline_hit = _supervise(procs, began + plan.deadline_s)
    except OSError as exc:
        if len(procs) < plan.world_size:  # a rank could not be forked or spawned (e.g. ulimit -u reached)
            who = f"rank {len(procs)} of {plan.world_size}"
            raise StartFailure(f"{who}: {process_start_problem(exc)}", who=who) from None
        raise
    finally:
        for write_fd in pipes:
            os.close(write_fd)
        killed, shm_removed = _kill_all(procs)
        del store
    ranks = [_collect(workdir, rank, proc, rank in killed) for rank, proc in enumerate(procs)]
    return LaunchOutcome(
        plan, ranks, round(time.monotonic() - began, 3), deadline_hit, shm_removed, started_at
    )


def _supervise(procs: list[RankProcess], deadline: float) -> bool:
    """Wait until all ranks exit; after the first failure give the rest GRACE_S. True if deadline hit."""
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return False
        now = time.monotonic()
        if now >= deadline:
            return True
        if any(c not in (None, 0) for c in codes):
            deadline = min(deadline, now + GRACE_S)
        time.sleep(POLL_S)


def _kill_all(procs: list[RankProcess]) -> tuple[set[int], list[str]]:
    """SIGKILL every live rank, reap all, unlink the NCCL segments the killed ranks had mapped."""
    segments: set[str] = set()
    killed = set()
    for rank, proc in enumerate(procs):
        if proc.poll() is None:
            killed.add(rank)
            segments |= segments_mapped_by(proc.pid)
            try:
                proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    return killed, remove_segments(segments)


def _collect(workdir: Path, rank: int, proc: RankProcess, killed: bool) -> RankOutcome:
    found = None
    try:
        found = json.loads((workdir / f"rank{rank}.json").read_text())
    except (OSError, ValueError):
        pass
    try:
        log = (workdir / f"rank{rank}.log").read_bytes().decode(errors="replace")[-LOG_TAIL:]
    except OSError:
        log = ""
    return RankOutcome(
        rank, proc.returncode, killed, read_progress(workdir / f"rank{rank}.progress"), found, log
    )

"""Container limits that break real jobs: /dev/shm, DataLoader workers, pinned memory, memlock."""

from __future__ import annotations

import multiprocessing
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.hardening import MIN_SHM_BYTES, SHM_FIX, SHM_SMALL, runtime_cause, tmp_unwritable
from envcheck.core.result import FaultClass, Result, failed, passed, warned
from envcheck.probe.facts import shm_bytes
from envcheck.probe.system import is_absent

MEMLOCK_FIX = "docker run --ulimit memlock=-1 ... (compose: ulimits: memlock: -1)"
BATCH_FLOATS = 1 << 20  # 4 MiB per batch: passes through /dev/shm between workers and the main process
LOADER_TIMEOUT_S = (
    15  # per batch once running: healthy, 8 batches take ~0.1 s; a full /dev/shm stalls instead
)
# Until the first batch. Spawned (and forkserver) workers import torch first: seconds, more on a cold cache. Forked
# workers inherit the imported torch, so a healthy first batch takes about 0.1 s even on a busy host, and the usual way
# it never comes is the same as a stalled delivery (a /dev/shm too small for one batch, or full: the worker's queue
# thread cannot write the batch and drops it, nothing dies): so a fork gets the per-batch bound, 15 s, not 45.
STARTUP_TIMEOUT_S = 45


def container_shm(ctx: Context) -> Result:
    """/dev/shm is at least 1 GiB (DataLoader workers and NCCL both live in it)."""
    size = shm_bytes()
    if is_absent(size) or not isinstance(size, int):
        return failed(
            "/dev/shm is not mounted", SHM_FIX, measured={"shm": size}, fault_class=FaultClass.CONFIG
        )
    measured = {"shm_bytes": size, "shm_mib": size // 2**20}
    if size < MIN_SHM_BYTES:
        return warned(
            f"/dev/shm is {size / 2**20:.0f} MiB, under 1 GiB: DataLoader workers and NCCL may crash or hang",
            SHM_FIX,
            measured=measured,
            expected={"min_shm_bytes": MIN_SHM_BYTES},
            fault_class=FaultClass.CONFIG,
            code=SHM_SMALL,
        )
    return passed(
        f"/dev/shm is {size / 2**30:.1f} GiB", measured=measured, expected={"min_shm_bytes": MIN_SHM_BYTES}
    )


class _Batches:
    """A picklable dataset of 4 MiB tensors (big enough to need shared memory)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> Any:
        import torch

        return torch.full((BATCH_FLOATS,), float(i))


def dataloader_runs(
    ctx: Context,
    *,
    dataset: Any = None,
    startup_timeout_s: float | None = None,
    batch_timeout_s: float = LOADER_TIMEOUT_S,
    worker_init_fn: Callable[[int], None] | None = None,
) -> tuple[bool, str, dict[str, Any]]:
    """Run a 2-worker DataLoader (pinned when CUDA is up); (ok, problem, measured).

    Two phases, each with its own bound: start-up (workers start; spawned ones would import torch) ends
    with the first batch, within `startup_timeout_s` (default: the per-batch bound when forked, else 45 s);
    delivery is every later batch, each within `batch_timeout_s`.
    """
    import torch
    from torch.utils.data import DataLoader

    pin = torch.cuda.is_available()
    # The start method the user's own DataLoader gets (fork on Linux before Python 3.14): workers forked
    # from a process that holds a CUDA context are what every training job runs, and they are safe as long
    # as they never touch CUDA (these do not; pinning happens in this process). Spawned workers would each
    # import torch (6 s on the H100 proof host) and test a path most jobs never take.
    method = multiprocessing.get_start_method()
    if startup_timeout_s is None:
        startup_timeout_s = LOADER_TIMEOUT_S if method == "fork" else STARTUP_TIMEOUT_S
    data = _Batches() if dataset is None else dataset
    loader = DataLoader(
        data,
        batch_size=None,
        num_workers=2,
        pin_memory=pin,
        timeout=startup_timeout_s,
        multiprocessing_context=method,
        worker_init_fn=worker_init_fn,
    )
    seen: list[float] = []
    measured: dict[str, Any] = {
        "start": method,
        "pinned": pin,
        "startup_bound_s": startup_timeout_s,
        "batch_bound_s": batch_timeout_s,
    }
    phase = "start-up"
    start = time.monotonic()
    try:
        batches = iter(loader)
        for batch in batches:
            if not seen:
                measured["startup_s"] = round(time.monotonic() - start, 3)
                phase, start = "delivery", time.monotonic()
                if hasattr(batches, "_timeout"):  # torch reads loader.timeout once, into the iterator
                    batches._timeout = batch_timeout_s
            seen.append(float(batch[0]))
            if pin and not batch.is_pinned():
                return False, "pin_memory=True returned unpinned batches", {**measured, "pinned": False}
    except Exception as exc:
        text = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        bound = startup_timeout_s if phase == "start-up" else batch_timeout_s
        what = (
            f"its workers did not deliver a first batch within the {bound:g}s start-up bound"
            if phase == "start-up"
            else f"delivery stalled after {len(seen)} batch(es) (bound {bound:g}s per batch)"
        )
        return False, f"{what}: {text}", {**measured, "batches": len(seen), "failed_in": phase}
    measured.update(batches=len(seen), delivery_s=round(time.monotonic() - start, 3))
    ok = sorted(seen) == [float(i) for i in range(len(data))]
    return ok, "" if ok else f"wrong batches {seen}", measured


def container_limits(ctx: Context) -> Result:
    """A DataLoader with 2 workers runs; memlock is high enough when several GPUs must talk."""
    import torch

    try:
        tempfile.gettempdir()
    except FileNotFoundError as exc:  # seen with `docker run --read-only`: the workers fail, the loader hangs
        return tmp_unwritable(
            "a DataLoader with workers cannot deliver a batch: multiprocessing's resource "
            "sharer needs a socket in a temp dir, its workers fail and the loader hangs until "
            "its timeout",
            str(exc)[:200],
        )
    ok, problem, measured = dataloader_runs(ctx)
    if not ok:
        size = shm_bytes()
        small = isinstance(size, int) and size < MIN_SHM_BYTES
        limit = runtime_cause(
            RuntimeError(problem), f"a DataLoader with 2 workers failed: {problem}", trace=False
        )
        if limit is not None and not small and "shared memory" not in problem:  # shm's EAGAIN is not nproc
            return replace(limit, measured=measured)  # a process or file limit: its own code and fix
        if small and isinstance(size, int):
            problem += f" (/dev/shm is only {size / 2**20:.0f} MiB)"
        # shm size and ulimits are set by how the container or job was started (--shm-size, --ulimit)
        return failed(
            f"a DataLoader with 2 workers failed: {problem}",
            SHM_FIX,
            measured=measured,
            expected={"batches": 8},
            fault_class=FaultClass.CONFIG,
            code=SHM_SMALL if small else None,
        )
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    measured.update(memlock_bytes="unlimited" if soft == resource.RLIM_INFINITY else soft, gpus=gpus)
    if gpus > 1 and soft != resource.RLIM_INFINITY and soft < (64 << 20):
        return warned(
            f"memlock ulimit is {soft // 1024} KiB with {gpus} GPUs: NCCL and pinned memory need more",
            MEMLOCK_FIX,
            measured=measured,
            expected={"memlock": "unlimited"},
            fault_class=FaultClass.CONFIG,
        )
    return passed(
        f"DataLoader with 2 workers delivered 8/8 batches ({measured.get('start')}, "
        f"pinned={measured.get('pinned')}; start-up {measured.get('startup_s')}s, "
        f"delivery {measured.get('delivery_s')}s)",
        measured=measured,
    )


CHECKS = (
    CheckSpec("container.shm", container_shm, "/dev/shm is at least 1 GiB", isolated=False, timeout_s=5),
    CheckSpec(
        "container.limits",
        container_limits,
        "a 2-worker DataLoader runs; memlock fits multi-GPU",
        needs=Needs(torch=True),
        timeout_s=90,
    ),
)

"""Container limits that break real jobs: /dev/shm, DataLoader workers, pinned memory, memlock."""

from __future__ import annotations

import resource
from typing import Any

from envcheck.checks.facts import shm_bytes
from envcheck.checks.probe import is_absent
from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import Result, failed, passed, warned

MIN_SHM_BYTES = 1 << 30
SHM_FIX = "docker run --ipc=host ... (or --shm-size=8g; in compose: ipc: host or shm_size: 8gb)"
MEMLOCK_FIX = "docker run --ulimit memlock=-1 ... (compose: ulimits: memlock: -1)"
BATCH_FLOATS = 1 << 20  # 4 MiB per batch: passes through /dev/shm between workers and the main process
LOADER_TIMEOUT_S = 15  # healthy: 8 batches take ~0.1 s; a full /dev/shm stalls the workers instead


def container_shm(ctx: Context) -> Result:
    """/dev/shm is at least 1 GiB (DataLoader workers and NCCL both live in it)."""
    size = shm_bytes()
    if is_absent(size) or not isinstance(size, int):
        return failed("/dev/shm is not mounted", SHM_FIX, measured={"shm": size})
    measured = {"shm_bytes": size, "shm_mib": size // 2**20}
    if size < MIN_SHM_BYTES:
        return warned(f"/dev/shm is {size / 2**20:.0f} MiB, under 1 GiB: DataLoader workers and NCCL may crash "
                      "or hang", SHM_FIX, measured=measured, expected={"min_shm_bytes": MIN_SHM_BYTES})
    return passed(f"/dev/shm is {size / 2**30:.1f} GiB", measured=measured,
                  expected={"min_shm_bytes": MIN_SHM_BYTES})


class _Batches:
    """A picklable dataset of 4 MiB tensors (big enough to need shared memory)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> Any:
        import torch

        return torch.full((BATCH_FLOATS,), float(i))


def dataloader_runs(ctx: Context) -> tuple[bool, str, dict[str, Any]]:
    """Run a 2-worker DataLoader (pinned when CUDA is up); (ok, problem, measured)."""
    import torch
    from torch.utils.data import DataLoader

    pin = torch.cuda.is_available()
    method = "spawn" if torch.cuda.is_initialized() else "fork"
    loader = DataLoader(_Batches(), batch_size=None, num_workers=2, pin_memory=pin, timeout=LOADER_TIMEOUT_S,
                        multiprocessing_context=method)
    seen = []
    try:
        for batch in loader:
            seen.append(float(batch[0]))
            if pin and not batch.is_pinned():
                return False, "pin_memory=True returned unpinned batches", {"pinned": False}
    except Exception as exc:
        return False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", {"batches": len(seen)}
    ok = sorted(seen) == [float(i) for i in range(8)]
    return ok, "" if ok else f"wrong batches {seen}", {"batches": len(seen), "pinned": pin, "start": method}


def container_limits(ctx: Context) -> Result:
    """A DataLoader with 2 workers runs; memlock is high enough when several GPUs must talk."""
    import torch

    ok, problem, measured = dataloader_runs(ctx)
    if not ok:
        size = shm_bytes()
        if isinstance(size, int) and size < MIN_SHM_BYTES:
            problem += f" (/dev/shm is only {size / 2**20:.0f} MiB)"
        return failed(f"a DataLoader with 2 workers failed: {problem}", SHM_FIX, measured=measured,
                      expected={"batches": 8})
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    measured.update(memlock_bytes="unlimited" if soft == resource.RLIM_INFINITY else soft, gpus=gpus)
    if gpus > 1 and soft != resource.RLIM_INFINITY and soft < (64 << 20):
        return warned(f"memlock ulimit is {soft // 1024} KiB with {gpus} GPUs: NCCL and pinned memory need more",
                      MEMLOCK_FIX, measured=measured, expected={"memlock": "unlimited"})
    return passed(f"DataLoader with 2 workers delivered 8/8 batches ({measured.get('start')}, "
                  f"pinned={measured.get('pinned')})", measured=measured)


CHECKS = (
    CheckSpec("container.shm", container_shm, "/dev/shm is at least 1 GiB", isolated=False, timeout_s=5),
    CheckSpec("container.limits", container_limits, "a 2-worker DataLoader runs; memlock fits multi-GPU",
              needs=Needs(torch=True), timeout_s=90),
)

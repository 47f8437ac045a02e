"""What every rank does once its process group is up: exact collectives, then the optional sweep.

`progress(phase)` is called right before each collective, after local preparation, so a rank that
never reaches a collective is told apart from the ranks waiting inside it.

Shared by the single-node launcher's ranks (`rank.py`) and the torchrun entry point.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.checks.distributed import pattern
from envcheck.checks.distributed.faults import Fault, apply_at_all_reduce
from envcheck.checks.distributed.sweep import CPU_SIZES, MIB, gpu_sizes, sweep, sweep_memory

Progress = Callable[[str], None]
GPU_EXACT_COUNT = 4 << 20  # 16 MiB of float32
CPU_EXACT_COUNT = 1 << 18  # 1 MiB of float32
LOWP_COUNT = 1 << 16
GATHER_COUNT = 4096


def exact_all_reduce(rank: int, world: int, device: Any, fault: Fault | None, progress: Progress) -> dict[str, Any]:
    """float32 all-reduce of known integer inputs; every element compared (nccl-tests #wrong)."""
    import torch.distributed as dist

    count = GPU_EXACT_COUNT if device.type == "cuda" else CPU_EXACT_COUNT
    buf = pattern.exact_contribution(rank, count, device)
    apply_at_all_reduce(fault, rank, buf)
    progress("all_reduce.float32")
    dist.all_reduce(buf)
    wrong, first = pattern.count_wrong(buf, pattern.exact_sum(world, count, device))
    out: dict[str, Any] = {"elements": count, "wrong": wrong, "first_wrong_index": first}
    if first is not None:
        out["first_wrong_value"] = float(buf[first].item())
        out["first_expected_value"] = float(pattern.exact_sum(world, first + 1, device)[first].item())
    return out


def lowp_all_reduce(rank: int, world: int, device: Any, progress: Progress) -> dict[str, Any]:
    """bfloat16 and float16 all-reduce of inputs whose sum is exact in the dtype; every element compared."""
    import torch
    import torch.distributed as dist

    out = {}
    for dtype in (torch.bfloat16, torch.float16):
        name = str(dtype).removeprefix("torch.")
        buf = pattern.lowp_contribution(rank, world, LOWP_COUNT, dtype, device)
        progress(f"all_reduce.{name}")
        dist.all_reduce(buf)
        out[name] = pattern.lowp_check(buf, world, dtype)
    return out


def gather_and_broadcast(rank: int, world: int, device: Any, progress: Progress) -> dict[str, Any]:
    """all_gather of rank-tagged data and broadcast from the last rank, compared exactly."""
    import torch
    import torch.distributed as dist

    progress("all_gather")
    parts = [torch.empty(GATHER_COUNT, device=device) for _ in range(world)]
    dist.all_gather(parts, pattern.gather_pattern(rank, GATHER_COUNT, device))
    gather_wrong = sum(pattern.count_wrong(p, pattern.gather_pattern(r, GATHER_COUNT, device))[0]
                       for r, p in enumerate(parts))
    progress("broadcast")
    root = world - 1
    expected = pattern.broadcast_pattern(GATHER_COUNT, device)
    buf = expected.clone() if rank == root else torch.full((GATHER_COUNT,), -1.0, device=device)
    dist.broadcast(buf, src=root)
    return {
        "all_gather": {"elements": GATHER_COUNT * world, "wrong": gather_wrong},
        "broadcast": {"elements": GATHER_COUNT, "wrong": pattern.count_wrong(buf, expected)[0], "root": root},
    }


def agreed_gpu_sizes(device: Any, memory_fraction: float) -> tuple[int, ...]:
    """Sweep sizes from the smallest free memory of any rank, so every rank uses the same list."""
    import torch
    import torch.distributed as dist

    free = torch.tensor([torch.cuda.mem_get_info(device)[0]], device=device, dtype=torch.int64)
    dist.all_reduce(free, op=dist.ReduceOp.MIN)
    sizes = gpu_sizes(int(free.item()), memory_fraction)
    if not sizes:
        raise RuntimeError(f"only {int(free.item()) / MIB:.0f} MiB of GPU memory free on some rank; the sweep "
                           f"needs {sweep_memory(MIB) / MIB:.0f} MiB for its smallest size")
    return sizes


def run_plan(rank: int, world: int, device: Any, steps: tuple[str, ...], sizes: tuple[int, ...],
             progress: Progress, fault: Fault | None = None, memory_fraction: float = 0.1) -> dict[str, Any]:
    """Run the requested steps (`correctness`, `sweep`) and return this rank's findings."""
    found: dict[str, Any] = {"rank": rank, "device": str(device)}
    if "correctness" in steps:
        found["all_reduce"] = {"float32": exact_all_reduce(rank, world, device, fault, progress),
                               **lowp_all_reduce(rank, world, device, progress)}
        found.update(gather_and_broadcast(rank, world, device, progress))
    if "sweep" in steps:
        if not sizes:
            sizes = agreed_gpu_sizes(device, memory_fraction) if device.type == "cuda" else CPU_SIZES
        found["sweep"] = sweep(sizes, device, progress)
    progress("done")
    return found

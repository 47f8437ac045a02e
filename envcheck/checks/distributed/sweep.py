"""The all-reduce bandwidth sweep (nccl-tests conventions), reusable by checks and bench scripts.

`sweep` runs inside an initialised process group; every rank must call it with the same sizes.
"""

from __future__ import annotations

import time
from typing import Any

from envcheck.checks.distributed.pattern import VERIFY_WORKSPACE_BYTES, count_wrong_exact, fill_exact

MIB = 1 << 20
CPU_SIZES = tuple(MIB // 16 * 4**k for k in range(5))  # 64 KiB .. 16 MiB
CPU_QUICK_SIZES = (MIB // 4, MIB)
GPU_MIN_TOP = 256 * MIB
GPU_MAX_TOP = 1024 * MIB


def busbw(algbw: float, world_size: int) -> float:
    """All-reduce bus bandwidth: algbw * 2(n-1)/n (nccl-tests); 0 for a single rank."""
    if world_size < 1:
        raise ValueError("world_size must be at least 1")
    return algbw * 2 * (world_size - 1) / world_size


def algbw(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth in base-10 GB/s."""
    return nbytes / seconds / 1e9 if seconds > 0 else 0.0


# What one sweep size holds on the GPU at once: the message buffer (all-reduced in place), the
# verification's chunked temporaries, and room for NCCL's own buffers (channels x peers x
# NCCL_BUFFSIZE, plus the communicator's workspace), which grow with the number of peers.
NCCL_MARGIN_BYTES = 512 * MIB


def sweep_memory(nbytes: int) -> int:
    """Device bytes one sweep size of `nbytes` needs at its peak (message + verification + NCCL)."""
    return nbytes + VERIFY_WORKSPACE_BYTES + NCCL_MARGIN_BYTES


def gpu_sizes(free_bytes: int, memory_fraction: float) -> tuple[int, ...]:
    """1 MiB doubling up to the largest power of two that fits.

    The largest message is aimed at `memory_fraction` of the free memory (but at least GPU_MIN_TOP,
    at most GPU_MAX_TOP), and never so large that `sweep_memory` of it exceeds the free memory.
    Empty when not even 1 MiB fits.
    """
    aim = min(GPU_MAX_TOP, max(int(free_bytes * memory_fraction), GPU_MIN_TOP))
    sizes, size = [], MIB
    while size <= aim and sweep_memory(size) <= free_bytes:
        sizes.append(size)
        size *= 2
    return tuple(sizes)


def iterations(nbytes: int, on_gpu: bool) -> tuple[int, int]:
    """(warm-up, timed) iteration counts; identical on every rank because they depend on size only."""
    if on_gpu:
        return 5, 20
    return 2, max(3, min(20, (32 * MIB) // nbytes))


def _time_all_reduce(buf: Any, warmup: int, iters: int, on_gpu: bool) -> float:
    import torch
    import torch.distributed as dist

    for _ in range(warmup):
        dist.all_reduce(buf)
    if on_gpu:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        start.record()
        for _ in range(iters):
            dist.all_reduce(buf)
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3 / iters
    dist.barrier()
    began = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    return (time.perf_counter() - began) / iters


def sweep(sizes: tuple[int, ...], device: Any, progress: Any = None) -> list[dict[str, Any]]:
    """Time float32 all-reduce per size (max over ranks) and verify one exact run per size."""
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    on_gpu = device.type == "cuda"
    rows = []
    for nbytes in sizes:
        if progress is not None:
            progress(f"sweep.{nbytes}")
        count = nbytes // 4
        buf = torch.zeros(count, device=device, dtype=torch.float32)
        seconds = torch.tensor([_time_all_reduce(buf, *iterations(nbytes, on_gpu), on_gpu)], device=device,
                               dtype=torch.float64)
        dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
        fill_exact(buf, rank)
        dist.all_reduce(buf)
        wrong = count_wrong_exact(buf, world)
        del buf
        t = float(seconds.item())
        rows.append({"bytes": nbytes, "dtype": "float32", "time_us": round(t * 1e6, 2),
                     "algbw_gbps": round(algbw(nbytes, t), 4),
                     "busbw_gbps": round(busbw(algbw(nbytes, t), world), 4), "wrong": wrong})
    return rows

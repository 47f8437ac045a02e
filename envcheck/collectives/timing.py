"""Shared timing (nccl-tests conventions): algbw/busbw arithmetic and how one collective is timed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

MIB = 1 << 20


def busbw(algbw: float, world_size: int) -> float:
    """All-reduce bus bandwidth: algbw * 2(n-1)/n (nccl-tests); 0 for a single rank."""
    if world_size < 1:
        raise ValueError("world_size must be at least 1")
    return algbw * 2 * (world_size - 1) / world_size


def algbw(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth in base-10 GB/s."""
    return nbytes / seconds / 1e9 if seconds > 0 else 0.0


def iterations(nbytes: int, on_gpu: bool) -> tuple[int, int]:
    """(warm-up, timed) iteration counts; identical on every rank because they depend on size only."""
    if on_gpu:
        return 5, 20
    return 2, max(3, min(20, (32 * MIB) // nbytes))


def time_op(op: Callable[[], Any], warmup: int, iters: int, on_gpu: bool, group: Any = None) -> float:
    """Seconds per call of `op` (a collective), after a barrier of `group` (default: all ranks): CUDA events on
    GPU, perf_counter on CPU."""
    import torch
    import torch.distributed as dist

    for _ in range(warmup):
        op()
    if on_gpu:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier(group=group)
        start.record()
        for _ in range(iters):
            op()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3 / iters
    dist.barrier(group=group)
    began = time.perf_counter()
    for _ in range(iters):
        op()
    return (time.perf_counter() - began) / iters


def slowest_rank(seconds: float, device: Any, group: Any = None) -> float:
    """The maximum of `seconds` over the ranks of `group` (default: all ranks; collective)."""
    import torch
    import torch.distributed as dist

    value = torch.tensor([seconds], device=device, dtype=torch.float64)
    dist.all_reduce(value, op=dist.ReduceOp.MAX, group=group)
    return float(value.item())

"""The all-reduce busbw sweep as bench figures (the sweep itself is the distributed check's)."""

from __future__ import annotations

from typing import Any

from envcheck.collectives.bench_sweep import all_reduce_sweep
from envcheck.core.check import Context
from envcheck.perf.figures import figure


def sweep_sizes(backend: str, quick: bool) -> list[int]:
    """Message sizes in bytes: powers of 4 (quick) or 2 (full) over the backend's useful range."""
    low, high = (1 << 10, 1 << 30) if backend == "nccl" else (1 << 12, (16 if quick else 64) << 20)
    step = 4 if quick else 2
    sizes, n = [], low
    while n <= high:
        sizes.append(n)
        n *= step
    return sizes


def all_reduce_figures(backend: str, ctx: Context) -> list[dict[str, Any]]:
    """busbw per message size for `backend` (nccl over all GPUs, gloo over `cpu_ranks` processes)."""
    if backend == "nccl":
        import torch

        world = torch.cuda.device_count()
    else:
        world = ctx.options.dist.cpu_ranks
    rows = all_reduce_sweep(backend, world, sweep_sizes(backend, not ctx.full), timeout_s=120.0)
    return [
        figure(
            f"all_reduce.{backend}.{row['bytes']}",
            float(row["busbw_gbps"]),
            "GB/s",
            label=f"{backend} all-reduce busbw {row['bytes']} B",
            series=f"{backend} busbw x{world}",
            x=float(row["bytes"]),
            note=f"algbw {row.get('algbw_gbps')} GB/s",
        )
        for row in rows
    ]

"""The collective between the node's devices: an all-reduce (sum) over every worker (NCCL between GPUs, gloo between
CPU workers). As in nccl-tests, the inputs make the expected result exact (small integers in float32, rank r adds r),
so every element is compared and the tolerance is zero; its throughput is nccl-tests' bus bandwidth,
bytes x 2(n-1)/n per second."""

from __future__ import annotations

from typing import Any

from envcheck.burn.workload import Device, Workload

ELEMENTS = {"cuda": 64 << 20, "cpu": 64 << 10}
PATTERN = 251  # a prime: each element's value depends on its place and the seed


def _world() -> tuple[int, int]:
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


def _make(device: Device, seed: int) -> dict[str, Any]:
    import torch

    rank, world = _world()
    base = (torch.arange(ELEMENTS[device.kind], dtype=torch.int64) * 7 + seed) % PATTERN
    expected = base.double() * world + world * (world - 1) / 2
    return {
        "x": (base + rank).to(device=device.torch_device, dtype=torch.float32),
        "expected": expected.to(device.torch_device),
        "world": world,
    }


def _run(x: dict[str, Any]) -> Any:
    import torch.distributed as dist

    out = x["x"].clone()
    dist.all_reduce(out)
    return out


def _supported(device: Device) -> str | None:
    _, world = _world()
    return None if world > 1 else "a collective needs two or more devices in the burn"


def workloads() -> list[Workload]:
    """The all-reduce (float32 sum)."""
    return [
        Workload(
            name="all_reduce.float32",
            unit="GB/s",
            tolerance=0.0,
            inputs=_make,
            run=_run,
            work=lambda x: x["x"].numel() * x["x"].element_size() * 2.0 * (x["world"] - 1) / x["world"],
            reference=lambda x: x["expected"],
            supported=_supported,
        )
    ]
